"""``ptxprobe capture -- CMD ...``: every Triton kernel a Python program compiles, then the rename sweep.

The program runs as it is, with Triton's own knobs set: ``TRITON_KERNEL_DUMP=1`` and
``TRITON_DUMP_DIR`` (every compiled stage is written out, PTX included) and
``TRITON_ALWAYS_COMPILE=1`` (kernels in Triton's cache are compiled again, so they are seen). Each
distinct PTX it leaves, with the metadata Triton wrote beside it (entry name, warps, stages,
target), becomes a ``--ptx`` input of a static sweep. ``captured.json`` records the command, the
program's sha256 and, for every kernel, where its PTX came from. The program runs on whatever
machine this is: launching kernels needs a GPU, compiling them (``triton.compile``) does not.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .cache import atomic_write, sha256_file, sha256_text
from .errors import MalformedPtx, SpecError, ToolFailed
from .proc import run_tool
from .ptx import entries_of, target_of
from .store import package_version

CAPTURED = "captured.json"


@dataclass(frozen=True)
class CapturedKernel:
    entry: str
    arch: str | None
    ptx: str  # path, relative to the capture directory
    ptx_sha256: str
    metadata: dict  # what Triton wrote beside the PTX (name, num_warps, num_stages, shared, target, ...)
    dumped_as: str  # Triton's own hash directory


def capture_env(dump: Path, cache: Path) -> dict[str, str]:
    """Triton's knobs: dump every stage, compile even what is cached, keep this run's metadata in its own cache."""
    return {**os.environ, "TRITON_KERNEL_DUMP": "1", "TRITON_DUMP_DIR": str(dump), "TRITON_ALWAYS_COMPILE": "1",
            "TRITON_CACHE_DIR": str(cache)}


def run_program(argv: list[str], out: Path, timeout: float) -> tuple[list[CapturedKernel], dict]:
    """Run ``argv`` with the dump knobs; collect the distinct PTX it compiled into ``out/ptx``."""
    if not argv:
        raise SpecError("capture needs a command after --, e.g. ptxprobe capture -- python prog.py")
    dump, cache = out / "triton-dump", out / "triton-cache"
    for d in (dump, cache):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    started = time.time()
    run = run_tool(argv, timeout=timeout, env=capture_env(dump, cache))
    if not run.ok:
        raise ToolFailed(f"the captured program failed: {run.describe()}")
    kernels = collect(dump, cache, out)
    if not kernels:
        raise ToolFailed(f"the program ran but compiled no Triton kernel (nothing in {dump}); is it a Triton "
                         "program, and does it compile or launch a kernel?")
    program = next((a for a in argv[1:] if a.endswith(".py") and Path(a).is_file()), None)
    record = {
        "command": argv,
        "program": program,
        "program_sha256": sha256_file(program) if program else None,
        "python": sys.version.split()[0],
        "triton": package_version("triton"),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 2),
        "kernels": [asdict(k) for k in kernels],
    }
    atomic_write(out / CAPTURED, json.dumps(record, indent=1).encode())
    return kernels, record


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
    for ptx_path in sorted(dump.rglob("*.ptx")):
        text = ptx_path.read_text()
        digest = sha256_text(text)
        if digest in seen:
            continue
        names = entries_of(text)
        if not names:
            continue
        meta = meta_by_ptx.get(digest, {})
        keep = {k: meta[k] for k in ("name", "num_warps", "num_stages", "num_ctas", "shared", "target", "hash")
                if k in meta}
        target = dest / f"{names[0]}-{digest[:12]}.ptx"
        target.write_text(text)
        seen[digest] = CapturedKernel(names[0], _target(text), str(target.relative_to(out)), digest, keep,
                                      ptx_path.parent.name)
    return list(seen.values())


def _target(text: str) -> str | None:
    try:
        return target_of(text)
    except MalformedPtx:  # a PTX without .target: swept as the experiment's archs say
        return None
