"""The kinds of kernel source: registered families, PTX files, cubins, CUDA C++ files, Triton/Gluon functions."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import PtxprobeError, SpecError
from ptxprobe.core.items import KernelItem
from ptxprobe.ptx.text import retargeted, target_of
from ptxprobe.sources.base import Emitted, KernelSource
from ptxprobe.sources.catalog import emitted_pointer, family_info
from ptxprobe.sources.registry import FamilyInfo, KernelFamily, KernelSpec, Problem, family


def require_arch(fam: KernelFamily | FamilyInfo, arch: str) -> None:
    """Refuse a target the family cannot be built for, before the compiler aborts the process on it."""
    if fam.archs and arch not in fam.archs:
        raise SpecError(f"{fam.name}: cannot be built for {arch} (targets: {', '.join(fam.archs)})")


@dataclass(frozen=True)
class RegisteredSource(KernelSource):
    """One spec of a registered family (``ptxprobe kernels``) at the launch shape its specialisation comes from."""

    family_name: str
    dtype: str
    head_dim: int
    causal: bool
    config: str
    seq_len: int = 4096
    kind = "registered"

    @property
    def family(self) -> KernelFamily:
        """The family itself (its module imported): to compile or launch it."""
        return family(self.family_name)

    @functools.cached_property
    def info(self) -> FamilyInfo:
        """What the family supports (from the registry index: its module not imported; asked once per source)."""
        return family_info(self.family_name)

    @property
    def spec(self) -> KernelSpec:
        return self.info.spec(self.dtype, self.head_dim, self.causal, self.config)

    @property
    def label(self) -> str:
        return self.spec.key

    def build_archs(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        archs = self.info.archs
        return tuple(a for a in requested if not archs or a in archs)

    def columns(self) -> dict:
        return {
            "family": self.family_name,
            "dtype": self.dtype,
            "head_dim": self.head_dim,
            "causal": self.causal,
            "config": self.spec.config.label,
        }

    def identity(self) -> dict:
        return {**super().identity(), "seq_len": self.seq_len}

    def emit(self, arch: str, cache: Cache, only_cached: bool = False, name: str | None = None) -> Emitted | None:
        info, spec = self.info, self.spec
        require_arch(info, arch)
        if info.frontend == "triton":
            from ptxprobe.sources.triton import cached_specialize, emit_key, emitted_from, triton_ptx

            pointer = emitted_pointer(spec.key, self.seq_len, arch, name) if cache.enabled else None
            known = cache.get_json("registered-emit", pointer) if pointer else None
            rec = cache.get_json("emit-triton", known["emit_key"]) if known else None
            if rec is None and only_cached and pointer:  # not seen under this index: the emitting worker imports
                return None                              # Triton and finds or compiles it (and leaves the pointer)
            if rec is None:  # not seen under this index: Triton's own key, the family imported
                fam = self.family
                sp = cached_specialize(fam.fn, fam.launch_args(spec, Problem(seq_len=self.seq_len), None), cache)
                options = fam.compile_options(spec)
                key = emit_key(fam.fn, sp, arch, options, name, spec.key)
                rec = triton_ptx(fam.fn, sp, arch, options, cache, name=name, only_cached=only_cached, key=key)
                if rec is None:
                    return None
                if pointer:
                    cache.put_json("registered-emit", pointer, {"emit_key": key})
            e = emitted_from(rec, spec.key)
            return Emitted(e.kernel, arch, e.entry, e.ptx, e.frontend, e.metadata, e.stages)
        fam = self.family
        if fam.emit is None:
            raise SpecError(f"{fam.name}: frontend {fam.frontend!r} has no emit function")
        return fam.emit(spec, arch, cache, only_cached=only_cached)


@dataclass(frozen=True)
class _FileSource(KernelSource):
    path: str
    entry: str | None = None
    spec_path: str | None = None
    qualified: bool = False  # label by the whole path (two inputs share a file name)

    @property
    def label(self) -> str:
        name = self.path if self.qualified else Path(self.path).name
        return name if self.entry in (None, "all") else f"{name}:{self.entry}"

    @property
    def target(self) -> str:
        """The input as it was given (path, and ``:entry`` when one was named)."""
        return self.path if self.entry in (None, "all") else f"{self.path}:{self.entry}"

    def launch(self):
        from ptxprobe.sources.launch import load_launch

        return load_launch(self.spec_path) if self.spec_path else None

    def identity(self) -> dict:
        return {**super().identity(), "spec": self.spec_path}

    def input_files(self, archs: tuple[str, ...], cache: Cache) -> list[Path]:
        return [Path(self.path), *spec_files(self.spec_path)]


@dataclass(frozen=True)
class PtxFileSource(_FileSource):
    """A PTX file: built for its own ``.target``, or re-targeted to the archs asked for."""

    archs: tuple[str, ...] = ()
    kind = "ptx"

    def _read(self) -> Emitted:
        from ptxprobe.sources.files import load_ptx

        return load_ptx(self.path, self.entry)

    def build_archs(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        return self.archs or (own_target(self),)

    def emit(self, arch: str, cache: Cache, only_cached: bool = False) -> Emitted | None:
        e = self._read()
        if arch == e.arch:
            return Emitted(self.label, e.arch, e.entry, e.ptx, e.frontend, e.metadata, {}, e.entries)
        meta = {**e.metadata, "retargeted_from": e.arch}
        return Emitted(self.label, arch, e.entry, retargeted(e.ptx, arch), e.frontend, meta, {}, e.entries)


@dataclass(frozen=True)
class CubinFileSource(PtxFileSource):
    """A cubin whose PTX is embedded (built with -lineinfo): that PTX is what gets renamed."""

    kind = "cubin"

    def _read(self) -> Emitted:
        from ptxprobe.sources.files import ptx_from_cubin

        return ptx_from_cubin(self.path, self.entry)


@functools.cache
def own_target(src: PtxFileSource) -> str:
    return src._read().arch


@dataclass(frozen=True)
class CudaFileSource(_FileSource):
    """A CUDA C++ file compiled by nvcc for each arch; every ``__global__`` kernel unless ``entry`` picks one."""

    kind = "cuda"

    def emit(self, arch: str, cache: Cache, only_cached: bool = False) -> Emitted | None:
        from ptxprobe.sources.cuda import emit_cuda, nvcc_options

        e = emit_cuda(self.path, arch, self.entry, options=nvcc_options(self.spec_path), cache=cache,
                      only_cached=only_cached)
        if e is None:
            return None
        return Emitted(self.label, arch, e.entry, e.ptx, e.frontend, e.metadata, {}, e.entries)

    def input_files(self, archs: tuple[str, ...], cache: Cache) -> list[Path]:
        """The file, the headers of its own it includes (for any of ``archs``) and the spec."""
        from ptxprobe.sources.cuda import nvcc_options, user_headers

        headers: set[Path] = set()
        for arch in self.build_archs(archs):
            try:
                headers.update(user_headers(self.path, arch, cache, options=nvcc_options(self.spec_path)))
            except PtxprobeError:  # it does not compile: the sweep says so; the file alone is kept
                break
        return [*super().input_files(archs, cache), *sorted(headers)]


@dataclass(frozen=True)
class TritonFunctionSource(_FileSource):
    """A user's ``triton.jit`` or ``gluon.jit`` function (``module:function`` or ``file.py:function``) and its spec."""

    kind = "triton"

    def loaded(self, arch: str = "sm_90a"):
        """(function, specialisation, options): imported once per process and per content of module and spec
        (without a GPU, the module's import-time device questions see the first arch it is built for)."""
        from ptxprobe.sources.triton import file_hash

        if self.spec_path is None:
            raise SpecError(f"triton function {self.path!r}: give it as module:function=spec.json (--spec)")
        module = self.path.rpartition(":")[0]
        return _loaded(self.path, self.spec_path, file_hash(self.spec_path), file_hash(module), arch)

    def identity(self) -> dict:
        from ptxprobe.sources.triton import file_hash

        return {**super().identity(), "spec_sha256": file_hash(self.spec_path) if self.spec_path else None,
                "module_sha256": file_hash(self.path.rpartition(":")[0])}

    def input_files(self, archs: tuple[str, ...], cache: Cache) -> list[Path]:
        """The module file, the modules it imports from its own folder, and the spec."""
        return [*module_files(self.path.rpartition(":")[0]), *spec_files(self.spec_path)]

    @property
    def label(self) -> str:
        from ptxprobe.sources.triton import load_kernel_spec

        return str(load_kernel_spec(self.spec_path).get("name", self.path)) if self.spec_path else self.path

    def emit(self, arch: str, cache: Cache, only_cached: bool = False) -> Emitted | None:
        from triton.compiler.errors import CompilationError

        from ptxprobe.sources.triton import compile_failure, emitted_from, triton_ptx

        fn, sp, options = self.loaded(arch)
        try:
            rec = triton_ptx(fn, sp, arch, options, cache, only_cached=only_cached)
        except CompilationError as exc:  # the user's kernel: Triton's own reason and the line, as bad input
            raise compile_failure(fn, exc) from None
        if rec is None:
            return None
        e = emitted_from(rec, self.label)
        target = target_of(e.ptx)
        if target and target != arch:  # Triton builds sm_90a for compute capability 9.0: ptxas refuses it for sm_90
            raise SpecError(f"Triton compiles {self.path} for {target} (its PTX .target), not {arch}: "
                            f"ask for -s archs={target}")
        return Emitted(e.kernel, arch, e.entry, e.ptx, e.frontend, e.metadata, e.stages)


def _loaded(target: str, spec_path: str, spec_sha256: str | None, module_sha256: str | None, arch: str):
    """A user's module is imported once per process and content (its top level runs once)."""
    key = (target, spec_path, spec_sha256, module_sha256)
    if key not in _LOADED:
        from ptxprobe.sources.triton import user_specialization

        _LOADED[key] = user_specialization(target, spec_path, arch)
    return _LOADED[key]


_LOADED: dict = {}


def file_source(axis: str, item: KernelItem, archs: tuple[str, ...] = ()) -> KernelSource:
    """A user kernel as an experiment holds it, as the source of its axis's kind."""
    path, entry, spec = item.path, item.entry, item.spec
    if axis == "triton_functions":
        return TritonFunctionSource(path, None, spec)
    if axis == "cu_files":
        return CudaFileSource(path, entry, spec)
    if axis == "ptx_files":
        return PtxFileSource(path, entry, spec, archs=tuple(archs))
    if axis == "cubin_files":
        return CubinFileSource(path, entry, spec, archs=tuple(archs))
    raise SpecError(f"unknown user kernel axis {axis!r}")


def exists_or_refuse(src: KernelSource) -> None:
    """A missing input file is a clear error before any work."""
    if isinstance(src, (_FileSource,)) and not isinstance(src, TritonFunctionSource) and not Path(src.path).exists():
        raise SpecError(f"{src.path}: no such file")


def spec_files(spec_path: str | None) -> list[Path]:
    """A spec file and the reference module its ``[launch]`` names by path (``reference = "ref.py:fn"``, beside the
    spec or from the working directory), when there is one."""
    if not spec_path or not Path(spec_path).is_file():
        return []
    from ptxprobe.sources.triton import load_kernel_spec

    out = [Path(spec_path)]
    try:
        launch = load_kernel_spec(spec_path).get("launch")
        ref = str((launch.get("reference") if isinstance(launch, dict) else None) or "").rpartition(":")[0]
    except SpecError:
        return out
    if ref.endswith(".py"):
        found = [p for p in (Path(spec_path).parent / ref, Path(ref)) if p.is_file()]
        out += found[:1]
    return out


def module_files(module: str) -> list[Path]:
    """A Python module's file (``file.py`` or an importable ``package.module``) and, transitively, the modules it
    imports from its own folder (by name, read with ``ast``: nothing is run)."""
    if module.endswith(".py"):
        first = Path(module)
    else:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return []
        if found is None or not found.origin or not found.origin.endswith(".py"):
            return []
        first = Path(found.origin)
    if not first.is_file():
        return []
    folder, seen, todo = first.parent, [first], [first]
    while todo:
        try:
            tree = ast.parse(todo.pop().read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.module:
                    names.add(node.module.split(".")[0])
                if node.level:  # from . import helper
                    names.update(a.name for a in node.names)
        for name in sorted(names):
            p = folder / f"{name}.py"
            if p.is_file() and p not in seen:
                seen.append(p)
                todo.append(p)
    return seen
