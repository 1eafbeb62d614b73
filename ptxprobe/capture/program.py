"""``ptxprobe capture -- CMD ...``: every Triton and CuTe DSL kernel a Python program compiles, then the sweep.

The program runs as it is, with the frontends' own knobs set. Triton: ``TRITON_KERNEL_DUMP=1`` and
``TRITON_DUMP_DIR`` (every compiled stage is written out, PTX included) and
``TRITON_ALWAYS_COMPILE=1`` (kernels in Triton's cache are compiled again, so they are seen). CuTe
DSL: ``CUTE_DSL_KEEP=ptx`` and ``CUTE_DSL_DUMP_DIR`` (and, with ``--arch``, ``CUTE_DSL_ARCH``, so a
program that only calls ``cute.compile`` on fake tensors needs no GPU). Each distinct PTX it leaves,
with the metadata Triton wrote beside it (entry name, warps, stages, target), becomes a ``--ptx``
input of a static sweep. ``captured.json`` records the command, the program's sha256, the frontends'
versions and, for every kernel, where its PTX came from. The program runs on whatever machine this
is: launching kernels needs a GPU, compiling them (``triton.compile``, ``cute.compile``) does not. With
``--interpret`` a program that launches Triton kernels needs none either: its launches are recorded under Triton's
interpreter and compiled for ``--arch`` (``capture.interpret``, ``capture.replay``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ptxprobe.capture import cute_keep, interpret
from ptxprobe.capture.hooks import write_site
from ptxprobe.capture.replay import replay
from ptxprobe.core.cache import atomic_write, sha256_file, sha256_text
from ptxprobe.core.errors import MalformedPtx, SpecError, ToolFailed
from ptxprobe.core.proc import run_tool
from ptxprobe.core.store import package_version
from ptxprobe.ptx.text import entries_of, target_of

log = logging.getLogger("ptxprobe")
CAPTURED = "captured.json"
PROGRAM_LOG = "program.log"
CUTE_FRONTEND = "cute-dsl"  # the frontend of a kernel the CuTe DSL compiled (its host code loads it by its own name)


@dataclass(frozen=True)
class CapturedKernel:
    entry: str
    arch: str | None
    ptx: str  # path, relative to the capture directory
    ptx_sha256: str
    metadata: dict  # what Triton wrote beside the PTX (name, num_warps, num_stages, shared, target, ...)
    dumped_as: str  # Triton's own hash directory, or the CuTe DSL's dump file name
    frontend: str = "triton"  # or CUTE_FRONTEND


def capture_env(dump: Path, cache: Path, cute_dump: Path | None = None, arch: str | None = None) -> dict[str, str]:
    """The frontends' knobs: Triton dumps every stage, compiles even what is cached, keeps this run's metadata
    in its own cache; CuTe DSL keeps its PTX (for ``arch``, compiled without asking the GPU)."""
    env = {**os.environ, "TRITON_KERNEL_DUMP": "1", "TRITON_DUMP_DIR": str(dump), "TRITON_ALWAYS_COMPILE": "1",
           "TRITON_CACHE_DIR": str(cache)}
    if cute_dump is not None:
        env.update(cute_env(cute_dump, arch), **{cute_keep.ENV: "1"})  # each compile's PTX kept apart (cute_keep)
    elif arch:
        env["CUTE_DSL_ARCH"] = arch
    return env


def cute_env(dump: Path, arch: str | None = None) -> dict[str, str]:
    """The CuTe DSL's knobs for a run whose kernels ptxprobe must see (capture) or match (the swap hook): its PTX
    kept in ``dump``, compiled again rather than loaded from its file cache (which keeps no PTX) and, with ``arch``,
    its target pinned (no GPU asked)."""
    env = {"CUTE_DSL_KEEP": "ptx", "CUTE_DSL_DUMP_DIR": str(dump), "CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    if arch:
        env["CUTE_DSL_ARCH"] = arch
    return env


def run_program(argv: list[str], out: Path, timeout: float, arch: str | None = None, interpret: str | None = None,
                replace: bool = True) -> tuple[list[CapturedKernel], dict]:
    """Run ``argv`` with the dump knobs; collect the distinct PTX it compiled into ``out/ptx``. With ``interpret``
    (``record`` or ``execute``) its Triton launches are recorded under Triton's interpreter instead and compiled
    for ``arch`` (``capture.interpret``): no GPU is needed. Without ``replace``, a directory that holds a capture
    of other kernels is refused before its ``captured.json`` is written."""
    if not argv:
        raise SpecError("capture needs a command after --, e.g. ptxprobe capture -- python prog.py")
    if interpret and not arch:
        raise SpecError("capture --interpret compiles the launches it records for one target: give --arch, "
                        "e.g. --arch sm_90a")
    dump, cache, cute_dump = out / "triton-dump", out / "triton-cache", out / "cute-dump"
    for d in (dump, cache, cute_dump):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    started = time.time()
    env = capture_env(dump, cache, cute_dump, arch)
    hooks = ["ptxprobe.capture.cute_keep"]
    if interpret:
        env.update(interpret_env(out, interpret))
        hooks.append("ptxprobe.capture.interpret")
    env.update(site_env(out / "capture-site", tuple(hooks), env.get("PYTHONPATH")))
    run = run_tool(argv, timeout=timeout, env=env)
    atomic_write(out / PROGRAM_LOG, (run.stdout + run.stderr).encode())  # what it said, kept beside its kernels
    failed = None if run.ok else f"the captured program failed: {run.describe()}"
    not_compiled: list[dict] = []
    if interpret:
        kernels, not_compiled = interpreted(out, arch, timeout)
        if failed and kernels:  # what it launched before it failed is kept, and said
            log.warning("%s; the %d kernels it launched before are kept (under --interpret its kernels compute "
                        "nothing unless --interpret execute)", failed, len(kernels))
    elif failed:
        raise ToolFailed(failed)
    else:
        kernels = collect(dump, cache, out)
    if failed and not kernels:
        raise ToolFailed(failed)
    kernels += collect_cute(cute_dump, out)
    if not kernels:
        first = f": {not_compiled[0]['error']}" if not_compiled else ""
        raise ToolFailed(f"the program ran but compiled no Triton or CuTe DSL kernel (nothing in {dump} or "
                         f"{cute_dump}){first or '; does it compile or launch a kernel?'}")
    program = next((a for a in argv[1:] if a.endswith(".py") and Path(a).is_file()), None)
    record = {
        "command": argv,
        "program": program,
        "program_sha256": sha256_file(program) if program else None,
        "python": sys.version.split()[0],
        "triton": package_version("triton"),
        "cutlass_dsl": package_version("nvidia-cutlass-dsl"),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 2),
        "kernels": [asdict(k) for k in kernels],
    }
    if interpret:
        record.update(interpret=interpret, arch=arch, program_failed=failed, not_compiled=not_compiled)
    earlier = out / CAPTURED
    if not replace and earlier.exists():  # its sweep holds the earlier kernels: refused before anything is lost
        before = {k["ptx_sha256"] for k in json.loads(earlier.read_text()).get("kernels", [])}
        if before != {k.ptx_sha256 for k in kernels}:
            raise SpecError(f"{out} holds a capture of other kernels ({len(before)} then, {len(kernels)} now) and "
                            "its sweep: use another -o, or --fresh to replace them")
    atomic_write(earlier, json.dumps(record, indent=1).encode())
    return kernels, record


def interpret_env(out: Path, mode: str) -> dict[str, str]:
    """Triton's interpreter on, and the launch recorder told where to write (its hook: ``site_env``)."""
    log_path = out / "launches.jsonl"
    log_path.unlink(missing_ok=True)
    return {"TRITON_INTERPRET": "1", interpret.ENV: str(log_path),
            interpret.EXECUTE_ENV: "1" if mode == "execute" else "0"}


def site_env(folder: Path, hooks: tuple[str, ...], path: str | None) -> dict[str, str]:
    """The capture's hooks installed by a sitecustomize first on the program's path, ptxprobe importable there."""
    site = write_site(folder, hooks, "capture the program's kernels")
    root = str(Path(__file__).resolve().parents[2])
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(site), root, path or "") if p)}


def interpreted(out: Path, arch: str, timeout: float) -> tuple[list[CapturedKernel], list[dict]]:
    """The recorded launches compiled for ``arch`` (``capture.replay``): one kernel per distinct PTX, and the
    launches that could not be compiled, each with its reason."""
    log_path = out / "launches.jsonl"
    if not log_path.exists():
        return [], []
    seen: dict[str, CapturedKernel] = {}
    failed = []
    for r in replay(log_path, arch, out, timeout):
        launch = r.launch
        if r.ptx is None:
            failed.append({"function": launch.function, "via": launch.via, "error": r.error})
            continue
        if r.ptx_sha256 in seen:
            continue
        meta = {k: r.metadata[k] for k in ("name", "num_warps", "num_stages", "num_ctas", "shared", "specialization")
                if k in r.metadata}
        meta.update(function=launch.function, via=launch.via, launches=launch.launches, interpreted=True)
        seen[r.ptx_sha256] = CapturedKernel(r.entry, _target((out / r.ptx).read_text()), r.ptx, r.ptx_sha256, meta,
                                            f"{launch.name}@{r.ptx_sha256[:12]}")
    for f in failed:
        log.warning("not compiled: %s (%s): %s", f["function"], f["via"], f["error"])
    return list(seen.values()), failed


def collect(dump: Path, cache: Path, out: Path) -> list[CapturedKernel]:
    """Every distinct PTX under Triton's dump directory, copied to ``out/ptx/<entry>-<hash>.ptx``, with the
    metadata Triton wrote for it in its cache (the same hash directory)."""
    seen: dict[str, CapturedKernel] = {}
    meta_by_ptx = {}  # Triton's cache keys differ from its dump keys: match the two by the PTX's content
    for p in cache.rglob("*.ptx"):
        if p.with_suffix(".json").exists():
            meta_by_ptx[sha256_text(p.read_text())] = json.loads(p.with_suffix(".json").read_text())
    dest = out / "ptx"
    dest.mkdir(parents=True, exist_ok=True)
    for ptx_path, text, digest, names in _distinct_ptx(dump):
        meta = meta_by_ptx.get(digest, {})
        keep = {k: meta[k] for k in ("name", "num_warps", "num_stages", "num_ctas", "shared", "target", "hash")
                if k in meta}
        target = dest / f"{names[0]}-{digest[:12]}.ptx"
        target.write_text(text)
        seen[digest] = CapturedKernel(names[0], _target(text), str(target.relative_to(out)), digest, keep,
                                      ptx_path.parent.name)
    return list(seen.values())


def _distinct_ptx(dump: Path):
    """(path, text, sha256, entries) of every PTX under ``dump`` with entries, each content once, in path order."""
    seen: set[str] = set()
    for ptx_path in sorted(dump.rglob("*.ptx")):
        text = ptx_path.read_text()
        digest = sha256_text(text)
        names = entries_of(text)
        if digest in seen or not names:
            continue
        seen.add(digest)
        yield ptx_path, text, digest, names


def _target(text: str) -> str | None:
    try:
        return target_of(text)
    except MalformedPtx:  # a PTX without .target: swept as the experiment's archs say
        return None


def collect_cute(dump: Path, out: Path) -> list[CapturedKernel]:
    """Every distinct PTX the CuTe DSL kept (``CUTE_DSL_KEEP=ptx``), one record per entry it defines."""
    kernels = []
    dest = out / "ptx"
    dest.mkdir(parents=True, exist_ok=True)
    for ptx_path, text, digest, names in _distinct_ptx(dump):
        target = dest / f"cute-{_slug(names[0])}-{digest[:10]}.ptx"  # CuTe DSL's names run to hundreds of chars
        target.write_text(text)
        meta = {"dsl": "nvidia-cutlass-dsl", "dsl_version": package_version("nvidia-cutlass-dsl"),
                "function": ptx_path.name.split(".")[0][:200]}
        kernels.extend(CapturedKernel(name, _target(text), str(target.relative_to(out)), digest, meta,
                                      ptx_path.name[:200], CUTE_FRONTEND) for name in names)
    return kernels


def _slug(entry: str, limit: int = 48) -> str:
    """A readable part of a CuTe DSL symbol: the kernel's Python name between the DSL's prefix and the
    mangled arguments (``kernel_cutlass_kernel_<module><Class>_object_at_...``)."""
    core = re.sub(r"^kernel_cutlass_(kernel_)?", "", entry).split("_object_at_")[0]
    return re.sub(r"[^A-Za-z0-9_]", "", core)[:limit] or "kernel"
