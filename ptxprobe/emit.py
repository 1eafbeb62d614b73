"""Ahead-of-time compile kernels to PTX for any target, without a GPU.

Triton's own compile cache keys on the function's source, not on ``repr=``, so a renamed
kernel could come back stale. ptxprobe never touches that cache: it drives Triton's stage
pipeline itself (ttir -> ttgir -> llir -> ptx, each output kept), stops before ptxas, and
caches the result in its own content-addressed store keyed by source, specialisation,
options, target, name and Triton version.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache import Cache, cache_key, sha256_text
from .errors import MalformedPtx, SpecError
from .registry import KernelFamily, KernelSpec, Problem
from .toolchain import arch_number


@dataclass(frozen=True)
class Specialization:
    """What Triton's launcher would derive from real arguments: types, constants, divisibility."""

    signature: dict
    constexprs: dict
    attrs: dict  # {(index,): [["tt.divisibility", 16]]}

    def to_json(self) -> dict:
        return {
            "signature": self.signature,
            "constexprs": {k: repr(v) for k, v in self.constexprs.items()},
            "divisible_by_16": sorted(self.signature_names_with_attrs()),
        }

    def signature_names_with_attrs(self) -> list[str]:
        names = list(self.signature)
        return [names[k[0]] for k in self.attrs]


@dataclass(frozen=True)
class Emitted:
    """PTX for one kernel spec on one target, plus what the compiler said about it."""

    kernel: str  # spec key, or the PTX file name for user PTX
    arch: str
    entry: str
    ptx: str
    frontend: str
    metadata: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)  # stage -> sha256 of its text output

    @property
    def ptx_sha256(self) -> str:
        return sha256_text(self.ptx)


def specialize(fn, args: list) -> Specialization:
    """Mirror Triton's launch-time binder on (possibly stand-in) arguments."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    params = fn.params
    if len(args) != len(params):
        raise SpecError(f"{fn.__name__}: {len(args)} launch arguments for {len(params)} parameters")
    signature: dict = {}
    constexprs: dict = {}
    attrs: dict = {}
    for i, (kp, arg) in enumerate(zip(params, args, strict=False)):
        if kp.is_constexpr:
            signature[kp.name] = "constexpr"
            constexprs[kp.name] = arg
            continue
        ty, attr = native_specialize_impl(
            BaseBackend, arg, False, not kp.do_not_specialize, not kp.do_not_specialize_on_alignment
        )
        signature[kp.name] = ty
        if ty == "constexpr":  # integers equal to 1 become constants, as at launch
            constexprs[kp.name] = attr
        elif isinstance(attr, str):
            parsed = BaseBackend.parse_attr(attr)
            if parsed:
                attrs[(i,)] = parsed
    return Specialization(signature, constexprs, attrs)


def _target(arch: str):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", arch_number(arch), 32)


def compile_stages(fn, spec_: Specialization, arch: str, options: dict) -> tuple[dict[str, str], dict]:
    """Run Triton's stages up to and including PTX; return every stage's text and the metadata."""
    from triton._C.libtriton import ir
    from triton.compiler import ASTSource, make_backend

    if is_gluon(fn):
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource  # noqa: N814
    src = ASTSource(fn, spec_.signature, spec_.constexprs, spec_.attrs)
    target = _target(arch)
    backend = make_backend(target)
    opts = backend.parse_options(options)
    stages: dict = {}
    backend.add_stages(stages, opts, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    metadata: dict = {"hash": "ptxprobe", "target": target, **opts.__dict__}
    module = src.make_ir(target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(), context)
    outputs: dict[str, str] = {}
    for ext, stage in stages.items():
        if ext == "cubin":
            break
        module = stage(module, metadata)
        outputs[ext] = str(module)
    keep = (
        "name",
        "shared",
        "num_warps",
        "num_stages",
        "num_ctas",
        "enable_fp_fusion",
        "ptx_version",
        "tmem_size",
        "global_scratch_size",
        "profile_scratch_size",
    )
    meta = {k: metadata[k] for k in keep if k in metadata and isinstance(metadata[k], (int, str, bool, type(None)))}
    return outputs, meta


def is_gluon(fn) -> bool:
    return bool(getattr(fn, "is_gluon", lambda: False)())


def renamed_fn(fn, name: str):
    """The frontend-level rename: the same kernel with ``repr=`` returning ``name`` (Triton or Gluon)."""
    if is_gluon(fn):
        from triton.experimental import gluon

        return gluon.jit(repr=lambda _: name)(fn.fn)
    import triton

    return triton.jit(repr=lambda _: name)(fn.fn)


def _triton_ptx(
    fn,
    spec_: Specialization,
    arch: str,
    options: dict,
    cache: Cache,
    name: str | None = None,
    only_cached: bool = False,
    **key_parts,
) -> dict | None:
    """Triton's stages up to PTX for one specialisation, cached by everything that shapes the PTX.

    Returns the cached record {"ptx", "metadata", "stages"}; None only with ``only_cached`` and a miss.
    """
    import triton

    key = cache_key(
        stage="emit",
        fn=fn.cache_key,
        sig=spec_.to_json(),
        attrs=str(spec_.attrs),
        options=options,
        arch=arch,
        name=name,
        triton=triton.__version__,
        **key_parts,
    )
    rec = cache.get_json("emit", key)
    if rec is None and not only_cached:
        outputs, meta = compile_stages(renamed_fn(fn, name) if name else fn, spec_, arch, options)
        meta["specialization"] = spec_.to_json()
        meta["triton_version"] = triton.__version__
        rec = {"ptx": outputs["ptx"], "metadata": meta, "stages": {k: sha256_text(v) for k, v in outputs.items()}}
        cache.put_json("emit", key, rec)
    return rec


def require_arch(family: KernelFamily, arch: str) -> None:
    """Refuse a target the family cannot be built for, before the compiler aborts the process on it."""
    if family.archs and arch not in family.archs:
        raise SpecError(f"{family.name}: cannot be built for {arch} (targets: {', '.join(family.archs)})")


def emit_triton(
    family: KernelFamily,
    spec: KernelSpec,
    arch: str,
    name: str | None = None,
    problem: Problem | None = None,
    cache: Cache | None = None,
    only_cached: bool = False,
) -> Emitted | None:
    """Compile one spec to PTX for ``arch``; ``name`` renames through Triton (``repr=``).

    ``only_cached`` returns None instead of compiling when the result is not cached.
    """
    require_arch(family, arch)
    problem = problem or Problem()
    cache = cache or Cache()
    fn = family.fn
    spec_ = specialize(fn, family.launch_args(spec, problem, None))
    options = {"num_warps": spec.config.num_warps, "num_stages": spec.config.num_stages}
    rec = _triton_ptx(fn, spec_, arch, options, cache, name=name, only_cached=only_cached, spec=spec.key)
    if rec is None:
        return None
    ptx = rec["ptx"]
    return Emitted(spec.key, arch, entry_of(ptx), ptx, "triton", rec["metadata"], rec["stages"])


_ENTRY_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.entry\s+([A-Za-z_$%][\w$]*)", re.MULTILINE)
_TARGET_RE = re.compile(r"^\s*\.target\s+([\w,\s]+?)\s*$", re.MULTILINE)


def entries_of(ptx: str) -> list[str]:
    return _ENTRY_RE.findall(ptx)


def entry_of(ptx: str) -> str:
    names = entries_of(ptx)
    if not names:
        raise MalformedPtx("no .entry found in PTX")
    return names[0]


def target_of(ptx: str) -> str:
    m = _TARGET_RE.search(ptx)
    if not m:
        raise MalformedPtx("PTX has no .target directive")
    return m.group(1).split(",")[0].strip()


def load_ptx(path: str | Path, entry: str | None = None) -> Emitted:
    """A user's PTX file as an Emitted (its own .target is its arch)."""
    p = Path(path)
    try:
        ptx = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedPtx(f"{p}: cannot read PTX ({exc})") from exc
    if not re.search(r"^\s*\.version\s+\d+\.\d+", ptx, re.MULTILINE):
        raise MalformedPtx(f"{p}: no .version directive: not PTX?")
    arch = target_of(ptx)
    names = entries_of(ptx)
    if not names:
        raise MalformedPtx(f"{p}: no .entry in PTX")
    if entry is not None and entry not in names:
        raise MalformedPtx(f"{p}: no entry {entry!r} (have: {', '.join(names)})")
    return Emitted(p.name, arch, entry or names[0], ptx, "ptx", {"source": str(p)}, {})


# --- CUDA C++ through nvcc --------------------------------------------------------------------


def nvcc_arch(arch: str) -> str:
    """``compute_90a`` for sm_90a: the virtual arch nvcc needs to emit PTX for that target."""
    from .toolchain import arch_number

    n = arch_number(arch)
    return f"compute_{n}{'a' if arch.endswith('a') else ''}"


def emit_cuda(
    source: str | Path,
    arch: str,
    entry: str | None = None,
    defines: dict | None = None,
    kernel_key: str | None = None,
    cache: Cache | None = None,
    timeout: float = 600.0,
) -> Emitted:
    """nvcc -ptx for one target; ``entry`` picks the kernel when the file has several (a source name or a symbol)."""
    import tempfile

    from .errors import ToolFailed
    from .proc import run_tool
    from .toolchain import find_tool

    src = Path(source)
    if not src.exists():
        raise SpecError(f"{src}: no such CUDA source")
    cache = cache or Cache()
    nvcc = find_tool("nvcc")
    flags = [
        "-ptx",
        f"-arch={nvcc_arch(arch)}",
        "-std=c++17",
        "-O3",
        "-lineinfo",
        *(f"-D{k}={v}" for k, v in sorted((defines or {}).items())),
    ]
    key = cache_key(
        stage="emit-cuda", src=sha256_text(src.read_text()), flags=flags, nvcc=nvcc.sha256, include=str(src.parent)
    )
    rec = cache.get_json("emit", key)
    if rec is None:
        with tempfile.TemporaryDirectory(prefix="ptxprobe-nvcc-") as d:
            out = Path(d) / "k.ptx"
            run = run_tool([nvcc.path, *flags, f"-I{src.parent}", str(src), "-o", str(out)], timeout=timeout)
            if not run.ok:
                raise ToolFailed(
                    f"nvcc could not compile {src.name} for {arch}: {run.describe()}\n{run.stderr[-3000:]}"
                )
            ptx = out.read_text()
        rec = {"ptx": ptx, "metadata": {"nvcc": nvcc.version, "nvcc_flags": flags}}
        cache.put_json("emit", key, rec)
    ptx = rec["ptx"]
    names = entries_of(ptx)
    if not names:
        raise MalformedPtx(f"{src.name}: nvcc produced no kernel (.entry) for {arch}: is there a __global__ function?")
    chosen = names[0]
    if entry is not None:
        from .rename import source_identifier

        matches = [n for n in names if n == entry or source_identifier(n) == entry]
        if not matches:
            raise MalformedPtx(f"{src.name}: no kernel {entry!r} (have: {', '.join(names)})")
        chosen = matches[0]
    return Emitted(
        kernel_key or f"{src.name}:{source_identifier(chosen)}", arch, chosen, ptx, "cuda", rec["metadata"], {}
    )


def ptx_from_cubin(path: str | Path) -> Emitted:
    """The PTX a cubin carries in ``.nv_debug_ptx_txt`` (cubins built with -lineinfo or -G keep it).

    ptxas stores it one NUL-terminated line per PTX line, without ``.loc`` lines and DWARF bodies;
    re-assembled, it gives the same ``.text`` (checked in the tests).
    """
    from .cubin import read_cubin
    from .errors import CubinError

    data = Path(path).read_bytes()
    facts = read_cubin(data)
    import io

    from elftools.elf.elffile import ELFFile

    sec = ELFFile(io.BytesIO(data)).get_section_by_name(".nv_debug_ptx_txt")
    if sec is None:
        raise CubinError(
            f"{path}: no embedded PTX (.nv_debug_ptx_txt); a cubin cannot be renamed without its PTX: "
            "pass the PTX or the source, or build with -lineinfo"
        )
    ptx = "\n".join(line.decode("utf-8", errors="replace") for line in sec.data().split(b"\0"))
    names = entries_of(ptx)
    if not names:
        raise CubinError(f"{path}: embedded PTX has no .entry")
    return Emitted(
        Path(path).name, target_of(ptx), names[0], ptx, "ptx", {"source": str(path), "cubin_arch": facts.arch}, {}
    )


def emit_kernel(
    family: KernelFamily,
    spec: KernelSpec,
    arch: str,
    problem: Problem | None = None,
    cache: Cache | None = None,
    only_cached: bool = False,
) -> Emitted | None:
    """Any registered family: Triton through its stage pipeline, others through their own ``emit``."""
    if family.frontend == "triton":  # emit_triton checks the target itself
        return emit_triton(family, spec, arch, problem=problem, cache=cache, only_cached=only_cached)
    require_arch(family, arch)
    if family.emit is None:
        raise SpecError(f"{family.name}: frontend {family.frontend!r} has no emit function")
    if only_cached:
        return None
    return family.emit(spec, arch, cache)


# --- a user's Triton function with a spec file ----------------------------------------------------

_SPEC_KEYS = {"signature", "constexprs", "divisible_by_16", "num_warps", "num_stages", "name", "launch"}


def import_target(target: str, what: str):
    """``package.module:name`` or ``path/to/file.py:name`` -> that object (None if the module lacks it)."""
    import importlib
    import importlib.util

    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise SpecError(f"{what} takes module:function or file.py:function, got {target!r}")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise SpecError(f"{what}: cannot load {path}")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except (ImportError, FileNotFoundError, SyntaxError) as exc:
        raise SpecError(f"{what}: cannot import {mod_name}: {exc}") from exc
    return getattr(mod, attr, None)


def load_triton_function(target: str):
    """``package.module:function`` (or ``path/to/file.py:function``) -> the triton.jit function."""
    fn = import_target(target, "--triton")
    if fn is None or not hasattr(fn, "params"):
        raise SpecError(f"{target}: no triton.jit function named {target.rpartition(':')[2]!r}")
    return fn


def load_kernel_spec(path: str | Path) -> dict:
    """A user kernel's spec (JSON or TOML): signature, constexprs, divisible_by_16, num_warps, num_stages."""
    import tomllib

    p = Path(path)
    try:
        text = p.read_text()
        spec = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except FileNotFoundError as exc:
        raise SpecError(f"spec file not found: {p}") from exc
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"{p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {exc}") from exc
    if not isinstance(spec, dict):
        raise SpecError(f"{p}: a spec is a table (JSON object), not {type(spec).__name__}")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise SpecError(f"{p}: unknown keys {sorted(unknown)}; a spec may have {sorted(_SPEC_KEYS)}")
    return spec


def user_triton_specialization(target: str, spec_path: str | Path) -> tuple[Any, Specialization, dict]:
    """(function, specialisation, compile options) of a user's Triton function from its spec file."""
    fn = load_triton_function(target)
    spec = load_kernel_spec(spec_path)
    if "signature" not in spec:
        raise SpecError(f"{spec_path}: a Triton function's spec needs a 'signature' (parameter -> type)")
    params = [p.name for p in fn.params]
    sig = dict(spec["signature"])
    if list(sig) != params:
        raise SpecError(f"{spec_path}: signature names {list(sig)} do not match {fn.__name__}'s parameters {params}")
    constexprs = dict(spec.get("constexprs", {}))
    missing = [n for n, t in sig.items() if t == "constexpr" and n not in constexprs]
    if missing:
        raise SpecError(f"{spec_path}: no value for constexpr parameter(s) {missing}")
    div = spec.get("divisible_by_16", [])
    bad = [n for n in div if n not in params]
    if bad:
        raise SpecError(f"{spec_path}: divisible_by_16 names unknown parameters {bad}")
    attrs = {(params.index(n),): [["tt.divisibility", 16]] for n in div}
    options = {"num_warps": int(spec.get("num_warps", 4)), "num_stages": int(spec.get("num_stages", 3))}
    return fn, Specialization(sig, constexprs, attrs), options


def runtime_params(fn, sp: Specialization) -> list[str]:
    """A Triton function's parameters that are passed at launch (not constexpr, not specialised to 1)."""
    return [p.name for p in fn.params if sp.signature.get(p.name) != "constexpr"]


def emit_user_triton(
    target: str, spec_path: str | Path, arch: str, cache: Cache | None = None, loaded: tuple | None = None
) -> Emitted:
    """Compile a user's Triton function to PTX for ``arch`` from its spec file.

    ``loaded``: the function's ``user_triton_specialization``, when the caller already has it
    (importing the user's module again would run its top level again).
    """
    fn, sp, options = loaded or user_triton_specialization(target, spec_path)
    rec = _triton_ptx(fn, sp, arch, options, cache or Cache())
    ptx = rec["ptx"]
    name = load_kernel_spec(spec_path).get("name", target)
    return Emitted(name, arch, entry_of(ptx), ptx, "triton", rec["metadata"], rec["stages"])


# --- user kernels as the experiment names them -------------------------------------------------

USER_KINDS = ("ptx", "cubin", "cuda", "triton-user")
USER_AXES = {"ptx_files": "ptx", "cubin_files": "cubin", "cu_files": "cuda", "triton_functions": "triton-user"}


def user_items(exp) -> list[tuple[str, str]]:
    """(kind, item) of every user kernel an experiment lists, as ``emit_user`` takes them."""
    return [(kind, item) for axis, kind in USER_AXES.items() for item in getattr(exp, axis, ()) if item]


def split_spec(item: str) -> tuple[str, str | None]:
    """``target=spec.toml`` -> (target, spec path); a bare target has no spec."""
    target, eq, spec = item.rpartition("=")
    return (target, spec) if eq else (item, None)


def emit_user(
    kind: str, item: str, arch: str | None, cache: Cache | None = None, loaded: tuple | None = None
) -> Emitted:
    """One user kernel, named as in an experiment (``file.cu:entry=spec.toml``, ``mod:fn=spec.json``, ...).

    PTX and cubins keep their own ``.target`` (``arch`` is ignored); .cu files and Triton
    functions are built for ``arch`` (``loaded``: see ``emit_user_triton``).
    """
    target, spec = split_spec(item)
    if kind == "ptx":
        return load_ptx(target)
    if kind == "cubin":
        return ptx_from_cubin(target)
    if kind == "cuda":
        path, _, entry = target.partition(":")
        return emit_cuda(path, arch, entry or None, cache=cache)
    if kind == "triton-user":
        if spec is None:
            raise SpecError(f"triton function {item!r}: give it as module:function=spec.json")
        return emit_user_triton(target, spec, arch, cache=cache, loaded=loaded)
    raise SpecError(f"unknown user kernel kind {kind!r} (have: {', '.join(USER_KINDS)})")
