"""CUDA C++ to PTX through nvcc, one target at a time.

The cache key covers the source file and every header it includes (``nvcc -M`` lists
them), the flags and the nvcc binary's sha256, so an edited header re-compiles.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache, sha256_file
from ptxprobe.core.errors import KernelCompileError, MalformedPtx, SpecError, ToolFailed
from ptxprobe.core.proc import FAILED, run_tool
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.text import entries_of
from ptxprobe.sources.base import Emitted
from ptxprobe.sources.files import choose_entries
from ptxprobe.sources.launch import load_kernel_spec
from ptxprobe.toolchain.tools import arch_number, find_tool


def nvcc_arch(arch: str) -> str:
    """``compute_90a`` for sm_90a: the virtual arch nvcc needs to emit PTX for that target."""
    n = arch_number(arch)
    return f"compute_{n}{'a' if arch.endswith('a') else ''}"


_DIAGNOSTIC = re.compile(r"^[^\s(][^(]*\(\d+\): (?:catastrophic )?error\b"  # EDG: syn.cu(2): error: ...
                         r"|^At end of source: (?:catastrophic )?error\b"  # EDG: a brace never closed
                         r"|^[^:\s]+:\d+:\d+: (?:fatal )?error\b")  # the preprocessor: a.cu:1:2: error: #error ...


def nvcc_refused(run, src: Path, arch: str) -> Exception:
    """nvcc's verdict on a user's source: its first error lines (``syn.cu(2): error: expected a ";"``) as bad input,
    or, when it reports no error in the source (a crash, a hang, a broken install), a tool failure."""
    errors = [ln.strip() for ln in run.stderr.splitlines() if _DIAGNOSTIC.match(ln.strip())]
    if run.status == FAILED and errors:
        more = f" (and {len(errors) - 2} more errors)" if len(errors) > 2 else ""
        lines = [re.sub(r"^\S*/", "", e) for e in errors[:2]]  # the source's folder, not a header's
        return KernelCompileError(f"nvcc cannot compile {src.name} for {arch}: {'; '.join(lines)}{more}"
                                  f"{_include_hint(errors, src)}")
    return ToolFailed(f"nvcc could not compile {src.name} for {arch}: {run.describe()}")


_MISSING_HEADER = re.compile(r"error: ([^:]+): No such file or directory")


def _include_hint(errors: list[str], src: Path) -> str:
    """For a header nvcc cannot find: how to give its folder, and the folder where one of that name lies beside the
    source (searched a few levels down), if any."""
    missing = next((m.group(1).strip() for e in errors if (m := _MISSING_HEADER.search(e))), None)
    if missing is None:
        return ""
    near = next((h for depth in ("*", "*/*", "*/*/*") for h in sorted(src.parent.glob(f"{depth}/{missing}"))), None)
    folder = str(near.parents[len(Path(missing).parts) - 1].relative_to(src.parent)) if near else "DIR"
    return (f" (give the folder holding {missing}: `[nvcc] include_dirs = [\"{folder}\"]` in the kernel's spec, "
            f"relative to the spec, or `ptxprobe spec init … -I {folder}`)")


def _dependencies(nvcc: str, flags: list[str], src: Path, timeout: float) -> list[Path]:
    """The source and every header it includes, as nvcc's preprocessor sees them."""
    dep_flags = [f for f in flags if f.startswith(("-D", "-I", "-std"))]
    run = run_tool([nvcc, "-M", f"-arch={flags[1].split('=', 1)[1]}", *dep_flags, f"-I{src.parent}", str(src)],
                   timeout=timeout)
    if not run.ok:
        raise nvcc_refused(run, src, flags[1].split("=", 1)[1])
    text = run.stdout.replace("\\\n", " ")
    _, _, deps = text.partition(":")
    return sorted({Path(d) for d in deps.split() if d.strip()})


def _deps_key(src_sha: str, flags: list[str], nvcc_sha: str) -> str:
    return stage_key("cuda-deps", src=src_sha, flags=flags, nvcc=nvcc_sha)


def _current_sha(path: str) -> str | None:
    """A header's sha256 now, or None when it is gone: hashed once per process while its inode, size and
    change time stay the same (a sweep checks the same toolkit headers once per target)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return _sha_of_version(path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=4096)
def _sha_of_version(path: str, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    return sha256_file(path)


def _known_inputs(cache: Cache, src_sha: str, flags: list[str], nvcc_sha: str) -> dict | None:
    """The include set nvcc -M gave for this source before, if every file in it is unchanged since."""
    rec = cache.get_json("cuda-deps", _deps_key(src_sha, flags, nvcc_sha))
    if rec is None:
        return None
    for path, sha in rec.items():
        if _current_sha(path) != sha:
            return None
    return rec


def _included(src: Path, src_sha: str, flags: list[str], nvcc, cache: Cache, timeout: float) -> dict:
    """The source and every header it includes -> sha256 (nvcc -M, remembered while none of them changes)."""
    # with include folders a new header of the same name placed in an earlier folder changes what is included
    # without changing any header seen before: ask nvcc every time then
    searched = any(f.startswith("-I") for f in flags)
    inputs = None if searched else _known_inputs(cache, src_sha, flags, nvcc.sha256)
    if inputs is None:  # first sight of this source (or a header changed): ask nvcc what it includes
        deps = _dependencies(nvcc.path, flags, src, timeout)
        inputs = {str(p): sha256_file(p) for p in deps if p.is_file()}
        cache.put_json("cuda-deps", _deps_key(src_sha, flags, nvcc.sha256), inputs)
    return inputs


@dataclass(frozen=True)
class NvccOptions:
    """What a ``.cu`` file needs from its build beyond the file: include folders (absolute) and macro definitions,
    from its spec's ``[nvcc]`` table (``include_dirs`` relative to the spec, ``defines``)."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, defines: dict | None = None, include_dirs: tuple[str, ...] = ()) -> NvccOptions:
        """Macros in name order (booleans as 1/0), so equal options make equal flags and cache keys."""
        return cls(tuple(include_dirs), tuple(sorted((k, str(int(v) if isinstance(v, bool) else v))
                                                     for k, v in (defines or {}).items())))

    def flags(self) -> list[str]:
        return [*(f"-D{k}={v}" for k, v in self.defines), *(f"-I{d}" for d in self.include_dirs)]


_MACRO = re.compile(r"[A-Za-z_]\w*")


def nvcc_options(spec_path: str | Path | None) -> NvccOptions:
    """A spec's ``[nvcc]`` table, each key checked (the key, the value and what is expected, as bad input)."""
    if not spec_path:
        return NvccOptions()

    table = load_kernel_spec(spec_path).get("nvcc", {})
    where = f"{spec_path}: [nvcc]"
    if not isinstance(table, dict):
        raise SpecError(f"{where} = {table!r}: expected a table (include_dirs, defines)")
    unknown = set(table) - {"include_dirs", "defines"}
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)}; it may have include_dirs and defines")
    dirs = table.get("include_dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) and d for d in dirs):
        raise SpecError(f"{where} include_dirs = {dirs!r}: expected a list of folder paths (relative to the spec)")
    base = Path(spec_path).resolve().parent
    found = []
    for d in dirs:
        folder = (base / d).resolve()
        if not folder.is_dir():
            raise SpecError(f"{where} include_dirs: {d!r} is not a folder ({folder})")
        found.append(str(folder))
    defines = table.get("defines", {})
    if not isinstance(defines, dict):
        raise SpecError(f"{where} defines = {defines!r}: expected a table of macro = value")
    for k, v in defines.items():
        if not _MACRO.fullmatch(k) or isinstance(v, (dict, list)):
            raise SpecError(f"{where} defines: {k} = {v!r}: expected a macro name and a number, string or boolean")
    return NvccOptions.of(defines, tuple(found))


def _flags(arch: str, options: NvccOptions | None) -> list[str]:
    return [
        "-ptx",
        f"-arch={nvcc_arch(arch)}",
        "-std=c++17",
        "-O3",
        "-lineinfo",
        *(options or NvccOptions()).flags(),
    ]


def user_headers(source: str | Path, arch: str, cache: Cache, timeout: float = 600.0,
                 options: NvccOptions | None = None) -> list[Path]:
    """The headers a CUDA file includes that are the user's: every one outside the CUDA toolkit and the system's
    include folders (what a copy of the file needs beside it to compile the same elsewhere)."""
    src = Path(source)
    nvcc = find_tool("nvcc")
    toolkit = Path(nvcc.path).resolve().parent.parent
    system = (toolkit, *SYSTEM_INCLUDES)
    found = _included(src, sha256_file(src), _flags(arch, options), nvcc, cache, timeout)
    out = []
    for name in found:
        p = Path(name).resolve()
        if p != src.resolve() and not any(p.is_relative_to(d) for d in system):
            out.append(p)
    return sorted(out)


SYSTEM_INCLUDES = (Path("/usr/include"), Path("/usr/lib"), Path("/usr/lib64"), Path("/usr/local/include"))


def emit_cuda(
    source: str | Path,
    arch: str,
    entry: str | None = None,
    options: NvccOptions | None = None,
    kernel_key: str | None = None,
    cache: Cache | None = None,
    timeout: float = 600.0,
    only_cached: bool = False,
) -> Emitted | None:
    """nvcc -ptx for one target; ``entry`` picks the kernel (a source name or a symbol), ``"all"`` or None
    takes every kernel the file defines."""
    src = Path(source)
    if src.is_dir():
        raise SpecError(f"{src} is a directory, not a CUDA source file")
    if not src.is_file():
        raise SpecError(f"{src}: no such CUDA source file")
    cache = cache or Cache()
    nvcc = find_tool("nvcc")
    flags = _flags(arch, options)
    src_sha = sha256_file(src)
    inputs = _included(src, src_sha, flags, nvcc, cache, timeout)
    key = stage_key("emit-cuda", src=src_sha, deps=inputs, flags=flags, nvcc=nvcc.sha256)
    rec = cache.get_json("emit-cuda", key)
    if rec is None and only_cached:
        return None
    if rec is None:
        with tempfile.TemporaryDirectory(prefix="ptxprobe-nvcc-") as d:
            out = Path(d) / "k.ptx"
            run = run_tool([nvcc.path, *flags, f"-I{src.parent}", str(src), "-o", str(out)], timeout=timeout)
            if not run.ok:
                raise nvcc_refused(run, src, arch)
            ptx = out.read_text()
        rec = {"ptx": ptx, "metadata": {"nvcc": nvcc.version, "nvcc_flags": flags, "inputs": inputs}}
        cache.put_json("emit-cuda", key, rec)
    ptx = rec["ptx"]
    names = entries_of(ptx)
    if not names:
        raise MalformedPtx(f"{src.name}: nvcc produced no kernel (.entry) for {arch}: is there a __global__ function?")
    chosen = choose_entries(names, entry, src.name, what="kernel")
    label = kernel_key or (f"{src.name}:{chosen[0]}" if len(chosen) == 1 else src.name)
    return Emitted(label, arch, chosen[0], ptx, "cuda", rec["metadata"], {}, chosen)
