"""Sweep efficiency, measured as a user runs it: the CLI in a fresh process, cold cache then warm.

    python experiments/benchmarks/bench_sweep.py [-e default] [-j N] [--out DIR]

Cold: an empty cache (the median of five). Efficiency = wall / (process-tree CPU / cores), the CPU taken from
``resource.getrusage(RUSAGE_CHILDREN)`` (the CLI, its pool workers, every ptxas and nvcc):
1.0 means every core was busy the whole time. Warm: the same sweep into a new output
directory with everything cached, start-up imports included (the median of five; and once more with
Python's bytecode cache off, as on machines that set PYTHONDONTWRITEBYTECODE). Prints one JSON record; with
``--out`` also writes it to DIR/bench.json with the commit and host it was measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

COLD_RUNS = 5  # cold runs (this machine's CPU speed varies by a third from run to run); the median is the figure
WARM_RUNS = 5  # warm runs, each into a new output directory; the median is the figure


def timed_cli(argv: list[str], env: dict) -> tuple[float, float, int]:
    """(wall s, CPU s of the whole process tree, exit code) of one ptxprobe run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "ptxprobe.cli", *argv], env=env, stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-e", "--experiment", default="default")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", help="also write DIR/bench.json (a committed result)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        # as an installed package runs: Python's bytecode written once and read after (pip compiles it at install;
        # PYTHONDONTWRITEBYTECODE, set on some machines, makes every start compile ptxprobe's modules again)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=str(Path(d) / "pyc"))
        base = ["rename-sweep", "-e", args.experiment, "-j", str(args.jobs), "-q", "--no-run"]
        colds = [timed_cli([*base, "-o", str(Path(d) / f"cold{i}")], {**env, "PTXPROBE_CACHE": str(Path(d) / f"c{i}")})
                 for i in range(COLD_RUNS)]  # each with an empty cache of its own; the last one is warmed
        cold_wall, cold_cpu, rc_cold = (median([c[i] for c in colds]) for i in range(3))  # each figure's median
        env["PTXPROBE_CACHE"] = str(Path(d) / f"c{COLD_RUNS - 1}")
        warm = [timed_cli([*base, "-o", str(Path(d) / f"warm{i}")], env) for i in range(WARM_RUNS)]
        plain = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}  # the libraries' own bytecode only
        no_bytecode = timed_cli([*base, "-o", str(Path(d) / "warm-nobytecode")],
                                {**plain, "PYTHONDONTWRITEBYTECODE": "1"})
        warm_wall, warm_cpu, rc_warm = (median([w[i] for w in warm]) for i in range(3))
        rows = [json.loads(x) for x in (Path(d) / "warm0" / "results.jsonl").read_text().splitlines()]
    # the same verdicts with the fixed repeats the default experiment used before (3 runs, 5 on sm_100a/sm_120a)
    from ptxprobe.api import load_experiment, sources_of

    exp = load_experiment(args.experiment)
    old = {"default": 3, "sm_100a": 5, "sm_120a": 5}
    fixed = sum(len(exp.names) * len(exp.ptxas) * len(exp.flags) * old.get(a, old["default"])
                for src in sources_of(exp) for a in src.build_archs(exp.archs))
    figures = {
        "experiment": args.experiment,
        "jobs": args.jobs,
        "cores": os.cpu_count(),
        "variants": len(rows),
        "exit_codes": [rc_cold, rc_warm],
        "cold_wall_s": round(cold_wall, 2),
        "cold_cpu_s": round(cold_cpu, 2),
        "cold_wall_over_cpu_per_core": round(median([w / (c / args.jobs) for w, c, _ in colds]), 3),
        "cold_runs": [{"wall_s": round(w, 2), "cpu_s": round(c, 2),
                       "wall_over_cpu_per_core": round(w / (c / args.jobs), 3)} for w, c, _ in colds],
        "warm_wall_s": round(warm_wall, 2),
        "warm_cpu_s": round(warm_cpu, 2),
        "warm_wall_s_runs": [round(w[0], 2) for w in warm],
        "warm_wall_s_without_bytecode": round(no_bytecode[0], 2),
        "warm_over_cold": round(warm_wall / cold_wall, 4),
        "warm_all_cached": all(r["cached"] for r in rows),
        "fixed_repeat_variants": fixed,
        "adaptive_saving": round(1 - len(rows) / fixed, 3),
    }
    if args.out:
        import platform

        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        record = {**figures, "host": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                      "python": platform.python_version()},
                  "command": "python experiments/benchmarks/bench_sweep.py --out " + args.out, "git": commit}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "bench.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
