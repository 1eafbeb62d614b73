"""The atlas of the name effect in the wild: its corpus counted, and the pilot that measures what a kernel costs.

    python -m experiments.atlas census [--library xformers --library vllm] [--downloads DIR] [--out FILE]
    python -m experiments.atlas pilot [--downloads DIR] [--out FILE]
    python -m experiments.atlas shipped [--library xformers] [--arch sm_90a] [--release triton,13.0] [--runs DIR]
                                        [--per-function N [--without FUNCTION]] [--ray-address ADDR] [--fresh]
                                        [--downloads DIR] [--out FILE]
    python -m experiments.atlas prune-check [--library xformers] [--per-module N] [--downloads DIR] [--out FILE]
    python -m experiments.atlas reduce [--library vllm] [--arch sm_90a] [--per-function N] [--timeout-each S]
                                       [--runs DIR] [--downloads DIR] [--out FILE]
    python -m experiments.atlas compare-captures GPU_CAPTURE_DIR INTERPRETED_CAPTURE_DIR [--out FILE]
    python -m experiments.atlas interpreted [--library liger-kernel] [--arch sm_90a] [--release triton,13.0]
                                             [--venv DIR] [--runs DIR] [--ray-address ADDR] [--fresh] [--downloads DIR]
                                             [--out FILE]
    python -m experiments.atlas speed SPEED_RUN_DIR... [--gpu "STATUS LINE"] [--out FILE]
    python -m experiments.atlas coverage [--library liger-kernel] [--downloads DIR] [--out FILE]
    python -m experiments.atlas inductor CAPTURE_DIR [--arch sm_90a] [--release triton,13.0] [--runs DIR] [--fresh]
                                         [--out FILE]

``census``: each pinned wheel fetched (pip download, checked against its sha256 in corpus.toml), every shared library
that embeds PTX counted (experiments/atlas/census.py). ``pilot``: cold-cache rename sweeps of a few cells, as a
user runs them (``ptxprobe rename-sweep --lib WHEEL``, its own cache empty), timed: wall and ptxas seconds per
kernel per cell, what the whole atlas's CPU budget is computed from. ``shipped``: each wheel's embedded PTX (or the
family its ``sample`` picks) rename-swept at each arch and release, the trigger added to or spelled out of each
entry (experiments/atlas/shipped.py). ``prune-check``: sampled entries of each wheel's modules assembled whole and
cut to themselves (what ``--lib LIB:ENTRY`` assembles), their code compared (experiments/atlas/prune_check.py).
``reduce``: of each cell's changed kernels (a wheel's shipped cell, a captured library's), one per source function
reduced with ``ptxprobe reduce`` (experiments/atlas/reduce_sample.py).
``interpreted``: the Triton libraries, each
library's driver captured on CPU tensors with ``ptxprobe capture --interpret`` (a CuTe DSL library's, compiled ahead
of time, with ``capture --arch``) for each arch and swept at each release (experiments/atlas/interpreted.py); with
``--out`` an existing record keeps the cells this run did not make. ``speed``: the run directories of the GPU's
speed sample (``experiments/gpu/h200_study.sh atlas-speed``: each op timed in its library's own call path by
``ptxprobe capture --run``) read into one record (experiments/atlas/speed.py). ``inductor``: Inductor's kernels
of real architectures, captured on a GPU machine (``h200_study.sh atlas-inductor``), swept here at each release
(experiments/atlas/compiled.py). ``coverage``: the functions each Python library's wheel decorates as kernels
(``@triton.jit``, ``@gluon.jit``, ``@cute.kernel``), what a cell's source functions are stated against
(experiments/atlas/coverage.py). Nothing fetched is committed; the
records say where it came from.
"""

from __future__ import annotations

import argparse
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
from experiments.atlas.compiled import compiled_cell  # noqa: E402
from experiments.atlas.coverage import coverage  # noqa: E402
from experiments.atlas.interpreted import capture_cell, compare_captures, environment, merged  # noqa: E402
from experiments.atlas.pins import fetch_pinned  # noqa: E402
from experiments.atlas.prune_check import check_library, summary  # noqa: E402
from experiments.atlas.reduce_sample import reduce_kernel, sampled  # noqa: E402
from experiments.atlas.shipped import cell_dir, shipped_cell  # noqa: E402
from experiments.atlas.speed import speed_record  # noqa: E402
from ptxprobe.api import Cache, open_run, triton_ptxas  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.toml")
# the pilot's cells: (library, its entries to sweep, arch, ptxas release): one library whole, one family sampled
PILOT = (("xformers", None, "sm_90a", "13.0"), ("xformers", None, "sm_90a", "triton"),
         ("vllm", "*flash_fwd_sparse*", "sm_90a", "13.0"))


def corpus(kind: str | None = None) -> dict[str, dict]:
    libraries = tomllib.loads(CORPUS.read_text())["libraries"]
    return {n: lib for n, lib in libraries.items() if kind is None or lib["kind"] == kind}


def fetched(name: str, downloads: Path) -> Path:
    """The pinned file of ``name``, downloaded once into ``downloads`` and checked against its sha256."""
    lib = corpus()[name]
    return fetch_pinned(lib["pip"], lib["file"], lib["sha256"], downloads)


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


def run_interpreted(names: list[str], archs: list[str], releases: list[str], venv: Path, runs: Path,
                    downloads: Path, ray_address: str | None = None, fresh: bool = False) -> dict:
    libraries = {n: corpus()[n] for n in names}
    python = environment(venv, libraries, downloads)
    executor = ["--executor", "ray", "--ray-address", ray_address] if ray_address else []
    cells = [capture_cell(python, name, lib, arch, releases, runs, executor, fresh)
             for name, lib in libraries.items() for arch in archs]
    return {"what": "the atlas's Triton libraries, captured on CPU under Triton's interpreter, and its CuTe DSL "
                    "libraries, compiled ahead of time for the arch, rename-swept "
                    "(python -m experiments.atlas interpreted)",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "libraries": {n: {k: v for k, v in lib.items() if k != "kind"} for n, lib in libraries.items()},
            "cells": cells}


def run_shipped(names: list[str], archs: list[str], releases: list[str], runs: Path, downloads: Path,
                ray_address: str | None = None, fresh: bool = False, per_function: int | None = None,
                without: tuple[str, ...] = ()) -> dict:
    libraries = {n: corpus()[n] for n in names}
    executor = ["--executor", "ray", "--ray-address", ray_address] if ray_address else []
    cells = [shipped_cell(fetched(name, downloads), name, lib, arch, releases, runs, executor, fresh, per_function,
                          without)
             for name, lib in libraries.items() for arch in archs]
    return {"what": "the atlas's wheels, their embedded PTX rename-swept as the driver's JIT assembles it "
                    "(python -m experiments.atlas shipped)",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "libraries": {n: {k: v for k, v in lib.items() if k != "kind"} for n, lib in libraries.items()},
            "cells": cells}


def run_prune_check(names: list[str], per_module: int, max_mb: float, downloads: Path) -> dict:
    libraries = {n: corpus()[n] for n in names}
    rows = [r for name in names for r in check_library(fetched(name, downloads), name, per_module,
                                                       int(max_mb * 1e6), 11, Cache())]
    return {"what": "sampled kernels of each wheel's PTX modules assembled whole and cut to themselves "
                    "(python -m experiments.atlas prune-check): the same code?",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "libraries": {n: {k: v for k, v in lib.items() if k != "kind"} for n, lib in libraries.items()},
            "per_module": per_module, "max_module_mb": max_mb, "seed": 11,
            "summary": {n: summary([r for r in rows if r["library"] == n]) for n in names}, "entries": rows}


def run_reduce(names: list[str], archs: list[str], releases: list[str], runs: Path, downloads: Path,
               per_function: int | None, without: tuple[str, ...], timeout: float) -> dict:
    """Each shipped cell's changed kernels, one per source function, reduced (experiments/atlas/reduce_sample.py);
    the cell's sweep made first where it is missing (read back where it is finished)."""
    libraries = {n: corpus()[n] for n in names}
    kernels = []
    for name, lib in libraries.items():
        wheel = fetched(name, downloads) if lib["kind"] == "wheel" else None
        for arch in archs:
            if wheel:  # a wheel's shipped cell, swept here where it is missing
                shipped_cell(wheel, name, lib, arch, releases, runs, (), False, per_function, without)
                swept, where = cell_dir(runs, name, arch, per_function, without), f"{arch}-per-function-{per_function}"
            else:  # a captured library's cell, made by the interpreted step
                swept, where = runs / name / arch / "sweep", arch
                if not (swept / "manifest.json").exists():
                    raise SystemExit(f"{swept}: no sweep; run python -m experiments.atlas interpreted --library {name} "
                                     f"--arch {arch} --runs {runs} first")
            for k in sampled(swept, triton_ptxas(arch).version):
                kernels.append({"library": name, "cell": where, **reduce_kernel(
                    wheel, k, arch, runs / "reduce" / name / where / k["function"], timeout)})
    return {"what": "one changed kernel per source function of each cell (the smallest) reduced with ptxprobe "
                    "reduce (--lib for a wheel's kernel, --ptx for a captured one), under the --keep predicate that "
                    "fits its change (python -m experiments.atlas reduce)",
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "libraries": {n: {k: v for k, v in lib.items() if k != "kind"} for n, lib in libraries.items()},
            "timeout_each": timeout, "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.atlas", description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("census", "pilot", "shipped", "interpreted", "compare-captures", "prune-check",
                                     "reduce", "speed", "inductor", "coverage"))
    ap.add_argument("dirs", nargs="*", help="compare-captures: a GPU capture's directory, then an interpreter's; "
                                            "speed: the speed sample's run directories; inductor: the GPU's capture")
    ap.add_argument("--gpu", help="speed: the card the sample ran on (its nvidia-smi line in status.txt)")
    ap.add_argument("--library", action="append",
                    help="census, shipped, interpreted: these libraries (default: every one of the step's kind in "
                         "corpus.toml)")
    ap.add_argument("--arch", action="append",
                    help="shipped, interpreted: archs to sweep for, repeated or comma-separated (default: sm_90a and "
                         "sm_80)")
    ap.add_argument("--release", default="triton,12.9.86,13.0.88,13.5.37",
                    help="shipped, interpreted: the ptxas releases to sweep (default: %(default)s)")
    ap.add_argument("--venv", default=os.path.join(tempfile.gettempdir(), "ptxprobe-atlas-venv"),
                    help="interpreted: the atlas's environment, made if missing (default: %(default)s)")
    ap.add_argument("--fresh", action="store_true",
                    help="shipped, interpreted: capture and sweep every cell again (default: a finished cell is read "
                         "back)")
    ap.add_argument("--ray-address",
                    help="shipped, interpreted: sweep on this Ray cluster (docs/ray.md); default: this machine")
    ap.add_argument("--runs", default=os.path.join(tempfile.gettempdir(), "ptxprobe-atlas-runs"),
                    help="shipped, interpreted: where the captures and sweeps go (default: %(default)s)")
    ap.add_argument("--downloads", default=os.path.join(tempfile.gettempdir(), "ptxprobe-atlas"),
                    help="where fetched wheels are kept (default: %(default)s)")
    ap.add_argument("--per-function", type=int,
                    help="shipped: a stratified sample, at most this many kernels of each source function (default: "
                         "the library's sample in corpus.toml, or every entry)")
    ap.add_argument("--without", action="append", default=[],
                    help="shipped, with --per-function: leave out this source function (its own identifier), "
                         "repeated")
    ap.add_argument("--per-module", type=int, default=2,
                    help="prune-check: entries sampled from each PTX module (default: %(default)s)")
    ap.add_argument("--max-module-mb", type=float, default=6.0,
                    help="prune-check: leave out modules with more PTX than this (default: %(default)s)")
    ap.add_argument("--timeout-each", type=float, default=1200.0,
                    help="reduce: seconds one reduction may take before the best found so far is kept (default: "
                         "%(default)s)")
    ap.add_argument("--out", help="write the record here as JSON (default: print it)")
    args = ap.parse_args(argv)
    kind = {"census": "wheel", "pilot": "wheel", "shipped": "wheel", "prune-check": "wheel", "reduce": None,
            "interpreted": "triton", "compare-captures": "triton", "speed": "triton",
            "inductor": None, "coverage": "triton"}[args.step]
    unknown = sorted(set(args.library or ()) - set(corpus(kind)))
    if unknown:
        ap.error(f"--library {unknown[0]}: not a {kind or 'known'} library in {CORPUS.name} (those are "
                 f"{', '.join(corpus(kind))})")
    downloads = Path(args.downloads)
    downloads.mkdir(parents=True, exist_ok=True)
    if args.step == "speed":
        names = {lib["driver"].removeprefix("drive_").removesuffix(".py"): n for n, lib in corpus("triton").items()}
        record = speed_record([Path(d) for d in args.dirs], names, {n: corpus()[n] for n in names.values()},
                              args.gpu)
    elif args.step == "inductor":
        if len(args.dirs) != 1:
            ap.error("inductor takes one directory: the GPU machine's capture (h200_study.sh atlas-inductor)")
        archs = [a for given in args.arch or ["sm_90a"] for a in given.split(",")]
        executor = ["--executor", "ray", "--ray-address", args.ray_address] if args.ray_address else []
        record = {"what": "Inductor's Triton kernels of real architectures (drivers/drive_inductor.py), captured on "
                          "a GPU machine, rename-swept here (python -m experiments.atlas inductor)",
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "python": platform.python_version()},
                  "cells": [compiled_cell(sys.executable, Path(args.dirs[0]), arch, args.release.split(","),
                                          Path(args.runs), executor, args.fresh) for arch in archs]}
        if args.out and Path(args.out).exists():
            record = merged(json.loads(Path(args.out).read_text()), {**record, "libraries": {}})
    elif args.step == "coverage":
        names = args.library or list(corpus("triton"))
        record = {"what": "the functions each Python library's wheel decorates as GPU kernels, read with ast "
                          "(python -m experiments.atlas coverage)",
                  "libraries": {n: {k: v for k, v in corpus()[n].items() if k in ("pip", "sha256")}
                                | coverage(fetched(n, downloads)) for n in names}}
    elif args.step == "census":
        record = run_census(args.library or list(corpus("wheel")), downloads)
    elif args.step == "compare-captures":
        if len(args.dirs) != 2:
            ap.error("compare-captures takes two capture directories: the GPU's, then the interpreter's")
        record = compare_captures(Path(args.dirs[0]), Path(args.dirs[1]))
    elif args.step == "pilot":
        record = run_pilot(downloads)
    elif args.step == "reduce":
        archs = [a for given in args.arch or ["sm_90a"] for a in given.split(",")]
        record = run_reduce(args.library or ["vllm"], archs, args.release.split(","), Path(args.runs), downloads,
                            args.per_function, tuple(args.without), args.timeout_each)
        if args.out and Path(args.out).exists():  # another library's or arch's reductions kept
            done = {(k["library"], k["arch"]) for k in record["kernels"]}
            before = json.loads(Path(args.out).read_text())
            record["kernels"] = [k for k in before["kernels"] if (k["library"], k["arch"]) not in done] + \
                record["kernels"]
            record["libraries"] = {**before["libraries"], **record["libraries"]}
            record["commands"] = list(dict.fromkeys([  # each command once, in the order first run
                *before.get("commands", [before["command"]] if "command" in before else []),
                " ".join(["python -m experiments.atlas", *(argv or sys.argv[1:])])]))
    elif args.step == "prune-check":
        record = run_prune_check(args.library or list(corpus("wheel")), args.per_module, args.max_module_mb,
                                 downloads)
    else:
        archs = [a for given in args.arch or ["sm_90a,sm_80"] for a in given.split(",")]
        run = run_shipped if args.step == "shipped" else run_interpreted
        where = (Path(args.runs), downloads) if args.step == "shipped" else (Path(args.venv), Path(args.runs),
                                                                              downloads)
        more = {"per_function": args.per_function, "without": tuple(args.without)} if args.step == "shipped" else {}
        record = run(args.library or list(corpus(kind)), archs, args.release.split(","), *where, args.ray_address,
                     args.fresh, **more)
        if args.out and Path(args.out).exists():
            record = merged(json.loads(Path(args.out).read_text()), record)
    record["command"] = " ".join(["python -m experiments.atlas", *(argv if argv is not None else sys.argv[1:])])
    text = json.dumps(record, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
