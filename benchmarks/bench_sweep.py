"""Sweep throughput: is wall time close to ptxas time / cores (cold), and is a warm re-run cheap?

    python benchmarks/bench_sweep.py [-e experiments/default.toml] [-j N]

Cold: empty cache, so Triton emits every PTX and ptxas assembles every variant.
Warm: the same sweep into a new output directory with the filled cache.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from ptxprobe.cache import Cache
from ptxprobe.sweep import DEFAULT_EXPERIMENT, load_experiment, run_sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-e", "--experiment", default=str(DEFAULT_EXPERIMENT))
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    exp = load_experiment(args.experiment)
    with tempfile.TemporaryDirectory() as d:
        cache = Cache(Path(d) / "cache")
        t = time.perf_counter()
        cold = run_sweep(exp, Path(d) / "cold", jobs=args.jobs, cache=cache, progress=False)
        cold_wall = time.perf_counter() - t
        t = time.perf_counter()
        warm = run_sweep(exp, Path(d) / "warm", jobs=args.jobs, cache=cache, progress=False)
        warm_wall = time.perf_counter() - t
    ideal = cold.ptxas_seconds / args.jobs
    figures = {
        "experiment": exp.name,
        "jobs": args.jobs,
        "variants": cold.ran,
        "cold_wall_s": round(cold_wall, 2),
        "ptxas_cpu_s": round(cold.ptxas_seconds, 2),
        "ratio_wall_over_ptxas_per_core": round(cold_wall / ideal, 3),
        "warm_wall_s": round(warm_wall, 2),
        "warm_over_cold": round(warm_wall / cold_wall, 3),
        "warm_all_cached": all(r["cached"] for r in warm.rows),
    }
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
