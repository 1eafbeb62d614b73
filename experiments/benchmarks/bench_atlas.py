"""The atlas's cost against a bare ptxas loop: a sweep as the atlas runs it, then the same assemblies by ptxas alone.

    python experiments/benchmarks/bench_atlas.py --label xformers-sm_90a --out FILE -- \\
        rename-sweep --lib xformers-0.0.35-…whl -s archs=sm_90a -s ptxas=13.0.88

The command after ``--`` (any ``ptxprobe`` sweep: ``rename-sweep --lib``, ``--ptx`` files a capture kept, …) runs in a
fresh process with an empty cache of its own, as many ptxas at once as the machine has CPUs, and is timed. The bare
loop then runs ptxas on exactly what the sweep gave it: each distinct assembly of its rows (``assembly_key``), the
PTX text it assembled (found in the sweep's cold cache by its sha256, ``.version`` lowered as the sweep lowered it),
with the same ptxas binary (by sha256), flags and arch, as many at once, in the sweep's order. The texts are
prepared before the clock starts: the loop is what a user would run who had them already. The ratio of the two
wall times is the atlas's overhead (the goal: at most 1.3). Appends one record per call to FILE (a cell's label,
both times, the counts, the tool hashes); no PTX or cubin is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from ptxprobe.api import discover, ptxas_argv, toolchain

MAX_TEXT = 64 << 20  # no PTX module of the atlas is larger


def texts_by_sha(cache_dir: Path, wanted: set[str]) -> dict[str, str]:
    """The PTX texts the sweep assembled, by sha256, from its cache: a stage's record (the rename stages keep the
    renamed text as a string field) or a file of its own."""
    found: dict[str, str] = {}

    def offer(text: str) -> None:
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in wanted:
            found.setdefault(digest, text)

    for path in cache_dir.rglob("*"):
        if not path.is_file() or path.stat().st_size > MAX_TEXT or path.suffix == ".cubin":
            continue
        if path.suffix == ".json":
            record = json.loads(path.read_text())
            for value in record.values() if isinstance(record, dict) else ():
                if isinstance(value, str) and ".entry" in value:
                    offer(value)
        elif path.suffix == ".ptx":
            offer(path.read_text())
    return found


def bare_loop(jobs: list[list[str]], parallel: int) -> float:
    """Wall seconds of running each ptxas command line, ``parallel`` at a time, in order."""
    def one(argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, jobs))
    return time.perf_counter() - start


def bench(argv: list[str], label: str, jobs: int) -> dict:
    tools = {t.sha256: t for t in discover(("ptxas",)) if t.kind == "ptxas"}
    with tempfile.TemporaryDirectory(prefix="bench-atlas-") as d:
        cache, run = Path(d) / "cache", Path(d) / "run"
        cmd = [sys.executable, "-m", "ptxprobe", *argv, "-j", str(jobs), "-q", "--no-run", "-o", str(run)]
        start = time.perf_counter()
        done = subprocess.run(cmd, env={**os.environ, "PTXPROBE_CACHE": str(cache)}, capture_output=True, text=True)
        sweep_wall = time.perf_counter() - start
        if done.returncode not in (0, 1):
            raise SystemExit(f"ptxprobe {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
        rows = pd.read_parquet(run / "results.parquet")
        runs = rows[rows.status == "ok"].drop_duplicates("assembly_key").sort_values("run_at")
        texts = texts_by_sha(cache, set(runs.ptx_sha256))
        missing = set(runs.ptx_sha256) - set(texts)
        if missing:
            raise SystemExit(f"{len(missing)} assembled PTX texts not found in the sweep's cache")
        work = Path(d) / "bare"
        work.mkdir()
        lines = []
        for k, r in enumerate(runs.itertuples()):
            tool = tools[r.ptxas_sha256]
            src = work / f"{r.ptx_sha256}-{tool.version}.ptx"
            if not src.exists():
                src.write_text(toolchain.fit_ptx_version(texts[r.ptx_sha256], tool)[0])
            flags = tuple(f for f in str(r.ptxas_flags).split() if f)
            lines.append(ptxas_argv(tool, r.arch, flags, str(src), str(work / f"{k}.cubin")))
        bare_wall = bare_loop(lines, jobs)
        manifest = json.loads((run / "manifest.json").read_text())
    return {"label": label, "command": "ptxprobe " + " ".join(Path(a).name if os.sep in a else a for a in argv),
            "jobs": jobs, "exit_code": done.returncode, "variants": len(rows), "kernels": int(rows.kernel.nunique()),
            "assemblies": len(lines), "sweep_wall_s": round(sweep_wall, 2), "bare_ptxas_wall_s": round(bare_wall, 2),
            "ratio": round(sweep_wall / bare_wall, 3), "goal_ratio": 1.3,
            "ptxas": {t["version"]: t["sha256"] for t in manifest["tools"] if t["kind"] == "ptxas"},
            "inputs": manifest.get("inputs", manifest.get("sources")), "cpus": os.cpu_count(),
            "python": platform.python_version()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True, help="the cell's name in the record")
    ap.add_argument("--out", required=True, help="a JSON file the record is appended to (made if missing)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the ptxprobe sweep command")
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    record = bench(argv, args.label, args.jobs)
    out = Path(args.out)
    before = json.loads(out.read_text()) if out.exists() else {"what": __doc__.splitlines()[0], "cells": []}
    before["cells"] = [c for c in before["cells"] if c["label"] != record["label"]] + [record]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(before, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("label", "kernels", "assemblies", "sweep_wall_s", "bare_ptxas_wall_s",
                                             "ratio")}))


if __name__ == "__main__":
    main()
