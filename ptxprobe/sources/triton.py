"""Triton and Gluon functions to PTX for any target, without a GPU.

Triton's own compile cache keys on the function's source, not on ``repr=``, so a renamed
kernel could come back stale. ptxprobe never touches that cache: it drives Triton's stage
pipeline itself (ttir -> ttgir -> llir -> ptx, each output kept), stops before ptxas, and
caches the result in its own store keyed by the function, specialisation, options, target,
name, ``triton_key()`` (Triton's own hash of its compiler and libtriton) and the
environment knobs Triton says change code generation.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import logging
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptxprobe.core.cache import Cache, sha256_file, sha256_text
from ptxprobe.core.errors import KernelCompileError, SpecError
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.text import entry_of
from ptxprobe.sources.base import Emitted
from ptxprobe.sources.constexprs import checked, uses
from ptxprobe.sources.launch import load_kernel_spec
from ptxprobe.sources.offline import complete_signature, offline_target
from ptxprobe.sources.registry import PointerArg
from ptxprobe.toolchain.tools import arch_number

log = logging.getLogger("ptxprobe")


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


def specialize(fn, args: list) -> Specialization:
    """Mirror Triton's launch-time binder on (possibly stand-in) arguments."""
    from triton.backends.compiler import BaseBackend

    try:
        from triton._C.libtriton import native_specialize_impl
    except ImportError:  # Triton 3.5: the binder is Python
        from triton.runtime.jit import create_specialize_impl

        def native_specialize_impl(_backend, arg, is_const, specialize_value, align,
                                   _impl=create_specialize_impl(BaseBackend.get_arg_specialization)):
            return _impl(arg, is_const, specialize_value, align)

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


def _plain(args: list) -> list | None:
    """A stable description of stand-in launch arguments, or None when one is not plainly describable."""
    out = []
    for a in args:
        if isinstance(a, PointerArg):
            out.append(["ptr", str(a.dtype), a.address])
        elif isinstance(a, (bool, int, float, str)) or a is None:
            out.append([type(a).__name__, a])
        elif all(hasattr(a, f) for f in ("base", "shape", "strides", "block_shape", "layout")):  # a TMA descriptor
            base = _plain([a.base])
            if base is None:
                return None
            out.append(["desc", base, list(a.shape), list(a.strides), list(a.block_shape), repr(a.layout)])
        else:
            return None
    return out


def cached_specialize(fn, args: list, cache: Cache) -> Specialization:
    """``specialize``, memoised on disk by the function and its stand-in arguments (Triton's binder imports
    torch when torch is installed: a cached sweep then starts without it)."""
    described = _plain(args)
    if described is None:
        return specialize(fn, args)
    key = stage_key("triton-specialization", fn=fn.cache_key, args=described,
                    compiler=compiler_identity()["triton_key"])
    rec = cache.get_json("triton-specialization", key)
    if rec is not None:  # the cache sorts JSON keys: put the parameters back in order (attrs index into it)
        order = [p.name for p in fn.params]
        return Specialization({n: rec["signature"][n] for n in order if n in rec["signature"]},
                              {n: rec["constexprs"][n] for n in order if n in rec["constexprs"]},
                              {(i,): a for i, a in rec["attrs"]})
    sp = specialize(fn, args)
    try:
        cache.put_json("triton-specialization", key, {"signature": sp.signature, "constexprs": sp.constexprs,
                                            "attrs": [[k[0], v] for k, v in sp.attrs.items()]})
    except TypeError:  # a constexpr that is not JSON: not memoised
        pass
    return sp


def _target(arch: str):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", arch_number(arch), 32)


def is_gluon(fn) -> bool:
    return bool(getattr(fn, "is_gluon", lambda: False)())


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


def renamed_fn(fn, name: str):
    """The frontend-level rename: the same kernel with ``repr=`` returning ``name`` (Triton or Gluon)."""
    if is_gluon(fn):
        from triton.experimental import gluon

        return gluon.jit(repr=lambda _: name)(fn.fn)
    import triton

    return triton.jit(repr=lambda _: name)(fn.fn)


@functools.cache
def compiler_identity() -> dict:
    """Triton's own key for its compiler (``triton_key()``) and the codegen-changing knobs, memoised on disk.

    ``triton_key()`` hashes libtriton (~400 MB): the disk memo is keyed by that file's size and mtime.
    """
    import triton
    from triton._C.libtriton import get_cache_invalidating_env_vars

    lib, stamp = libtriton_stamp()
    memo_key = stage_key("triton-key", stamp=stamp, version=triton.__version__, root=str(lib))
    cache = Cache()
    rec = cache.get_json("triton-key", memo_key)
    if rec is None:
        from triton.runtime.cache import triton_key

        rec = {"triton_key": sha256_text(triton_key())}
        cache.put_json("triton-key", memo_key, rec)
    return {"triton_key": rec["triton_key"], "env": dict(sorted(get_cache_invalidating_env_vars().items()))}


def libtriton_stamp() -> tuple[Path | None, list]:
    """The installed Triton's ``_C`` folder and (name, size, mtime) of its libtriton, found without importing
    Triton: what stands for ``triton_key()`` in memos that must not pay for hashing it."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None, []
    lib = Path(list(spec.submodule_search_locations)[0]) / "_C"
    return lib, [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(lib.glob("libtriton*"))]


def emit_key(fn, spec_: Specialization, arch: str, options: dict, name: str | None = None,
             spec_key: str | None = None) -> str:
    """The ``emit-triton`` key: everything that shapes the PTX of one specialisation."""
    return stage_key(
        "emit-triton",
        fn=fn.cache_key,
        specialization=spec_.to_json(),
        attrs=str(spec_.attrs),
        options=options,
        arch=arch,
        name=name,
        compiler=compiler_identity(),
        spec=spec_key,
    )


def triton_ptx(
    fn,
    spec_: Specialization,
    arch: str,
    options: dict,
    cache: Cache,
    name: str | None = None,
    only_cached: bool = False,
    spec_key: str | None = None,
    key: str | None = None,
) -> dict | None:
    """Triton's stages up to PTX for one specialisation, cached by everything that shapes the PTX (``emit_key``,
    or ``key`` when the caller computed it).

    Returns the cached record {"ptx", "metadata", "stages"}; None only with ``only_cached`` and a miss.
    """
    import triton

    key = key or emit_key(fn, spec_, arch, options, name, spec_key)
    rec = cache.get_json("emit-triton", key)
    if rec is None and not only_cached:
        outputs, meta = compile_stages(renamed_fn(fn, name) if name else fn, spec_, arch, options)
        meta["specialization"] = spec_.to_json()
        meta["triton_version"] = triton.__version__
        rec = {"ptx": outputs["ptx"], "metadata": meta, "stages": {k: sha256_text(v) for k, v in outputs.items()}}
        cache.put_json("emit-triton", key, rec)
    return rec


def compile_failure(fn, exc: Exception) -> KernelCompileError:
    """Triton's CompilationError as one line in the user's terms: ``file.py:LINE: <source line>: <Triton's reason>``."""
    node = getattr(exc, "node", None)
    reason = getattr(exc, "error_message", None) or (str(exc.__cause__) if exc.__cause__ else "")
    reason = " ".join((reason or str(exc).strip().splitlines()[-1]).split())
    lineno = getattr(node, "lineno", None)
    where = getattr(fn, "__name__", "kernel")
    try:
        lines, first = inspect.getsourcelines(fn.fn)
        defs = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def "))  # Triton's lines count from it
        if lineno is not None:
            path = Path(inspect.getsourcefile(fn.fn) or "?")
            where = f"{path.name}:{first + defs + lineno - 1}: {lines[defs + lineno - 1].strip()}"
    except (OSError, TypeError, StopIteration, IndexError):
        pass
    return KernelCompileError(f"{where}: Triton cannot compile it: {reason}")


def emitted_from(rec: dict, label: str) -> Emitted:
    ptx = rec["ptx"]
    return Emitted(label, "", entry_of(ptx), ptx, "triton", rec["metadata"], rec["stages"])


# --- a user's Triton or Gluon function with a spec file ---------------------------------------

def import_target(target: str, what: str):
    """``package.module:name`` or ``path/to/file.py:name`` -> that object (None if the module lacks it)."""
    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise SpecError(f"{what} takes module:function or file.py:function, got {target!r}")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name)
            if not path.is_file():
                raise SpecError(f"{what}: no such file {path}")
            mod, raised = run_file_module(path, what)
            if raised is not None:
                raise raised
        else:
            mod = importlib.import_module(mod_name)
    except SpecError:  # said already, in its own words: not wrapped again
        raise
    except (ImportError, FileNotFoundError, SyntaxError) as exc:
        raise SpecError(f"{what}: cannot import {mod_name}: {exc}") from exc
    except Exception as exc:  # the user's module ran code at import time that failed
        raise SpecError(f"{what}: importing {mod_name} raised {type(exc).__name__}: {exc}") from exc
    return getattr(mod, attr, None)


def run_file_module(path: Path, what: str) -> tuple[Any, BaseException | None]:
    """The module a ``.py`` file defines (named by its stem, so a ``__main__`` guard stays shut), run with its folder
    first on ``sys.path``; and what its code raised, if it did, with the definitions made before it kept."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"{what}: cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    try:
        with script_folder_first(path):
            spec.loader.exec_module(mod)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the caller decides what a failed import means
        return mod, exc
    return mod, None


@contextlib.contextmanager
def script_folder_first(path: Path):
    """While a kernel file is imported its folder is first on ``sys.path``, as ``python file.py`` has it, so
    ``from mylib import act`` finds ``mylib.py`` beside it. The sibling modules it imported are forgotten after
    (another folder's ``mylib`` is never served from this one's; the objects already bound keep working)."""
    folder = str(path.resolve().parent)
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin and str(Path(origin).resolve().parent) == folder:
                del sys.modules[name]


def unwrapped(obj) -> tuple[Any, list]:
    """The JIT function inside ``@triton.autotune``/``@triton.heuristics`` (Triton keeps it as ``.fn``), and the
    wrappers around it, outermost first; a ``triton.jit``/``gluon.jit`` function is its own."""
    wrappers = []
    while obj is not None and not hasattr(obj, "params") and _wrapper_kind(obj):
        wrappers.append(obj)
        obj = getattr(obj, "fn", None)
    return obj, wrappers


def _wrapper_kind(obj) -> str | None:
    """"Autotuner" or "Heuristics" for Triton's wrappers and a library's subclasses of them (fla's cached
    autotuner), else None."""
    return next((c.__name__ for c in type(obj).__mro__ if c.__name__ in ("Autotuner", "Heuristics")), None)


def wrapped_note(target: str, wrappers: list) -> str | None:
    """What a sweep of an autotuned or heuristics-wrapped kernel compiles instead of what the wrappers choose."""
    said = []
    for w in wrappers:
        if _wrapper_kind(w) == "Autotuner":
            said.append(f"@triton.autotune's {len(getattr(w, 'configs', []) or [])} configs are not swept")
        else:
            said.append(f"@triton.heuristics' values of {', '.join(getattr(w, 'values', {}) or {})} are not "
                        "computed (nothing is launched)")
    if not said:
        return None
    return f"{target}: {'; '.join(said)}: the spec's constexprs, num_warps and num_stages are what is compiled"


_SAID: set = set()


def load_kernel(target: str, arch: str = "sm_90a", what: str = "--triton") -> tuple[Any, list]:
    """``package.module:function`` (or ``path/to/file.py:function``) -> (the triton.jit or gluon.jit function, the
    autotune/heuristics wrappers around it); without a GPU the module's import-time device questions are answered
    for ``arch``. That the wrappers' choices are not swept is said once, by the process that plans (not by the
    pool's workers, which import it again)."""
    with offline_target(arch):
        fn, wrappers = unwrapped(import_target(target, what))  # errors name what the user typed
    if fn is None or not hasattr(fn, "params"):
        raise SpecError(f"{target}: no triton.jit function named {target.rpartition(':')[2]!r}")
    note = wrapped_note(target, wrappers)
    if note and target not in _SAID and multiprocessing.parent_process() is None:
        _SAID.add(target)
        log.warning("%s", note)
    return fn, wrappers


def load_triton_function(target: str, arch: str = "sm_90a"):
    """The triton.jit or gluon.jit function ``target`` names (inside its autotune/heuristics wrappers)."""
    return load_kernel(target, arch)[0]


def user_specialization(target: str, spec_path: str | Path, arch: str = "sm_90a") -> tuple[Any, Specialization, dict]:
    """(function, specialisation, compile options) of a user's Triton or Gluon function from its spec file."""
    fn = load_triton_function(target, arch)
    spec = load_kernel_spec(spec_path)
    if "signature" not in spec:
        raise SpecError(f"{spec_path}: a Triton function's spec needs a 'signature' (parameter -> type)")
    params = [p.name for p in fn.params]
    sig = _table(spec, "signature", spec_path, 'a table of parameter = "type", e.g. {x_ptr = "*fp32", n = "i32"}')
    if list(sig) != params:
        raise SpecError(f"{spec_path}: signature names {list(sig)} do not match {fn.__name__}'s parameters {params}")
    for name, ty in sig.items():
        check_type(name, ty, spec_path)
    sig = complete_signature(fn, sig, is_gluon(fn))
    used = uses(fn)
    constexprs = {k: checked(k, v, used.get(k), spec_path)
                  for k, v in _table(spec, "constexprs", spec_path, "a table of parameter = value").items()}
    missing = [n for n, t in sig.items() if t == "constexpr" and n not in constexprs]
    if missing:
        raise SpecError(f"{spec_path}: no value for constexpr parameter(s) {missing}")
    div = spec.get("divisible_by_16", [])
    if not isinstance(div, list) or not all(isinstance(n, str) for n in div):
        raise SpecError(f"{spec_path}: divisible_by_16 = {div!r}: expected a list of parameter names, e.g. [\"x_ptr\"]")
    bad = [n for n in div if n not in params]
    if bad:
        raise SpecError(f"{spec_path}: divisible_by_16 names unknown parameters {bad}")
    if "name" in spec and not isinstance(spec["name"], str):
        raise SpecError(f"{spec_path}: name = {spec['name']!r}: expected a string (the kernel's label)")
    attrs = {(params.index(n),): [["tt.divisibility", 16]] for n in div}
    options = {"num_warps": _option(spec, "num_warps", 4, spec_path), "num_stages": _option(spec, "num_stages", 3,
                                                                                            spec_path)}
    if "maxnreg" in spec:  # warp-specialised kernels: the register budget setmaxnreg divides
        options["maxnreg"] = _option(spec, "maxnreg", None, spec_path)
    return fn, Specialization(sig, constexprs, attrs), options


_OPTIONS = {  # spec key -> (what is expected, the check)
    "num_warps": ("a power of 2 from 1 to 32", lambda n: 1 <= n <= 32 and n & (n - 1) == 0),
    "num_stages": ("an integer from 0 to 16", lambda n: 0 <= n <= 16),
    "maxnreg": ("an integer from 24 to 256", lambda n: 24 <= n <= 256),
}


def _option(spec: dict, key: str, default, spec_path) -> int:
    """A compile option of the spec, refused with the key, the value and what is expected."""
    value = spec.get(key, default)
    expected, ok = _OPTIONS[key]
    if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
        raise SpecError(f"{spec_path}: {key} = {value!r}: expected {expected}")
    return value


def _table(spec: dict, key: str, spec_path, expected: str) -> dict:
    value = spec.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{spec_path}: {key} = {value!r}: expected {expected}")
    return dict(value)


def check_type(param: str, ty, spec_path) -> None:
    """A signature type as Triton spells it (``*fp32``, ``i32``, ``fp16``, ``constexpr``, ``tensordesc<...>``)."""
    from triton.compiler.code_generator import str_to_ty

    expected = ('a Triton type such as "*fp32", "*fp16", "i32", "i64", "fp32" or "constexpr" '
                '(Triton spells int32 "i32", float32 "fp32")')
    if not isinstance(ty, str):
        raise SpecError(f"{spec_path}: signature {param} = {ty!r}: expected {expected}")
    if ty == "constexpr" or ty.startswith("tensordesc"):
        return
    try:
        str_to_ty(ty, None)
    except Exception:  # Triton's parser answers an unknown name with a KeyError (or worse)
        raise SpecError(f"{spec_path}: signature {param} = {ty!r}: expected {expected}") from None


def runtime_params(fn, sp: Specialization) -> list[str]:
    """A Triton function's parameters that are passed at launch (not constexpr, not specialised to 1)."""
    return [p.name for p in fn.params if sp.signature.get(p.name) != "constexpr"]


def file_hash(path: str | os.PathLike) -> str | None:
    """sha256 of a file's bytes, or None when it cannot be read."""
    try:
        return sha256_file(path)
    except OSError:
        return None
