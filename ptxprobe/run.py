"""Run renamed cubins on a GPU: throughput with confidence intervals, and what the name does to the numbers.

The cubin launched is the exact one ptxprobe assembled for that name (emit -> rename ->
assemble, cached), swapped into a Triton ``CompiledKernel`` so Triton's own launcher
passes every implicit argument. Triton's normal compile of the same kernel (under the same
name, its cache isolated) is compared with it: ``aot_matches_launch`` says the static
analysis looked at the code that really runs.

Timing: warm-up, then rounds; in each round every variant runs (rotated order), the L2 is
flushed before each, CUDA events time ``reps`` back-to-back launches. An A/A control (the
baseline cubin loaded a second time) measures the noise floor in the same run.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import subprocess
import tempfile
from dataclasses import dataclass, field

from . import stats
from .assemble import assemble
from .cache import Cache, sha256_bytes
from .cubin import read_cubin
from .emit import Emitted, Specialization, emit_kernel, import_target, renamed_fn, runtime_params, specialize
from .errors import NoGpu, SpecError
from .launch import LaunchSpec, Resolved, check_against_source, resolve, size_label
from .registry import KernelFamily, KernelSpec, Problem
from .rename import apply_template, rename_entry
from .toolchain import Tool, select_ptxas, triton_ptxas

AA_LABEL = "{base}#AA"
SLOW_LABEL = "{base}#slowed"


@dataclass(frozen=True)
class TimingPlan:
    rounds: int = 20
    reps: int = 3
    warmup: int = 5
    flush_bytes: int = 256 << 20
    n_boot: int = 4000
    seed: int = 0


@dataclass(frozen=True)
class RunConfig:
    """The ``[run]`` table of an experiment."""

    seq_lens: tuple[int, ...] = (1024, 4096, 16384)
    tokens: int = 16384  # batch * seq_len held constant, as in the FlashAttention benchmarks
    heads: int = 32
    numerics_seq_len: int = 1024
    numerics_heads: int = 4
    sdpa_backends: tuple[str, ...] = ("cudnn", "flash")
    slow_control: bool = True  # some groups also time the baseline made slower on purpose
    slow_fraction: float = 0.02  # by this fraction of its own time (a calibrated extra memset)
    timing: TimingPlan = field(default_factory=TimingPlan)

    def problem(self, seq_len: int) -> Problem:
        return Problem(batch=max(1, self.tokens // seq_len), heads=self.heads, seq_len=seq_len)


def require_gpu():
    try:
        import torch
    except ImportError as exc:
        raise NoGpu("torch is not installed; runtime measurements need torch with CUDA") from exc
    if not torch.cuda.is_available():
        raise NoGpu("no CUDA GPU is visible (torch.cuda.is_available() is False): static results only")
    return torch


def device_arch(device: int = 0) -> str:
    torch = require_gpu()
    major, minor = torch.cuda.get_device_capability(device)
    cap = major * 10 + minor
    return f"sm_{cap}a" if cap >= 90 else f"sm_{cap}"


def gpu_info(device: int = 0) -> dict:
    torch = require_gpu()
    props = torch.cuda.get_device_properties(device)
    info = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "arch": device_arch(device),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "memory_gb": props.total_memory / 2**30,
    }
    info.update(_smi(device))
    return info


def _smi(device: int) -> dict:
    q = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--id={device}", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    vals = [v.strip() for v in out.split(",")]
    if len(vals) != 6:
        return {}
    keys = ("driver", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "temperature_c", "power_w")
    return dict(zip(keys, vals, strict=True))


# --- building launchable kernels -----------------------------------------------------------


def triton_compiled(fn, sp: Specialization, options: dict, name: str | None = None):
    """Triton's own compile for the current GPU, under ``name``, with its cache isolated."""
    import triton

    from .emit import is_gluon

    if is_gluon(fn):
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource  # noqa: N814
    else:
        from triton.compiler import ASTSource
    src = ASTSource(renamed_fn(fn, name) if name else fn, sp.signature, sp.constexprs, sp.attrs)
    with tempfile.TemporaryDirectory(prefix="ptxprobe-triton-cache-") as d:
        old = triton.knobs.cache.dir
        triton.knobs.cache.dir = d
        try:
            return triton.compile(src, options=options)
        finally:
            triton.knobs.cache.dir = old


def triton_loader(fn, sp: Specialization, options: dict, tool: Tool, arch: str):
    """(load, launched) for running ptxprobe's cubins through Triton's own launcher.

    ``load(name, cubin)`` swaps a cubin into Triton's compiled kernel; ``launched(name)`` is the
    ``.text`` hash of Triton's own compile under that name, or None when ``tool`` is not the
    ptxas Triton uses (then there is no launch to compare with).
    """
    base = triton_compiled(fn, sp, options)

    def load(name: str, cubin: bytes):
        return with_cubin(base, name, cubin)

    def launched(name: str) -> str:
        return read_cubin(triton_compiled(fn, sp, options, name=name).kernel).kernel(name).text_sha256

    return load, (launched if tool.sha256 == triton_ptxas(arch).sha256 else None)


def _family_options(spec: KernelSpec) -> dict:
    return {"num_warps": spec.config.num_warps, "num_stages": spec.config.num_stages}


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:  # cuda-python before 12.6
        from cuda import cuda as driver
    return driver


def _check(result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    driver = _driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


class CudaKernel:
    """A plain-pointer kernel from a cubin, launched through the CUDA driver API (cuda-bindings).

    Mirrors CompiledKernel's ``kernel[grid](*args)`` so the run stage treats every frontend alike.
    ``ctypes_of`` gives each scalar argument's C type by position (from the entry's PTX
    parameters); without it floats go as float and integers as int.
    """

    def __init__(
        self,
        cubin: bytes,
        name: str,
        shared_bytes: int,
        threads: int | tuple[int, int, int],
        ctypes_of: dict[int, str] | None = None,
    ):
        import ctypes

        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")  # make the primary context current for the driver API
        drv = _driver()
        self.name, self.kernel, self.shared = name, cubin, shared_bytes
        self.block = (threads, 1, 1) if isinstance(threads, int) else tuple(threads)
        self.ctypes_of = dict(ctypes_of or {})
        self.module = _check(drv.cuModuleLoadData(cubin), f"cuModuleLoadData({name})")
        self.function = _check(drv.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        if shared_bytes > 48 * 1024:
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(drv.cuFuncSetAttribute(self.function, attr, shared_bytes), "cuFuncSetAttribute")
        self._ctypes = ctypes

    def _packed(self, args):
        c = self._ctypes
        vals, types = [], []
        for i, a in enumerate(args):
            if hasattr(a, "data_ptr"):
                vals.append(a.data_ptr())
                types.append(c.c_void_p)
            elif i in self.ctypes_of:
                ctype = getattr(c, self.ctypes_of[i])
                vals.append(float(a) if ctype in (c.c_float, c.c_double) else int(a))
                types.append(ctype)
            elif isinstance(a, float):
                vals.append(a)
                types.append(c.c_float)
            elif isinstance(a, (bool, int)):
                vals.append(int(a))
                types.append(c.c_int)
            else:
                raise TypeError(f"cannot pass {type(a).__name__} to a CUDA kernel")
        return tuple(vals), tuple(types)

    def __getitem__(self, grid):
        import torch

        drv = _driver()

        def runner(*args):
            stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
            _check(
                drv.cuLaunchKernel(self.function, *grid, *self.block, self.shared, stream, self._packed(args), 0),
                f"cuLaunchKernel({self.name})",
            )

        return runner


def with_cubin(compiled, name: str, cubin: bytes):
    """A copy of a CompiledKernel that loads ``cubin`` (entry ``name``) instead of its own."""
    k = copy.copy(compiled)
    k.name = name
    k.kernel = cubin
    k.module = k.function = k._run = None
    return k


def cubin_for(emitted: Emitted, name: str, tool: Tool, cache: Cache | None = None) -> tuple[bytes, dict]:
    """ptxprobe's cubin for emitted PTX under ``name``: rename -> assemble (cached)."""
    ptx = emitted.ptx if name == emitted.entry else rename_entry(emitted.ptx, emitted.entry, name).ptx
    art = assemble(ptx, emitted.arch, tool, cache=cache)
    if not art.ok:
        raise RuntimeError(f"ptxas {art.status} for {emitted.kernel} as {name}: {art.stderr[-500:]}")
    data = art.cubin()
    k = read_cubin(data).kernel(name)
    return data, {
        "registers": k.regcount,
        "text_sha256": k.text_sha256,
        "ptxas_version": tool.version,
        "ptxas_sha256": tool.sha256,
        "cubin_sha256": sha256_bytes(data),
    }


def aot_cubin(
    family: KernelFamily,
    spec: KernelSpec,
    arch: str,
    problem: Problem,
    name: str,
    cache: Cache | None = None,
    tool: Tool | None = None,
) -> tuple[bytes, dict]:
    """ptxprobe's cubin for (spec, problem) under ``name``: emit -> rename -> assemble (cached)."""
    e = emit_kernel(family, spec, arch, problem=problem, cache=cache)
    return cubin_for(e, name, tool or triton_ptxas(arch), cache)


# --- measuring -----------------------------------------------------------------------------


def time_interleaved(fns: dict, plan: TimingPlan) -> dict[str, stats.Measurement]:
    """Per-round times (ms per launch) of each callable, rounds interleaved and rotated."""
    torch = require_gpu()
    flush = torch.empty(plan.flush_bytes // 4, dtype=torch.int32, device="cuda")
    labels = list(fns)
    for fn in fns.values():
        for _ in range(plan.warmup):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {label: [] for label in labels}
    for order in stats.rotated_orders(labels, plan.rounds):
        events = []
        for label in order:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(plan.reps):
                fns[label]()
            end.record()
            events.append((label, start, end))
        torch.cuda.synchronize()
        for label, start, end in events:
            times[label].append(start.elapsed_time(end) / plan.reps)
    return {label: stats.Measurement(label, tuple(t)) for label, t in times.items()}


def measured_peak_tflops(dtype: str) -> float | None:
    """Dense matmul rate in this run (the %SOL denominator): fp16/bf16 matmul, fp8 via _scaled_mm."""
    torch = require_gpu()
    n = 8192
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if dtype.startswith("fp8"):
        if not hasattr(torch, "_scaled_mm"):
            return None
        fp8 = torch.float8_e4m3fn  # cuBLASLt has no e5m2 x e5m2; the tensor-core rate is the same
        a8, b8 = a.to(fp8), b.to(fp8).t().contiguous().t()
        one = torch.ones((), device="cuda")

        def op():
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.float16)
    else:
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a16, b16 = a.to(dt), b.to(dt)

        def op():
            return a16 @ b16

    try:
        m = time_interleaved({"mm": op}, TimingPlan(rounds=10, reps=5, warmup=3, flush_bytes=4 << 20))["mm"]
    except RuntimeError:
        return None
    return m.tflops(2.0 * n**3)


_INT_OF_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def ordered_bits(x):
    """Integers whose differences count ULPs: float bits (sign-magnitude) to two's complement.

    Integer tensors are their own values.
    """
    import torch  # works on any device: tested on the CPU

    if not x.dtype.is_floating_point:
        return x.to(torch.int64)
    width = x.element_size()
    b = x.contiguous().view(getattr(torch, _INT_OF_WIDTH[width])).to(torch.int64)
    magnitude = (1 << (8 * width - 1)) - 1
    return torch.where(b < 0, -(b & magnitude), b)


def numerics(out, baseline_out, ref) -> dict:
    """Bitwise and ULP comparison with the baseline name's output; relative error vs float64 (if any)."""
    import torch  # works on any device: tested on the CPU

    floating = out.dtype.is_floating_point
    nan = int(torch.isnan(out).sum()) if floating else 0
    inf = int(torch.isinf(out).sum()) if floating else 0
    as_int = getattr(torch, _INT_OF_WIDTH[out.element_size()])
    diff = out.contiguous().view(as_int) != baseline_out.contiguous().view(as_int)
    ulp = (ordered_bits(out) - ordered_bits(baseline_out)).abs().max()
    rel = None
    if ref is not None:
        o64, r64 = out.to(torch.float64), ref.to(device=out.device, dtype=torch.float64)
        rel = float(torch.linalg.vector_norm(o64 - r64) / torch.linalg.vector_norm(r64))
    return {
        "nan_count": nan,
        "inf_count": inf,
        "fully_written": nan == 0,
        "bitwise_equal_to_baseline": bool(not diff.any()),
        "n_diff_vs_baseline": int(diff.sum()),
        "max_ulp_vs_baseline": int(ulp),
        "rel_err_vs_reference": rel,
    }


def merged_numerics(per_output: dict[str, dict]) -> dict:
    """One record for several outputs: counts add up, worst error wins; each output kept as JSON."""
    import json

    recs = list(per_output.values())
    rels = [r["rel_err_vs_reference"] for r in recs if r["rel_err_vs_reference"] is not None]
    return {
        "nan_count": sum(r["nan_count"] for r in recs),
        "inf_count": sum(r["inf_count"] for r in recs),
        "fully_written": all(r["fully_written"] for r in recs),
        "bitwise_equal_to_baseline": all(r["bitwise_equal_to_baseline"] for r in recs),
        "n_diff_vs_baseline": sum(r["n_diff_vs_baseline"] for r in recs),
        "max_ulp_vs_baseline": max(r["max_ulp_vs_baseline"] for r in recs),
        "rel_err_vs_reference": max(rels) if rels else None,
        "numerics_by_output": json.dumps(per_output, sort_keys=True),
    }


# --- one group: one kernel spec, one problem, all its names --------------------------------


def _slowed(launch, fraction: float):
    """The baseline launch followed by a memset sized to take ``fraction`` of the baseline's time.

    A positive control for the statistics: a variant known to be slower by about ``fraction``.
    (Adding programs to the grid does not work: wave quantization hides them.)
    """
    torch = require_gpu()
    probe = TimingPlan(rounds=5, reps=3, warmup=2, flush_bytes=4 << 20)
    t_base = time_interleaved({"b": launch}, probe)["b"].median_ms
    n = 1 << 20
    while True:
        pad = torch.empty(n, dtype=torch.int32, device="cuda")
        t_pad = time_interleaved({"p": pad.zero_}, probe)["p"].median_ms
        if t_pad >= fraction * t_base or n >= 1 << 30:
            break
        n *= 2
    n = max(1, int(n * fraction * t_base / t_pad))
    pad = torch.empty(n, dtype=torch.int32, device="cuda")

    def fn():
        launch()
        pad.zero_()

    return fn


def _sdpa_fn(backend: str, inputs: dict, causal: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }[backend]
    q, k, v = inputs["q"], inputs["k"], inputs["v_logical"]

    def fn():
        with sdpa_kernel([be]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn


def named_kernels(emitted: Emitted, templates: list[str], tool: Tool, cache: Cache | None, load, launched=None):
    """Each name's cubin (renamed, assembled), loaded for launch, with its facts.

    ``launched(name)``, when given, is the ``.text`` hash of the frontend's own compile under
    that name: ``aot_matches_launch`` says whether ptxprobe analysed the code that really runs.
    """
    names = [apply_template(t, emitted.entry) for t in templates]
    kernels, facts = {}, {}
    for t, name in zip(templates, names, strict=True):
        cubin, facts[t] = cubin_for(emitted, name, tool, cache)
        kernels[t] = load(name, cubin)
        facts[t]["aot_matches_launch"] = None if launched is None else launched(name) == facts[t]["text_sha256"]
    return names, kernels, facts


def timed_functions(kernels: dict, templates: list[str], names: list[str], grid, args: list, load) -> dict:
    """One callable per name, plus the A/A control: the baseline's cubin loaded a second time."""
    fns = {t: (lambda k=kernels[t]: k[grid](*args)) for t in templates}
    fns[AA_LABEL] = lambda k=load(names[0], kernels[templates[0]].kernel): k[grid](*args)
    return fns


def measurement_rows(
    meas: dict[str, stats.Measurement],
    templates: list[str],
    names: list[str],
    work: dict,
    cfg: RunConfig,
    seed: int,
    peak: float | None,
    info: dict,
    tool: Tool,
    common: dict,
    facts: dict,
    nums: dict,
) -> list[dict]:
    """One record per timed label: throughput and ratio vs the baseline with intervals, facts, numerics.

    ``work`` has the group's ``flops`` and ``bytes`` (either may be None).
    """
    base_m = meas[templates[0]]
    aa = stats.paired_ratio(base_m, meas[AA_LABEL], n_boot=cfg.timing.n_boot, seed=seed)
    floor = stats.noise_floor(aa)
    rows = []
    for label, m in meas.items():
        rate = {}
        for key, amount, scale in (("tflops", work.get("flops"), 1.0), ("gbps", work.get("bytes"), 1e3)):
            iv = stats.throughput_interval(m, amount, n_boot=cfg.timing.n_boot, seed=seed) if amount else None
            rate[key], rate[f"{key}_ci_low"], rate[f"{key}_ci_high"] = (
                (iv.estimate * scale, iv.low * scale, iv.high * scale) if iv else (None, None, None)
            )
        ratio = stats.paired_ratio(base_m, m, n_boot=cfg.timing.n_boot, seed=seed)
        template = label if label in templates else None
        row = {
            **common,
            "arch": info["arch"],
            "label": label,
            "name_template": template,
            "name": names[templates.index(label)] if template else label,
            "baseline_name": names[0],
            "is_baseline": label == templates[0],
            **rate,
            "median_ms": m.median_ms,
            "spread": m.spread,
            "times_ms": list(m.times_ms),
            "ratio_vs_baseline": ratio.estimate,
            "ratio_ci_low": ratio.low,
            "ratio_ci_high": ratio.high,
            "runtime_verdict": stats.runtime_verdict(ratio),
            "runtime_verdict_vs_floor": stats.runtime_verdict_vs_floor(ratio, floor),
            "noise_floor": floor,
            "aa_ratio": aa.estimate,
            "aa_ci_low": aa.low,
            "aa_ci_high": aa.high,
            "peak_tflops": peak,
            "pct_sol": (100 * rate["tflops"] / peak) if peak and rate["tflops"] else None,
            "gpu": info.get("gpu"),
            "driver": info.get("driver"),
            "sm_clock_mhz": info.get("sm_clock_mhz"),
            "rounds": m.n,
            "run_ptxas_version": tool.version,
            "run_ptxas_sha256": tool.sha256,
            "reps": cfg.timing.reps,
        }
        if label == SLOW_LABEL:  # its extra memset is not the kernel's work
            for key in ("tflops", "gbps"):
                row[key] = row[f"{key}_ci_low"] = row[f"{key}_ci_high"] = None
            row["pct_sol"] = None
        if template:
            row.update(facts[template])
            row.update(nums[template])
        rows.append(row)
    return rows


def run_group(
    family: KernelFamily,
    spec: KernelSpec,
    problem: Problem,
    templates: list[str],
    cfg: RunConfig,
    info: dict,
    cache: Cache | None = None,
    slow_control: bool = False,
    peak: float | None = None,
    seed: int = 0,
    tool: Tool | None = None,
) -> list[dict]:
    """Time and check every name of one (kernel spec, problem); returns one record per timed variant."""
    torch = require_gpu()
    arch = info["arch"]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    inputs = family.make_inputs(spec, problem, device="cuda", generator=gen)
    args = family.launch_args(spec, problem, inputs)
    grid = family.grid(spec, problem, info["sms"])
    tool = tool or triton_ptxas(arch)
    launched = None
    if family.frontend == "triton":
        load, launched = triton_loader(family.fn, specialize(family.fn, args), _family_options(spec), tool, arch)
    else:  # plain-pointer kernels: the driver API loads ptxprobe's cubin directly

        def load(name: str, cubin: bytes):
            return CudaKernel(cubin, name, family.extra["shared_bytes"](spec), family.extra["threads"])

    emitted = emit_kernel(family, spec, arch, problem=problem, cache=cache)
    names, kernels, facts = named_kernels(emitted, templates, tool, cache, load, launched)
    fns = timed_functions(kernels, templates, names, grid, args, load)
    if slow_control:
        fns[SLOW_LABEL] = _slowed(fns[templates[0]], cfg.slow_fraction)
    if spec.dtype in ("fp16", "bf16"):
        for be in cfg.sdpa_backends:
            fns[f"sdpa_{be}"] = _sdpa_fn(be, inputs, spec.causal)
    meas = time_interleaved(fns, cfg.timing)
    # numerics on a small problem with fresh inputs, every name against the baseline and float64
    small = Problem(1, cfg.numerics_heads, cfg.numerics_seq_len)
    num_inputs = family.make_inputs(spec, small, device="cuda", generator=gen)
    ref = family.reference(spec, num_inputs)
    outs = {}
    for t in templates:
        fresh = {**num_inputs, "out": torch.full_like(num_inputs["out"], float("nan"))}
        kernels[t][family.grid(spec, small, info["sms"])](*family.launch_args(spec, small, fresh))
        torch.cuda.synchronize()
        outs[t] = fresh["out"]
    nums = {t: numerics(outs[t], outs[templates[0]], ref) for t in templates}
    common = {
        "kernel": spec.key,
        "family": family.name,
        "dtype": spec.dtype,
        "head_dim": spec.head_dim,
        "causal": spec.causal,
        "config": spec.config.label,
        "seq_len": problem.seq_len,
        "batch": problem.batch,
        "heads": problem.heads,
    }
    work = {"flops": family.flops(spec, problem)}
    return measurement_rows(meas, templates, names, work, cfg, seed, peak, info, tool, common, facts, nums)


# --- user kernels: a launch spec instead of a registry entry -----------------------------------


def user_inputs(spec: LaunchSpec, resolved: Resolved, generator) -> dict:
    """Fresh tensors for every tensor argument, as the spec's ``init`` says (outputs poisoned with NaN)."""
    torch = require_gpu()
    out = {}
    for a in spec.args:
        if not a.is_tensor:
            continue
        shape, dev = resolved.shapes[a.name], "cuda"
        dtype = getattr(torch, a.dtype)  # checked when the spec was parsed
        wide = torch.float32 if dtype.is_floating_point else torch.int64
        if a.init in ("randn", "rand"):
            sample = torch.randn if a.init == "randn" else torch.rand
            t = (sample(shape, device=dev, dtype=torch.float32, generator=generator) * a.scale).to(dtype)
        elif a.init == "randint":
            t = torch.randint(a.low, a.high, shape, device=dev, generator=generator, dtype=torch.int64).to(dtype)
        elif a.init == "arange":
            t = torch.arange(math.prod(shape), device=dev, dtype=wide).reshape(shape).to(dtype)
        elif a.init == "nan":
            t = torch.full(shape, float("nan") if dtype.is_floating_point else -1, device=dev, dtype=dtype)
        else:
            t = (torch.zeros if a.init == "zeros" else torch.ones)(shape, device=dev, dtype=dtype)
        out[a.name] = t
    return out


def user_args(spec: LaunchSpec, resolved: Resolved, tensors: dict) -> list:
    return [tensors[a.name] if a.is_tensor else resolved.scalars[a.name] for a in spec.args]


def load_reference(target: str):
    """``module:function`` or ``path/to/file.py:function`` -> the reference callable."""
    fn = import_target(target, f"reference {target!r}")
    if not callable(fn):
        raise SpecError(f"reference {target!r}: no function {target.rpartition(':')[2]!r}")
    return fn


def user_reference(spec: LaunchSpec, tensors: dict, resolved: Resolved) -> dict:
    """The reference's float64 outputs by name (none without a reference).

    The reference gets float64 copies of every tensor (the outputs as they were before the
    launch) and the scalars, by argument name; it returns a tensor (one output) or a dict.
    """
    torch = require_gpu()
    if spec.reference is None:
        return {}
    fn = load_reference(spec.reference)
    given = {
        name: (t.to(torch.float64) if t.dtype.is_floating_point else t.clone()) for name, t in tensors.items()
    } | dict(resolved.scalars)
    got = fn(**given)
    outs = [a.name for a in spec.outputs]
    if not isinstance(got, dict):
        if len(outs) != 1:
            raise SpecError(f"reference {spec.reference}: returns one tensor for {len(outs)} outputs {outs}")
        got = {outs[0]: got}
    missing = [o for o in outs if o not in got]
    if missing:
        raise SpecError(f"reference {spec.reference}: no result for output(s) {missing}")
    return got


def run_user_group(
    emitted: Emitted,
    kind: str,
    spec: LaunchSpec,
    sizes: dict,
    templates: list[str],
    cfg: RunConfig,
    info: dict,
    cache: Cache | None = None,
    tool: Tool | None = None,
    seed: int = 0,
    triton_item: tuple | None = None,
) -> list[dict]:
    """Time and check every name of a user kernel at one size set (one record per timed variant).

    .cu, PTX and cubin kernels go through the driver API with scalar types from the entry's
    own PTX parameters; a Triton function goes through Triton's launcher (``triton_item`` is
    its (function, specialisation, options)).
    """
    torch = require_gpu()
    arch = info["arch"]
    if emitted.arch != arch:
        raise SpecError(f"{emitted.kernel} is built for {emitted.arch}; this GPU is {arch}")
    tool = tool or triton_ptxas(arch)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    big = resolve(spec, sizes)
    launched = None
    if kind == "triton-user":
        fn, sp, options = triton_item
        runtime = runtime_params(fn, sp)
        check_against_source(spec, emitted.ptx, emitted.entry, kind, runtime)
        load, launched = triton_loader(fn, sp, options, tool, arch)

        def full_args(r: Resolved, tensors: dict) -> list:
            given = dict(zip(runtime, user_args(spec, r, tensors), strict=True))
            return [given[p.name] if p.name in given else sp.constexprs[p.name] for p in fn.params]
    else:
        ctypes_by_name = check_against_source(spec, emitted.ptx, emitted.entry, kind)
        ctypes_of = {i: ctypes_by_name[a.name] for i, a in enumerate(spec.args) if a.name in ctypes_by_name}

        def load(name: str, cubin: bytes):
            return CudaKernel(cubin, name, big.shared_bytes, big.block, ctypes_of)

        def full_args(r: Resolved, tensors: dict) -> list:
            return user_args(spec, r, tensors)

    names, kernels, facts = named_kernels(emitted, templates, tool, cache, load, launched)
    tensors = user_inputs(spec, big, gen)
    fns = timed_functions(kernels, templates, names, big.grid, full_args(big, tensors), load)
    meas = time_interleaved(fns, cfg.timing)
    # numerics: each name from the same fresh inputs, outputs compared with the baseline and the reference
    small = resolve(spec, spec.numerics_size_set())
    start = user_inputs(spec, small, gen)
    ref = user_reference(spec, start, small)
    nums = {}
    base_outs: dict = {}
    for t in templates:
        fresh = {k: v.clone() for k, v in start.items()}
        kernels[t][small.grid](*full_args(small, fresh))
        torch.cuda.synchronize()
        outs = {a.name: fresh[a.name] for a in spec.outputs}
        base_outs = base_outs or outs
        per = {o: numerics(outs[o], base_outs[o], ref.get(o)) for o in outs}
        nums[t] = merged_numerics(per)
        rel = nums[t]["rel_err_vs_reference"]
        nums[t]["passes_tolerance"] = None if spec.tolerance is None or rel is None else rel <= spec.tolerance
    common = {
        "kernel": emitted.kernel,
        "family": kind,
        "sizes": size_label(sizes),
        "numerics_sizes": size_label(small.sizes),
        "grid": list(big.grid),
        "block": list(big.block) if big.block else None,
    }
    work = {"flops": big.flops, "bytes": big.bytes}
    return measurement_rows(meas, templates, names, work, cfg, seed, None, info, tool, common, facts, nums)


def problem_label(row: dict) -> str:
    """A runtime row's problem: ``N=4096`` for attention, the size set (``m=2048,n=2048,k=2048``) for a user kernel."""
    seq_len = row.get("seq_len")
    if seq_len is not None and seq_len == seq_len:  # not None, not NaN
        return f"N={int(seq_len)}"
    return str(row.get("sizes", "-"))


# --- the runtime sweep: groups spread over GPUs, one timing at a time per GPU ---------------

RUNTIME_LOG, RUNTIME_PARQUET = "runtime.jsonl", "runtime.parquet"


def run_config(d: dict | None) -> RunConfig:
    d = dict(d or {})
    timing = TimingPlan(**d.pop("timing", {}))
    for k in ("seq_lens", "sdpa_backends"):
        if k in d:
            d[k] = tuple(d[k])
    return RunConfig(**d, timing=timing)


def plan_groups(exp, cfg: RunConfig, arch: str) -> list[dict]:
    """One group per (kernel spec, seq_len) for the GPU's arch; names are timed together."""
    from .registry import family

    if arch not in exp.archs:
        return []
    groups = []
    slow_n = cfg.seq_lens[len(cfg.seq_lens) // 2]
    for k in exp.kernels:
        fam = family(k)
        for dt in exp.dtypes:
            for d in exp.head_dims:
                for c in exp.causal:
                    for cfgl in exp.configs:
                        spec = fam.spec(dt, d, c, cfgl)
                        for n, pt in ((n, pt) for pt in exp.ptxas for n in cfg.seq_lens):
                            gid = f"{spec.key}@{n}" + ("" if pt == "triton" else f"@ptxas={pt}")
                            groups.append(
                                {
                                    "group_id": gid,
                                    "family": k,
                                    "dtype": dt,
                                    "head_dim": d,
                                    "causal": c,
                                    "config": spec.config.label,
                                    "seq_len": n,
                                    "ptxas": pt,
                                    # the ~2%-slower control: one group per kernel and dtype
                                    "slow_control": cfg.slow_control
                                    and n == slow_n
                                    and not c
                                    and d == max(exp.head_dims),
                                }
                            )
    return groups


@functools.cache
def _device_facts() -> dict:
    """Properties of this process's GPU (read once per worker, not per group)."""
    return gpu_info(0)


@functools.cache
def _peak(dtype: str) -> float | None:
    """The %SOL denominator, measured once per dtype per worker process."""
    return measured_peak_tflops(dtype)


def plan_user_groups(exp, arch: str) -> tuple[list[dict], list[str]]:
    """One group per (user kernel with a launch spec, size set, ptxas); notes say what cannot run and why."""
    from .emit import emit_user, split_spec, user_items
    from .launch import load_launch

    groups, notes = [], []
    for kind, item in user_items(exp):
        target, spec_path = split_spec(item)
        launch = load_launch(spec_path) if spec_path else None
        if launch is None:
            notes.append(
                f"{target}: static only (its spec has no [launch] table)"
                if spec_path
                else f"{target}: static only (no spec: give --spec with a [launch] table to run it)"
            )
            continue
        built_for = [emit_user(kind, item, None).arch] if kind in ("ptx", "cubin") else exp.archs
        if arch not in built_for:
            notes.append(f"{target}: not run: built for {', '.join(built_for)}, this GPU is {arch}")
            continue
        for pt in exp.ptxas:
            for sizes in launch.size_sets():
                groups.append(
                    {
                        "group_id": f"user:{target}@{size_label(sizes)}" + ("" if pt == "triton" else f"@ptxas={pt}"),
                        "user_kind": kind,
                        "user_item": item,
                        "sizes": sizes,
                        "ptxas": pt,
                        "slow_control": False,
                    }
                )
    return groups, notes


def _group_rows(group: dict, templates: list[str], cfg: RunConfig, cache: Cache) -> list[dict]:
    """Run one planned group (a registered kernel's or a user kernel's) on this process's GPU."""
    from .registry import family

    info = {**_device_facts(), **_smi(0)}  # clocks and temperature as of this group
    ptxas = group.get("ptxas", "triton")
    tool = select_ptxas(info["arch"], ptxas)[0]
    if "user_kind" in group:
        from .emit import emit_user, split_spec, user_triton_specialization
        from .launch import load_launch

        kind, item = group["user_kind"], group["user_item"]
        target, spec_path = split_spec(item)
        triton_item = user_triton_specialization(target, spec_path) if kind == "triton-user" else None
        return run_user_group(
            emit_user(kind, item, info["arch"], cache, loaded=triton_item),
            kind,
            load_launch(spec_path),
            group["sizes"],
            templates,
            cfg,
            info,
            cache,
            tool=tool,
            seed=cfg.timing.seed,
            triton_item=triton_item,
        )
    fam = family(group["family"])
    spec = fam.spec(group["dtype"], group["head_dim"], group["causal"], group["config"])
    return run_group(
        fam,
        spec,
        cfg.problem(group["seq_len"]),
        templates,
        cfg,
        info,
        cache,
        slow_control=group["slow_control"] and ptxas == "triton",
        peak=_peak(group["dtype"]),
        seed=cfg.timing.seed,
        tool=tool,
    )


def _run_one(
    device: str, group: dict, templates: list[str], cfg: RunConfig, out_path: str, cache_root: str, lock=None
) -> None:
    """Worker body for one group on this process's GPU: time it, append its rows to the runtime log."""
    import json

    rows = _group_rows(group, templates, cfg, Cache(cache_root))
    text = "".join(json.dumps({**r, "group_id": group["group_id"]}, sort_keys=True) + "\n" for r in rows)
    if lock is not None:
        lock.acquire()
    try:
        with open(out_path, "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if lock is not None:
            lock.release()


def _device_worker(device: str, queue, work, work_args: tuple) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = device  # this process sees exactly one GPU
    while True:
        group = queue.get()
        if group is None:
            return
        work(device, group, *work_args)


def dispatch(groups: list, devices: list[str], work, *work_args) -> None:
    """Run ``work(device, group, *work_args)`` for every group, one worker process per device.

    Workers pull from one queue, so a device never runs two groups at once and faster devices
    take more groups. A worker that dies is reported after the others finish; what it had
    appended to the log is kept, and a re-run resumes from there.
    """
    if len(devices) <= 1 or len(groups) <= 1:
        for g in groups:
            work(devices[0] if devices else "0", g, *work_args)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    for g in groups:
        queue.put(g)
    for _ in devices:
        queue.put(None)
    procs = [ctx.Process(target=_device_worker, args=(d, queue, work, work_args)) for d in devices]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [(d, p.exitcode) for d, p in zip(devices, procs, strict=True) if p.exitcode]
    if failed:
        raise RuntimeError(f"GPU worker(s) failed: {failed}; finished groups are kept, re-run to resume")


def visible_devices() -> list[str]:
    torch = require_gpu()
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else []
    return ids or [str(i) for i in range(torch.cuda.device_count())]


def runtime_sweep(
    exp,
    out_dir,
    cache: Cache | None = None,
    devices: list[str] | None = None,
    progress: bool = True,
    notify=None,
) -> list[dict]:
    """Time every name of every spec on the visible GPUs; resumable (finished groups are skipped).

    ``notify(text)`` hears about user kernels that cannot run (no launch spec, another arch).
    """
    import json
    from pathlib import Path

    import pandas as pd

    from .sweep import _drop_torn_tail, read_log

    require_gpu()
    cfg = run_config(getattr(exp, "run", None))
    cache = cache or Cache()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / RUNTIME_LOG
    _drop_torn_tail(log)
    done = {r["group_id"] for r in read_log(log)}
    arch = device_arch(0)
    user_groups, notes = plan_user_groups(exp, arch)
    groups = [g for g in plan_groups(exp, cfg, arch) + user_groups if g["group_id"] not in done]
    for note in notes if notify else ():
        notify(note)
    templates = list(exp.names)
    devices = devices or visible_devices()
    if len(devices) > 1:
        import multiprocessing as mp

        lock = mp.get_context("spawn").Lock()
        dispatch(groups, devices, _run_one, templates, cfg, str(log), str(cache.root), lock)
    else:
        from rich.progress import track

        for g in track(groups, description="GPU runs", disable=not progress):
            _run_one(devices[0], g, templates, cfg, str(log), str(cache.root))
    rows = read_log(log)
    if rows:
        pd.DataFrame(rows).drop(columns=["times_ms"]).to_parquet(out / RUNTIME_PARQUET, index=False)
    (out / "gpu.json").write_text(json.dumps(gpu_info(0), indent=1))
    return rows
