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
import os
import subprocess
import tempfile
from dataclasses import dataclass, field

from . import stats
from .assemble import assemble
from .cache import Cache, sha256_bytes
from .cubin import read_cubin
from .emit import emit_kernel, renamed_fn, specialize
from .errors import NoGpu
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


def triton_compiled(family: KernelFamily, spec: KernelSpec, args: list, name: str | None = None):
    """Triton's own compile for the current GPU, under ``name``, with its cache isolated."""
    import triton
    from triton.compiler import ASTSource

    fn = renamed_fn(family.fn, name) if name else family.fn
    sp = specialize(family.fn, args)
    src = ASTSource(fn, sp.signature, sp.constexprs, sp.attrs)
    with tempfile.TemporaryDirectory(prefix="ptxprobe-triton-cache-") as d:
        old = triton.knobs.cache.dir
        triton.knobs.cache.dir = d
        try:
            return triton.compile(
                src, options={"num_warps": spec.config.num_warps, "num_stages": spec.config.num_stages}
            )
        finally:
            triton.knobs.cache.dir = old


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
    """

    def __init__(self, cubin: bytes, name: str, shared_bytes: int, threads: int):
        import ctypes

        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")  # make the primary context current for the driver API
        drv = _driver()
        self.name, self.kernel, self.shared, self.threads = name, cubin, shared_bytes, threads
        self.module = _check(drv.cuModuleLoadData(cubin), f"cuModuleLoadData({name})")
        self.function = _check(drv.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        if shared_bytes > 48 * 1024:
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(drv.cuFuncSetAttribute(self.function, attr, shared_bytes), "cuFuncSetAttribute")
        self._ctypes = ctypes

    def _packed(self, args):
        c = self._ctypes
        vals, types = [], []
        for a in args:
            if hasattr(a, "data_ptr"):
                vals.append(a.data_ptr())
                types.append(c.c_void_p)
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
                drv.cuLaunchKernel(
                    self.function, *grid, self.threads, 1, 1, self.shared, stream, self._packed(args), 0
                ),
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
    ptx = e.ptx if name == e.entry else rename_entry(e.ptx, e.entry, name).ptx
    tool = tool or triton_ptxas(arch)
    art = assemble(ptx, arch, tool, cache=cache)
    if not art.ok:
        raise RuntimeError(f"ptxas {art.status} for {spec.key} as {name}: {art.stderr[-500:]}")
    data = art.cubin()
    k = read_cubin(data).kernel(name)
    return data, {
        "registers": k.regcount,
        "text_sha256": k.text_sha256,
        "ptxas_version": tool.version,
        "ptxas_sha256": tool.sha256,
        "cubin_sha256": sha256_bytes(data),
    }


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


def ordered_bits(x):
    """Map fp16/bf16 values to integers whose difference counts ULPs (sign-magnitude to two's complement)."""
    torch = require_gpu()
    b = x.contiguous().view(torch.int16).to(torch.int32)
    return torch.where(b < 0, -(b & 0x7FFF), b)


def numerics(out, baseline_out, ref) -> dict:
    """Bitwise and ULP comparison with the baseline name's output; relative error vs float64."""
    torch = require_gpu()
    nan = int(torch.isnan(out).sum())
    inf = int(torch.isinf(out).sum())
    diff = out.view(torch.int16) != baseline_out.view(torch.int16)
    ulp = (ordered_bits(out) - ordered_bits(baseline_out)).abs().max()
    o64 = out.to(torch.float64)
    rel = float(torch.linalg.vector_norm(o64 - ref) / torch.linalg.vector_norm(ref))
    return {
        "nan_count": nan,
        "inf_count": inf,
        "fully_written": nan == 0,
        "bitwise_equal_to_baseline": bool(not diff.any()),
        "n_diff_vs_baseline": int(diff.sum()),
        "max_ulp_vs_baseline": int(ulp),
        "rel_err_vs_reference": rel,
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
    if family.frontend == "triton":
        base_launch = triton_compiled(family, spec, args)
        base_entry = base_launch.name

        def load(name: str, cubin: bytes):
            return with_cubin(base_launch, name, cubin)
    else:  # plain-pointer kernels: the driver API loads ptxprobe's cubin directly
        base_entry = family.extra["entry"](spec)

        def load(name: str, cubin: bytes):
            return CudaKernel(cubin, name, family.extra["shared_bytes"](spec), family.extra["threads"])

    baseline = apply_template(templates[0], base_entry)
    names = [apply_template(t, base_entry) for t in templates]
    kernels, facts = {}, {}
    tool = tool or triton_ptxas(arch)
    check_launch = family.frontend == "triton" and tool.sha256 == triton_ptxas(arch).sha256
    for t, name in zip(templates, names, strict=True):
        cubin, facts[t] = aot_cubin(family, spec, arch, problem, name, cache, tool)
        kernels[t] = load(name, cubin)
        if check_launch:  # Triton's own compile of the same name must give the same code
            launched = triton_compiled(family, spec, args, name=name)
            facts[t]["aot_matches_launch"] = (
                read_cubin(launched.kernel).kernel(name).text_sha256 == facts[t]["text_sha256"]
            )
        else:
            facts[t]["aot_matches_launch"] = None
    fns = {t: (lambda k=kernels[t]: k[grid](*args)) for t in templates}
    fns[AA_LABEL] = lambda k=load(baseline, kernels[templates[0]].kernel): k[grid](*args)
    if slow_control:
        fns[SLOW_LABEL] = _slowed(fns[templates[0]], cfg.slow_fraction)
    if spec.dtype in ("fp16", "bf16"):
        for be in cfg.sdpa_backends:
            fns[f"sdpa_{be}"] = _sdpa_fn(be, inputs, spec.causal)
    meas = time_interleaved(fns, cfg.timing)
    flops = family.flops(spec, problem)
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
    rows = []
    base_m = meas[templates[0]]
    aa = stats.paired_ratio(base_m, meas[AA_LABEL], n_boot=cfg.timing.n_boot, seed=seed)
    floor = stats.noise_floor(aa)
    for label, m in meas.items():
        tf = stats.throughput_interval(m, flops, n_boot=cfg.timing.n_boot, seed=seed)
        ratio = stats.paired_ratio(base_m, m, n_boot=cfg.timing.n_boot, seed=seed)
        template = label if label in templates else None
        row = {
            "kernel": spec.key,
            "family": family.name,
            "dtype": spec.dtype,
            "head_dim": spec.head_dim,
            "causal": spec.causal,
            "config": spec.config.label,
            "arch": arch,
            "seq_len": problem.seq_len,
            "batch": problem.batch,
            "heads": problem.heads,
            "label": label,
            "name_template": template,
            "name": names[templates.index(label)] if template else label,
            "baseline_name": baseline,
            "is_baseline": label == templates[0],
            "tflops": tf.estimate,
            "tflops_ci_low": tf.low,
            "tflops_ci_high": tf.high,
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
            "pct_sol": (100 * tf.estimate / peak) if peak else None,
            "gpu": info.get("gpu"),
            "driver": info.get("driver"),
            "sm_clock_mhz": info.get("sm_clock_mhz"),
            "rounds": m.n,
            "run_ptxas_version": tool.version,
            "run_ptxas_sha256": tool.sha256,
            "reps": cfg.timing.reps,
        }
        if label == SLOW_LABEL:  # its extra memset is not attention work
            row["tflops"] = row["tflops_ci_low"] = row["tflops_ci_high"] = row["pct_sol"] = None
        if template:
            row.update(facts[template])
            row.update(numerics(outs[template], outs[templates[0]], ref))
        rows.append(row)
    return rows


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


def _run_one(
    device: str, group: dict, templates: list[str], cfg: RunConfig, out_path: str, cache_root: str, lock=None
) -> None:
    """Worker body for one group on this process's GPU: time it, append its rows to the runtime log."""
    import json

    from .registry import family

    fam = family(group["family"])
    spec = fam.spec(group["dtype"], group["head_dim"], group["causal"], group["config"])
    info = {**_device_facts(), **_smi(0)}  # clocks and temperature as of this group
    ptxas = group.get("ptxas", "triton")
    rows = run_group(
        fam,
        spec,
        cfg.problem(group["seq_len"]),
        templates,
        cfg,
        info,
        Cache(cache_root),
        slow_control=group["slow_control"] and ptxas == "triton",
        peak=_peak(group["dtype"]),
        seed=cfg.timing.seed,
        tool=select_ptxas(info["arch"], ptxas)[0],
    )
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
    exp, out_dir, cache: Cache | None = None, devices: list[str] | None = None, progress: bool = True
) -> list[dict]:
    """Time every name of every spec on the visible GPUs; resumable (finished groups are skipped)."""
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
    groups = [g for g in plan_groups(exp, cfg, device_arch(0)) if g["group_id"] not in done]
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
