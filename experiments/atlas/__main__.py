"""The atlas of the name effect in the wild: its corpus counted, and the pilot that measures what a kernel costs.

    python -m experiments.atlas census [--library xformers --library vllm] [--downloads DIR] [--out FILE]
    python -m experiments.atlas pilot [--downloads DIR] [--out FILE]

``census``: each pinned wheel fetched (pip download, checked against its sha256 in corpus.toml), every shared library
that embeds PTX counted (experiments/atlas/census.py). ``pilot``: cold-cache rename sweeps of a few cells, as a
user runs them (``ptxprobe rename-sweep --lib WHEEL``, its own cache empty), timed: wall and ptxas seconds per
kernel per cell, what the whole atlas's CPU budget is computed from. Nothing fetched is committed; the records say
where it came from.
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
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.atlas.census import as_json, census  # noqa: E402
from ptxprobe.api import Cache, open_run  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.toml")
# the pilot's cells: (library, its entries to sweep, arch, ptxas release): one library whole, one family sampled
PILOT = (("xformers", None, "sm_90a", "13.0"), ("xformers", None, "sm_90a", "triton"),
         ("vllm", "*flash_fwd_sparse*", "sm_90a", "13.0"))


def corpus() -> dict[str, dict]:
    return tomllib.loads(CORPUS.read_text())["libraries"]


def fetched(name: str, downloads: Path) -> Path:
    """The pinned file of ``name``, downloaded once into ``downloads`` and checked against its sha256."""
    lib = corpus()[name]
    path = downloads / lib["file"]
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(downloads), lib["pip"]],
                       check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != lib["sha256"]:
        raise SystemExit(f"{path}: sha256 {digest}, corpus.toml pins {lib['sha256']}")
    return path


def run_census(names: list[str], downloads: Path) -> dict:
    out = {}
    for name in names:
        start = time.perf_counter()
        rows = census(fetched(name, downloads), Cache())
        out[name] = {**corpus()[name], "libraries": as_json(rows), "seconds": round(time.perf_counter() - start, 1)}
    return {"what": "the atlas corpus counted (python -m experiments.atlas census)", "libraries": out}


def run_pilot(downloads: Path) -> dict:
    cells = []
    for name, entries, arch, ptxas in PILOT:
        wheel = fetched(name, downloads)
        item = f"{wheel}:{entries}" if entries else str(wheel)
        with tempfile.TemporaryDirectory() as d:
            argv = ["ptxprobe", "rename-sweep", "--lib", item, "-s", f"archs={arch}", "-s", f"ptxas={ptxas}", "-q",
                    "--no-run", "-o", str(Path(d) / "run")]
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "ptxprobe", *argv[1:]], capture_output=True, text=True,
                                  env={**os.environ, "PTXPROBE_CACHE": str(Path(d) / "cache")})  # cold
            wall = time.perf_counter() - start
            if done.returncode not in (0, 1):
                raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
            rows = open_run(Path(d) / "run").static_rows()
        ok = [r for r in rows if r["status"] == "ok"]
        kernels = {r["kernel"] for r in ok}
        cells.append({"library": name, "entries": entries or "all", "arch": arch, "ptxas": ptxas,
                      "command": " ".join(argv[:3] + [Path(item).name] + argv[4:-2]),
                      "ptxas_version": ok[0]["ptxas_version"] if ok else None, "kernels": len(kernels),
                      "names": sorted({r["name_template"] for r in ok}), "assemblies": len(rows),
                      "failed": len(rows) - len(ok), "wall_seconds": round(wall, 1),
                      # one ptxas run assembles a module's entries together: each run counted once
                      "ptxas_seconds": round(sum({r["assembly_key"]: r["ptxas_seconds"] or 0 for r in ok}.values()), 1),
                      "ptxas_runs": len({r["assembly_key"] for r in rows}),
                      "wall_seconds_per_kernel": round(wall / max(1, len(kernels)), 2),
                      "changed": len({r["kernel"] for r in ok if not r["is_baseline"] and r["verdict"] == "differs"}),
                      "compared": len(kernels)})
    return {"what": "the atlas pilot: cold-cache sweeps of a few cells, timed (python -m experiments.atlas pilot)",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "cells": cells}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.atlas", description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("census", "pilot"))
    ap.add_argument("--library", action="append", help="census: these libraries (default: every one in corpus.toml)")
    ap.add_argument("--downloads", default=os.path.join(tempfile.gettempdir(), "ptxprobe-atlas"),
                    help="where fetched wheels are kept (default: %(default)s)")
    ap.add_argument("--out", help="write the record here as JSON (default: print it)")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.library or ()) - set(corpus()))
    if unknown:
        ap.error(f"--library {unknown[0]}: not in {CORPUS.name} (it pins {', '.join(corpus())})")
    downloads = Path(args.downloads)
    downloads.mkdir(parents=True, exist_ok=True)
    record = (run_census(args.library or list(corpus()), downloads) if args.step == "census"
              else run_pilot(downloads))
    record["command"] = " ".join(["python -m experiments.atlas", *(argv if argv is not None else sys.argv[1:])])
    text = json.dumps(record, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
