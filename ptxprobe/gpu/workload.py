"""One source at one problem, ready to run: the only thing the group runner sees.

A registered family describes its inputs, launch and float64 reference in code; a user
kernel does it in its spec's ``[launch]`` table. Both become a ``Workload``, so timing,
numerics and the result rows have one path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.launchers import CudaKernel, triton_loader
from ptxprobe.gpu.timing import sdpa_fn
from ptxprobe.sources import Emitted, KernelSource, RegisteredSource, TritonFunctionSource
from ptxprobe.sources.launch import LaunchSpec, Resolved, check_against_source, resolve, size_label
from ptxprobe.sources.registry import Problem
from ptxprobe.sources.triton import import_target, runtime_params, specialize
from ptxprobe.toolchain.tools import Tool


@dataclass
class Case:
    """Inputs at one problem size and how to launch on them."""

    grid: tuple
    tensors: dict
    args: Callable[[dict], list]  # tensors -> positional launch arguments


@dataclass
class Workload:
    common: dict  # row columns that say what ran (kernel, family, dtype..., seq_len or sizes)
    emitted: Emitted
    load: Callable  # (name, cubin) -> launchable: kernel[grid](*args)
    launched: Callable | None  # name -> .text sha256 of the frontend's own compile (or None)
    timed: Callable[..., Case]  # generator -> the timed problem
    small: Callable[..., Case]  # generator -> the numerics problem
    reference: Callable[[Case], dict]  # float64 outputs by name (may be empty)
    outputs: tuple[str, ...]
    work: dict = field(default_factory=dict)  # flops / bytes of the timed problem
    extras: Callable[[Case], dict] = lambda case: {}  # more timed callables (torch SDPA)
    tolerance: float | None = None
    dtype: str | None = None  # for the %SOL denominator


def registered_workload(source: RegisteredSource, problem: Problem, small: Problem, info: dict, tool: Tool,
                        cache: Cache, sdpa_backends: tuple[str, ...] = ()) -> Workload:
    require_gpu()
    fam, spec = source.family, source.spec
    arch = info["arch"]

    def case(p: Problem, gen) -> Case:
        inputs = fam.make_inputs(spec, p, device="cuda", generator=gen)
        return Case(fam.grid(spec, p, info["sms"]), inputs, lambda t, p=p: fam.launch_args(spec, p, t))

    launched = None
    if fam.frontend == "triton":  # the specialisation Triton's launcher derives (checked: aot_matches_launch)
        options = fam.compile_options(spec)
        sp = specialize(fam.fn, fam.launch_args(spec, problem, None))
        load, launched = triton_loader(fam.fn, sp, options, tool, arch)
    else:  # plain-pointer kernels: the driver API loads ptxprobe's cubin directly

        def load(name: str, cubin: bytes):
            return CudaKernel(cubin, name, fam.extra["shared_bytes"](spec), fam.extra["threads"])

    emitted = RegisteredSource(source.family_name, source.dtype, source.head_dim, source.causal, source.config,
                               problem.seq_len).emit(arch, cache)

    def extras(c: Case) -> dict:
        if spec.dtype not in ("fp16", "bf16"):
            return {}
        return {f"sdpa_{be}": sdpa_fn(be, c.tensors, spec.causal) for be in sdpa_backends}

    common = {**source.columns(), "kernel": spec.key, "seq_len": problem.seq_len, "batch": problem.batch,
              "heads": problem.heads}
    return Workload(
        common, emitted, load, launched,
        timed=lambda gen: case(problem, gen),
        small=lambda gen: case(small, gen),
        reference=lambda c: {fam.output_key: fam.reference(spec, c.tensors)},
        outputs=(fam.output_key,),
        work={"flops": fam.flops(spec, problem) if fam.flops else None},
        extras=extras,
        dtype=spec.dtype,
    )


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


def launch_spec_workload(source: KernelSource, sizes: dict, info: dict, tool: Tool, cache: Cache) -> Workload:
    """A user kernel at one size set, from its ``[launch]`` table.

    .cu, PTX and cubin kernels go through the driver API with scalar types from the entry's
    own PTX parameters; a Triton function goes through Triton's launcher.
    """
    arch = info["arch"]
    spec = source.launch()
    emitted = source.emit(arch, cache)
    if emitted.arch != arch:
        raise SpecError(f"{emitted.kernel} is built for {emitted.arch}; this GPU is {arch}")
    big, small = resolve(spec, sizes), resolve(spec, spec.numerics_size_set())
    launched = None
    if isinstance(source, TritonFunctionSource):
        fn, sp, options = source.loaded()
        runtime = runtime_params(fn, sp)
        check_against_source(spec, emitted.ptx, emitted.entry, "triton", runtime)
        load, launched = triton_loader(fn, sp, options, tool, arch)

        def full_args(r: Resolved, tensors: dict) -> list:
            given = dict(zip(runtime, user_args(spec, r, tensors), strict=True))
            return [given[p.name] if p.name in given else sp.constexprs[p.name] for p in fn.params]
    else:
        ctypes_by_name = check_against_source(spec, emitted.ptx, emitted.entry, source.kind)
        ctypes_of = {i: ctypes_by_name[a.name] for i, a in enumerate(spec.args) if a.name in ctypes_by_name}

        def load(name: str, cubin: bytes):
            return CudaKernel(cubin, name, big.shared_bytes, big.block, ctypes_of)

        def full_args(r: Resolved, tensors: dict) -> list:
            return user_args(spec, r, tensors)

    def case(r: Resolved, gen) -> Case:
        return Case(r.grid, user_inputs(spec, r, gen), lambda t, r=r: full_args(r, t))

    common = {
        "kernel": emitted.kernel,
        "family": source.kind,
        "sizes": size_label(sizes),
        "numerics_sizes": size_label(small.sizes),
        "grid": list(big.grid),
        "block": list(big.block) if big.block else None,
    }
    return Workload(
        common, emitted, load, launched,
        timed=lambda gen: case(big, gen),
        small=lambda gen: case(small, gen),
        reference=lambda c: user_reference(spec, c.tensors, small),
        outputs=tuple(a.name for a in spec.outputs),
        work={"flops": big.flops, "bytes": big.bytes},
        tolerance=spec.tolerance,
    )
