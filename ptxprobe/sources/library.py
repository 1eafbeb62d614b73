"""PTX embedded in a shared library, fatbin, cubin or wheel: extracted by cuobjdump, one kernel source per module.

A CUDA library ships machine code (SASS, as ELF images) for the archs it was built for and, usually, PTX for the
driver's JIT to compile on newer GPUs. ptxprobe renames that PTX. ``cuobjdump -xptx all`` extracts it (the fatbin
container is undocumented and often compressed: never parsed here); ``-lelf``/``-lptx`` list what the library ships.
A wheel is unzipped first, and each ``.so`` inside is a library of its own. The extraction is cached (stage
``lib-extract``: the library's bytes, cuobjdump's and this code), one file per module, so a re-run extracts nothing
and no more than one module's text is held at once. Entries whose bodies are empty stubs (code guarded by
``__CUDA_ARCH__``, empty on this target) are left out, with a count, before any assembly.

What the sweep then assembles is neither the SASS the library ships nor what the driver's JIT makes (which targets
the GPU's own arch with the driver's ptxas, and only where no SASS ships): the notes say so, once per library.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ptxprobe.core.cache import Cache, file_store, sha256_bytes, sha256_file
from ptxprobe.core.errors import MalformedPtx, PtxprobeError, SpecError, ToolFailed
from ptxprobe.core.items import KernelItem
from ptxprobe.core.proc import FAILED, OK, run_tool
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.text import (
    ENTRY_RE,
    Pruned,
    brace_span,
    code_of,
    jit_reaches,
    pruned_to,
    ptx_isa,
    retargeted,
    target_of,
)
from ptxprobe.sources.base import Emitted, KernelSource
from ptxprobe.toolchain.tools import arch_order, find_tool

STAGE = "lib-extract"
_LISTED_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S+)", re.MULTILINE)
_EXTRACTED_RE = re.compile(r"^Extracting PTX file(?: and ptxas options)?\s+\d+:\s+(\S+)[ \t]*(.*?)\s*$", re.MULTILINE)
_ARCH_IN_NAME_RE = re.compile(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)$")
_LABEL_RE = re.compile(r"^[$%\w.]+:$")
_LIB_SUFFIX_RE = re.compile(r"\.so(?:\.\d+)*$")
_RETURNS = ("ret;", "ret.uni;", "exit;")
_TIMEOUT = 900.0


@dataclass(frozen=True)
class PtxModule:
    """One PTX module a library embeds, as cuobjdump names it; its text is kept in the cache under ``file``."""

    name: str  # cuobjdump's name: <library stem>.<n>.<arch>.ptx
    file: str  # the cache file holding its text
    target: str  # its .target
    version: str  # its .version (PTX ISA)
    sha256: str  # of its text
    entries: tuple[str, ...]  # the entries to sweep (non-stub), in order
    stubs: tuple[str, ...]  # entries whose body is empty on this target: left out
    ptxas_options: str  # what the fatbin asks ptxas for when the driver JITs it


@dataclass(frozen=True)
class Library:
    """One library: the file given, or a ``.so`` inside a wheel (``member``)."""

    member: str | None  # its path inside the wheel; None: the file itself
    sha256: str  # of its bytes
    sass_archs: tuple[str, ...]  # the archs its ELF images (SASS) are for
    modules: tuple[PtxModule, ...]


@dataclass(frozen=True)
class Extraction:
    """Everything one input file embeds, and where the cache keeps the modules' text."""

    path: str  # the file given
    sha256: str  # of the file given (a wheel's: the wheel)
    key: str  # its lib-extract cache key
    cuobjdump: str  # the version that extracted it
    libraries: tuple[Library, ...]
    host_only: tuple[str, ...] = ()  # a wheel's .so files without device code


def _as_extraction(d: dict) -> Extraction:
    """The record the cache keeps (JSON: lists for tuples) as the frozen records again."""
    libs = tuple(Library(lib["member"], lib["sha256"], tuple(lib["sass_archs"]),
                         tuple(PtxModule(**{**m, "entries": tuple(m["entries"]), "stubs": tuple(m["stubs"])})
                               for m in lib["modules"])) for lib in d["libraries"])
    return Extraction(d["path"], d["sha256"], d["key"], d["cuobjdump"], libs, tuple(d["host_only"]))


# --- extraction -------------------------------------------------------------------------------------------------


def extract(path: str | Path, cache: Cache) -> Extraction:
    """What ``path`` embeds, from the cache or extracted once (a missing cuobjdump: ToolNotFound, exit 3)."""
    p = Path(path)
    if p.is_dir():
        raise SpecError(f"{p} is a directory, not a library")
    try:
        st = p.stat()
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    store = file_store(cache)
    return _extract(str(p), st.st_mtime_ns, st.st_size, str(store.root), store.enabled)


@functools.cache
def _extract(path: str, mtime_ns: int, size: int, root: str, enabled: bool) -> Extraction:
    """Memoised per process and file state: every source of a library, and every sweep stage, asks again."""
    tool = find_tool("cuobjdump")
    sha = sha256_file(path)
    store = Cache(root, enabled)
    key = stage_key(STAGE, library=sha, cuobjdump=tool.sha256)
    rec = store.get_json(STAGE, key)
    if rec is not None:
        return _as_extraction({**rec, "path": path})
    with tempfile.TemporaryDirectory(prefix="ptxprobe-lib-") as scratch:
        if zipfile.is_zipfile(path):
            libs, host_only = _wheel(Path(path), Path(scratch), tool.path, store, key)
        else:
            libs, host_only = (_library(Path(path), None, sha, Path(scratch), tool.path, store, key, 0),), ()
    ext = Extraction(path, sha, key, tool.version, libs, host_only)
    store.put_json(STAGE, key, asdict(ext))  # last: a crash midway leaves no record, so it is extracted again
    return ext


def _wheel(path: Path, scratch: Path, cuobjdump: str, store: Cache, key: str):
    """Each ``.so`` of a wheel in turn (unzipped to ``scratch``, then removed): its libraries and host-only ones."""
    libs, host_only = [], []
    with zipfile.ZipFile(path) as zf:
        members = [i for i in zf.infolist() if not i.is_dir() and _LIB_SUFFIX_RE.search(i.filename)]
        for n, info in enumerate(members):
            folder = scratch / str(n)
            folder.mkdir()
            lib_path = folder / Path(info.filename).name
            with zf.open(info) as src, open(lib_path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            try:
                lib = _library(lib_path, info.filename, sha256_file(lib_path), folder, cuobjdump, store, key, n)
            except SpecError:  # no fatbin in it (or not even an ELF file): a host library
                host_only.append(info.filename)
                continue
            finally:
                lib_path.unlink()
            libs.append(lib)
    if not libs:
        raise SpecError(f"{path}: no library inside holds device code ({len(host_only)} .so files, none with a "
                        "fatbin)")
    return tuple(libs), tuple(host_only)


class NoDeviceCode(SpecError):
    """An ELF file that holds no fatbin (a host-only library)."""


def _cuobjdump(cuobjdump: str, args: list[str], path: Path, cwd: Path | None = None) -> str:
    """cuobjdump's stdout; its refusal of the input in its own words (bad input), its crash as a tool failure."""
    run = run_tool([cuobjdump, *args, path.resolve()], timeout=_TIMEOUT, cwd=cwd)
    words = [ln.split(":", 1)[1].strip() if ":" in ln else ln.strip()
             for ln in run.stderr.splitlines() if "fatal" in ln or "does not contain device code" in ln]
    if run.status == OK or (run.status == FAILED and words):
        if any("does not contain device code" in w for w in words):
            raise NoDeviceCode(f"{path}: cuobjdump: {words[0]}")
        if words:
            raise SpecError(f"{path}: not a library cuobjdump can read: {words[0]}")
        return run.stdout
    raise ToolFailed(f"{path}: {run.describe()}")


def _library(path: Path, member: str | None, sha: str, scratch: Path, cuobjdump: str, store: Cache, key: str,
             n: int) -> Library:
    """One library's SASS archs and PTX modules; each module's text goes to the cache as soon as it is read."""
    listing = _cuobjdump(cuobjdump, ["-all", "-lelf", "-lptx"], path)  # -all: a -rdc library keeps its PTX there
    listed = _LISTED_RE.findall(listing)
    sass = {m.group(1) for kind, name in listed if kind == "ELF" and (m := _ARCH_IN_NAME_RE.search(name))}
    modules: list[PtxModule] = []
    if any(kind == "PTX" for kind, _ in listed):
        out = scratch / "ptx"
        out.mkdir()
        said = _cuobjdump(cuobjdump, ["-all", "-xptx", "all"], path, cwd=out)
        options = dict(_EXTRACTED_RE.findall(said))
        for i, name in enumerate(name for kind, name in listed if kind == "PTX"):
            file = out / name
            if not file.is_file():
                raise ToolFailed(f"{path}: cuobjdump listed {name} but did not extract it")
            modules.append(_module(file, f"{n}-{i}.ptx", options.get(name, ""), store, key))
            file.unlink()
        out.rmdir()
    return Library(member, sha, tuple(sorted(sass, key=arch_order)), tuple(modules))


def _module(file: Path, cache_name: str, options: str, store: Cache, key: str) -> PtxModule:
    """One extracted module read once: its facts kept, its text put in the cache (and dropped from memory)."""
    data = file.read_bytes()
    text = data.decode("utf-8", errors="replace")
    try:
        target, isa = target_of(text), ptx_isa(text)
    except PtxprobeError as exc:
        raise MalformedPtx(f"{file.name}: {exc}") from None
    entries, stubs = split_stubs(text)
    store.put(STAGE, key, cache_name, data)
    return PtxModule(file.name, cache_name, target, f"{isa[0]}.{isa[1]}", sha256_bytes(data), entries, stubs, options)


def split_stubs(ptx: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(entries with code, entries whose body is an empty stub), each in order.

    A kernel whose code sits under ``#if __CUDA_ARCH__ >= 900`` compiles, for an older target, to a body holding
    ``ret;`` alone (with labels, ``.loc`` lines or register declarations at most): nothing ptxas could compile
    differently under another name, so it is not worth an assembly.
    """
    lines = ptx.splitlines()
    entries: list[str] = []
    stubs: list[str] = []
    i = 0
    while i < len(lines):
        m = ENTRY_RE.match(lines[i])
        if m is None:
            i += 1
            continue
        opened, closed = brace_span(lines, i)
        (stubs if opened != closed and _is_stub(lines, opened, closed) else entries).append(m.group(1))
        i = closed + 1
    return tuple(entries), tuple(stubs)


def _is_stub(lines: list[str], opened: int, closed: int) -> bool:
    """Whether the body between these brace lines holds no instruction but a return."""
    for n in range(opened, closed + 1):
        code = code_of(lines[n])
        if n == opened:
            code = code.split("{", 1)[1]
        if n == closed:
            code = code.rsplit("}", 1)[0]
        code = code.replace("{", "").replace("}", "").strip()
        if code and not _LABEL_RE.match(code) and not code.startswith((".loc", ".reg")) and code not in _RETURNS:
            return False
    return True


# --- one kernel source per PTX module ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryModuleSource(KernelSource):
    """One PTX module of a library: built for its own ``.target``, or re-targeted to the archs asked for."""

    path: str  # the file given (a .so, fatbin, cubin or wheel)
    file_sha256: str
    member: str | None  # the library's path inside a wheel
    library_sha256: str
    sass_archs: tuple[str, ...]
    module: PtxModule
    key: str  # the lib-extract cache key its text is kept under
    entry: str | tuple[str, ...] | None = None  # several where --lib items chose several entries of this module
    spec_path: str | None = None
    archs: tuple[str, ...] = ()
    qualified: bool = False  # label by the path given (two inputs share a file name)
    kind = "lib"

    @property
    def library(self) -> str:
        """The library as a person names it: the file's name, or the ``.so``'s path inside the wheel."""
        return self.member or Path(self.path).name

    @property
    def label(self) -> str:
        if self.qualified:  # the path given, then the .so inside it (a wheel), then the module
            return ":".join([self.path, *([self.member] if self.member else []), self.module.name])
        return f"{self.library}:{self.module.name}"

    def build_archs(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        return reached(self.module, self.archs)

    def launch(self):
        from ptxprobe.sources.launch import load_launch

        return load_launch(self.spec_path) if self.spec_path else None

    def identity(self) -> dict:
        """The library by path and sha256 (it is never copied into the run directory: it can be huge)."""
        return {**super().identity(), "library": str(Path(self.path).resolve()), "library_sha256": self.file_sha256,
                "member": self.member, "member_sha256": self.library_sha256 if self.member else None,
                "module": self.module.name, "module_sha256": self.module.sha256, "entry": self.entry,
                "spec": self.spec_path}

    def chosen_entries(self) -> tuple[str, ...]:
        """The module's entries its item (or items) chose, in the module's order."""
        from ptxprobe.sources.files import choose_entries

        patterns = self.entry if isinstance(self.entry, tuple) else (self.entry,)
        chosen = {e for p in patterns for e in choose_entries(list(self.module.entries), p, self.label)}
        return tuple(e for e in self.module.entries if e in chosen)

    def module_text(self, cache: Cache, only_cached: bool = False) -> str | None:
        """The module's PTX as extracted (kept in the cache under the extraction's key)."""
        data = file_store(cache).get(STAGE, self.key, self.module.file)
        if data is None:
            if only_cached:
                return None
            if extract(self.path, cache).key != self.key:
                raise SpecError(f"{self.path} changed since the sweep was planned: run it again")
            data = file_store(cache).get(STAGE, self.key, self.module.file)
            if data is None:
                raise ToolFailed(f"{self.label}: extracted, yet not in the cache")
        return data.decode("utf-8", errors="replace")

    def cut(self, chosen: tuple[str, ...], cache: Cache, only_cached: bool = False) -> Pruned | None:
        """The module cut to ``chosen`` (``pruned_to``), kept in the cache: a sweep's planning reads a source's PTX
        more than once, and cutting a vLLM module of 30 MB takes seconds."""
        key = stage_key("lib-cut", module=self.module.sha256, keep=sorted(chosen))
        rec = cache.get_json("lib-cut", key)
        if rec is not None:
            return Pruned(rec["ptx"], tuple(rec["entries_left_out"]), tuple(rec["functions_left_out"]))
        ptx = self.module_text(cache, only_cached)
        if ptx is None:
            return None
        pruned = pruned_to(ptx, frozenset(chosen))
        cache.put_json("lib-cut", key, {"ptx": pruned.ptx, "entries_left_out": list(pruned.entries_left_out),
                                        "functions_left_out": list(pruned.functions_left_out)})
        return pruned

    def emit(self, arch: str, cache: Cache, only_cached: bool = False) -> Emitted | None:
        chosen = self.chosen_entries()
        # some kernels chosen from a module (vLLM's hold thousands): the rest are cut before ptxas, never assembled
        if self.entry not in (None, "all"):
            pruned = self.cut(chosen, cache, only_cached)
            if pruned is None:
                return None
            ptx = pruned.ptx
        else:
            pruned, ptx = None, self.module_text(cache, only_cached)
            if ptx is None:
                return None
        meta = {"source": self.path, "library": self.library, "library_sha256": self.library_sha256,
                "module": self.module.name, "ptx_target": self.module.target, "ptx_version": self.module.version,
                "sass_archs": list(self.sass_archs), "stub_entries_left_out": len(self.module.stubs),
                "ptxas_options": self.module.ptxas_options}
        if self.member:
            meta.update(wheel=self.path, wheel_sha256=self.file_sha256)
        if pruned and pruned.entries_left_out:
            meta.update(entries_left_out=len(pruned.entries_left_out),
                        functions_left_out=len(pruned.functions_left_out))
        if arch != self.module.target:
            meta["retargeted_from"] = self.module.target
            ptx = retargeted(ptx, arch)
        return Emitted(self.label, arch, chosen[0], ptx, "ptx", meta, {}, chosen)


def merged_items(sources: list) -> list:
    """Several ``--lib`` items choosing entries of one module (``--lib k.so:vadd --lib k.so:scale``, a sample of a
    library's kernels) as one source that chooses them all: ptxas assembles a module once, cut to what is chosen.
    An item that takes the whole module takes the others in; the same item twice is left for the caller to refuse."""
    groups: dict[tuple, list[LibraryModuleSource]] = {}
    for s in sources:
        if isinstance(s, LibraryModuleSource):
            groups.setdefault((s.path, s.member, s.module.name, s.spec_path, s.archs), []).append(s)
    merged: dict[int, LibraryModuleSource | None] = {}
    for group in groups.values():
        entries = [e for s in group for e in (s.entry if isinstance(s.entry, tuple) else (s.entry,))]
        if len(group) < 2 or len(set(entries)) < len(entries):
            continue
        whole = any(e in (None, "all") for e in entries)
        merged[id(group[0])] = replace(group[0], entry=None if whole else tuple(entries))
        merged.update({id(s): None for s in group[1:]})
    return [merged.get(id(s), s) for s in sources if merged.get(id(s), s) is not None]


def reached(module: PtxModule, archs: tuple[str, ...]) -> tuple[str, ...]:
    """The archs a module is assembled for: its own target, or those asked for that the driver would JIT its PTX
    for (``jit_reaches``); none where it reaches none of them (it never runs there)."""
    return tuple(a for a in archs if jit_reaches(module.target, a)) if archs else (module.target,)


def chosen_modules(lib: Library, entry: str | None, where: str) -> list[PtxModule]:
    """The modules with something to sweep: every one with a non-stub entry, or those holding ``entry`` (a name
    that fits several kernels of one module is refused there, with the list)."""
    from ptxprobe.sources.files import choose_entries, entry_matches

    out = []
    for mod in lib.modules:
        if mod.entries and (entry in (None, "all") or entry_matches(list(mod.entries), entry)):
            choose_entries(list(mod.entries), entry, f"{where}:{mod.name}")
            out.append(mod)
    return out


def _stub_named(ext: Extraction, entry: str) -> str | None:
    from ptxprobe.sources.files import entry_matches

    for lib in ext.libraries:
        for mod in lib.modules:
            if entry_matches(list(mod.stubs), entry):
                return f"{entry} is an empty stub in {mod.name} (code guarded for other archs), left out"
    return None


def library_sources(item: KernelItem, archs: tuple[str, ...] = (), cache: Cache | None = None
                    ) -> list[LibraryModuleSource]:
    """``lib.so[:entry][=spec]`` as one source per PTX module with something to sweep; a library without PTX,
    or whose PTX holds stubs alone, is refused in one line."""
    path, entry, spec = item.path, item.entry, item.spec
    ext = extract(path, cache or Cache())
    shown = ext.path
    if not any(lib.modules for lib in ext.libraries):
        hint = "; it keeps PTX in .nv_debug_ptx_txt (-lineinfo): give it with --cubin" if _keeps_ptx(path) else ""
        raise SpecError(f"{shown} ships SASS only ({_sass_text(ext)}): no PTX to rename{hint}")
    out = [LibraryModuleSource(path, ext.sha256, lib.member, lib.sha256, lib.sass_archs, mod, ext.key, entry, spec,
                               tuple(archs))
           for lib in ext.libraries for mod in chosen_modules(lib, entry, shown)]
    beyond = [s.module.target for s in out if not reached(s.module, archs)]
    out = [s for s in out if reached(s.module, archs)]
    if beyond and not out:  # the driver would never load any of them there: nothing runs, nothing to compare
        raise SpecError(f"{shown}: its PTX ({len(beyond)} module{'s' if len(beyond) > 1 else ''}, targets "
                        f"{', '.join(sorted(set(beyond), key=arch_order))}) is never JIT-compiled for "
                        f"{', '.join(archs)}: PTX runs on its own SM and later ones (arch-specific PTX on its own)")
    if not out and entry not in (None, "all"):
        n = sum(len(m.entries) for lib in ext.libraries for m in lib.modules)
        raise SpecError(f"{shown}: no entry {entry!r} among the {n} entries of its PTX"
                        + (f": {why}" if (why := _stub_named(ext, entry)) else ""))
    if not out:
        stubs = sum(len(m.stubs) for lib in ext.libraries for m in lib.modules)
        raise SpecError(f"{shown}: each of its {stubs} PTX entries is an empty stub (code guarded for other archs): "
                        "nothing to rename")
    return out


def _keeps_ptx(path: str) -> bool:
    """A cubin built with -lineinfo or -G keeps its PTX where cuobjdump does not look (``--cubin`` reads it)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            return ELFFile(f).get_section_by_name(".nv_debug_ptx_txt") is not None
    except (ELFError, OSError, ValueError):
        return False


def _sass_text(ext: Extraction) -> str:
    if len(ext.libraries) == 1:
        return ", ".join(ext.libraries[0].sass_archs) or "no ELF images either"
    return "; ".join(f"{lib.member}: {', '.join(lib.sass_archs) or 'none'}" for lib in ext.libraries)
