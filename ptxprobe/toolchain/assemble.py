"""Run ptxas on PTX and keep everything it says: cubin, ``-v`` resource report, stderr, time.

A crash or hang of ptxas is an Artifact with that status (and its stderr), never an
exception, so one bad variant cannot take a sweep down. Cubins are cached by
(PTX, arch, flags, ptxas sha256, repeat index): a repeat index makes each of N repeated
assemblies its own real ptxas run, which is how nondeterminism is measured.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ptxprobe.core.cache import Cache, file_store, sha256_bytes, sha256_file, sha256_text
from ptxprobe.core.errors import SpecError, UnsupportedPtxVersion
from ptxprobe.core.proc import CRASHED, FAILED, OK, TIMEOUT, run_tool
from ptxprobe.core.stages import stage_key
from ptxprobe.toolchain.tools import Tool, fit_ptx_version, unsupported_flags

UNSUPPORTED = "unsupported_ptx"
UNSUPPORTED_OPTION = "unsupported_option"  # a flag this ptxas's --help does not list: not applicable, not failed
TRITON_FLAGS = ("-lineinfo",)  # what Triton passes besides -v and --gpu-name (with fp fusion on)


@dataclass(frozen=True)
class PtxasReport:
    """One function's ``ptxas -v`` resource usage."""

    registers: int | None = None
    barriers: int | None = None
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    smem_bytes: int | None = None
    cmem_bytes: dict = field(default_factory=dict)  # bank -> bytes


@dataclass(frozen=True)
class Artifact:
    """The outcome of one ptxas run."""

    status: str
    arch: str
    ptxas_version: str
    ptxas_sha256: str
    flags: tuple[str, ...]
    ptx_sha256: str
    cubin_sha256: str | None
    cubin_path: str | None
    reports: dict  # function name -> PtxasReport
    stderr: str
    seconds: float
    note: str | None = None
    cached: bool = False
    signal: str | None = None  # the signal that ended ptxas, if one did

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def retriable(self) -> bool:
        """A hang or a kill from outside (OOM killer, Ctrl-C) may be the machine's fault: try again later."""
        return self.status == TIMEOUT or self.signal in ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")

    @property
    def message(self) -> str:
        """Why it failed, never empty for a failure: ptxas's own words, or how it ended."""
        if self.ok:
            return ""
        how = {
            TIMEOUT: f"ptxas {self.ptxas_version} timed out after {self.seconds:.0f}s",
            CRASHED: f"ptxas {self.ptxas_version} crashed ({self.signal or 'signal'})",
            UNSUPPORTED: f"ptxas {self.ptxas_version} does not accept this PTX",
            UNSUPPORTED_OPTION: f"ptxas {self.ptxas_version} has no such option",
            FAILED: f"ptxas {self.ptxas_version} failed",
        }.get(self.status, f"ptxas {self.status}")
        text = self.stderr.strip()
        return f"{how}: {text[-2000:]}" if text else how

    def cubin(self) -> bytes:
        if not self.cubin_path:
            raise FileNotFoundError(f"no cubin: ptxas {self.status}")
        return Path(self.cubin_path).read_bytes()

    def to_json(self) -> dict:
        """What ptxas did, without what ptxprobe reads from it: the reports are parsed anew from its words."""
        d = asdict(self)
        del d["reports"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> Artifact:
        d = {k: v for k, v in d.items() if k != "reports"}  # a record written before reports were re-derived
        d["flags"] = tuple(d["flags"])
        return cls(**d, reports=parse_verbose(d["stderr"]))


_FUNC_RE = re.compile(r"(?:Compiling entry function|Function properties for|Compiling function)\s+'?([\w$.]+)'?")
_NUMS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_store_bytes": re.compile(r"(\d+) bytes spill stores"),
    "spill_load_bytes": re.compile(r"(\d+) bytes spill loads"),
    "smem_bytes": re.compile(r"(\d+) bytes smem"),
}
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[(\d+)\]")


def parse_verbose(text: str) -> dict[str, PtxasReport]:
    """Per-function resource usage from ``ptxas -v`` output (any ptxas version's wording)."""
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            current = m.group(1)
            blocks.setdefault(current, [])
            continue
        if current is not None:
            blocks[current].append(line)
    out = {}
    for name, lines in blocks.items():
        body = "\n".join(lines)
        vals = {k: int(m.group(1)) if (m := rx.search(body)) else None for k, rx in _NUMS.items()}
        cmem = {int(b): int(n) for n, b in _CMEM_RE.findall(body)}
        out[name] = PtxasReport(**vals, cmem_bytes=cmem)
    return out


def ptxas_argv(tool: Tool, arch: str, flags: tuple[str, ...], src: str, dst: str) -> list[str]:
    return [tool.path, *flags, "-v", f"--gpu-name={arch}", src, "-o", dst]


FILE_OPTIONS = ("--apply-controls", "-apply-controls")  # ptxas options whose value is a file it reads


def flag_files(flags: tuple[str, ...]) -> list[str]:
    """The files named by ``FILE_OPTIONS`` in a flag list (``--opt FILE`` or ``--opt=FILE``)."""
    out = []
    for k, f in enumerate(flags):
        name, eq, value = f.partition("=")
        if name in FILE_OPTIONS:
            out.append(value if eq else (flags[k + 1] if k + 1 < len(flags) else ""))
    return out


@functools.lru_cache(maxsize=256)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(path)


def flag_file_digests(flags: tuple[str, ...]) -> dict[str, str]:
    """sha256 of every file a flag list makes ptxas read: part of the assembly key, so an edited file re-assembles."""
    out = {}
    for path in flag_files(tuple(flags)):
        st = os.stat(path)
        out[path] = _digest(path, st.st_mtime_ns, st.st_size)
    return out


def resolve_flag_files(flags: tuple[str, ...]) -> tuple[str, ...]:
    """The same flags with every file option's path made absolute (ptxas runs in a scratch directory)."""
    out = list(flags)
    for k, f in enumerate(out):
        name, eq, value = f.partition("=")
        if name in FILE_OPTIONS:
            target = value if eq else (out[k + 1] if k + 1 < len(out) else "")
            if not target or not os.path.isfile(target):
                raise SpecError(f"flags: {name} needs an existing file, got {target or 'nothing'!r}")
            full = os.path.abspath(target)
            if eq:
                out[k] = f"{name}={full}"
            else:
                out[k + 1] = full
    return tuple(out)


def assembly_key(ptx_sha256: str, arch: str, ptxas_sha256: str, flags: tuple[str, ...], repeat: int) -> str:
    """The content key of one assembly: what ptxas reads (PTX, control files), which ptxas, the repeat index."""
    read = [f"{path}#sha256={d}" for path, d in flag_file_digests(tuple(flags)).items()]  # none: the key as before
    return stage_key("assemble", ptx=ptx_sha256, arch=arch, flags=[*flags, *read], ptxas=ptxas_sha256, repeat=repeat)


def _key(ptx: str, arch: str, tool: Tool, flags: tuple[str, ...], repeat: int) -> str:
    return assembly_key(sha256_text(ptx), arch, tool.sha256, tuple(flags), repeat)


def cached_artifact(
    ptx: str,
    arch: str,
    tool: Tool,
    flags: tuple[str, ...] = TRITON_FLAGS,
    *,
    repeat: int = 0,
    cache: Cache | None = None,
) -> Artifact | None:
    """The cached result of exactly this assembly, or None (cheap: no ptxas run)."""
    cache = cache or Cache()
    rec = cache.get_json("assemble", _key(ptx, arch, tool, tuple(flags), repeat))
    if rec is not None and (rec["cubin_path"] is None or Path(rec["cubin_path"]).exists()):
        return Artifact.from_json({**rec, "cached": True})
    return None


def assemble(
    ptx: str,
    arch: str,
    tool: Tool,
    flags: tuple[str, ...] = TRITON_FLAGS,
    *,
    repeat: int = 0,
    timeout: float = 600.0,
    cache: Cache | None = None,
) -> Artifact:
    """Assemble PTX with one ptxas; cached unless the cache is disabled."""
    cache = cache or Cache()
    flags = tuple(flags)
    hit = cached_artifact(ptx, arch, tool, flags, repeat=repeat, cache=cache)
    if hit is not None:
        return hit
    key = _key(ptx, arch, tool, flags, repeat)
    art = _run_ptxas(ptx, arch, tool, flags, timeout, cache, key)
    if not art.retriable:  # a timeout or an outside kill may be the machine's fault: try again next time
        cache.put_json("assemble", key, art.to_json())
    return art


def _run_ptxas(
    ptx: str, arch: str, tool: Tool, flags: tuple[str, ...], timeout: float, cache: Cache, key: str
) -> Artifact:
    note = None
    missing = unsupported_flags(tool, flags)
    if missing:
        why = f"{', '.join(missing)} not in ptxas {tool.version}'s --help"
        return _artifact(UNSUPPORTED_OPTION, arch, tool, flags, ptx, None, None, {}, why, 0.0, None)
    try:
        fitted, note = fit_ptx_version(ptx, tool, timeout=min(timeout, 60.0))
    except UnsupportedPtxVersion as exc:
        return _artifact(UNSUPPORTED, arch, tool, flags, ptx, None, None, {}, str(exc), 0.0, None)
    with tempfile.TemporaryDirectory(prefix="ptxprobe-") as d:
        src, dst = Path(d) / "kernel.ptx", Path(d) / "kernel.cubin"
        src.write_text(fitted)
        run = run_tool(ptxas_argv(tool, arch, flags, str(src), str(dst)), timeout=timeout, cwd=d)
        status = run.status
        log = (run.stderr + run.stdout).replace(str(src), "kernel.ptx")
        if status == FAILED and note and re.search(r"(requires|not supported on) .*\.version|PTX ISA", log):
            status = UNSUPPORTED
            log = f"{note}, but the PTX needs the newer ISA:\n{log}"
        if status != OK or not dst.exists():
            status = status if status != OK else FAILED
            art = _artifact(status, arch, tool, flags, ptx, None, None, parse_verbose(log), log, run.seconds, note)
            return replace(art, signal=run.signal_name)
        data = dst.read_bytes()
    digest = sha256_bytes(data)
    path = file_store(cache).put("cubin", digest, "kernel.cubin", data)  # a file even with the cache off
    return _artifact(OK, arch, tool, flags, ptx, digest, str(path), parse_verbose(log), log, run.seconds, note)


def _artifact(status, arch, tool, flags, ptx, digest, path, reports, log, seconds, note) -> Artifact:
    return Artifact(
        status,
        arch,
        tool.version,
        tool.sha256,
        tuple(flags),
        sha256_text(ptx),
        digest,
        path,
        reports,
        log,
        seconds,
        note,
    )
