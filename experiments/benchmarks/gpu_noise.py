"""The GPU measurement's figures for a run directory, against its goals (analysis.gpu_runs.GOALS).

    python experiments/benchmarks/gpu_noise.py experiments/results/2026-12-02-h200-design [...]

Prints one JSON record per run: A/A 95 % half-width (median, max), A/A false-positive rate, the power at each
planted slowdown and its measured size, GPU seconds per 48 groups, and each goal met or not. The figures come
from the run's own calibration.json and groups.jsonl (nothing is re-measured).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from experiments.analysis.gpu_runs import goal_figures

KEYS = ("groups", "aa_halfwidth_median", "aa_halfwidth_max", "aa_false_positive_rate", "power", "planted_in_groups",
        "planted_measured_fraction_median", "gpu_seconds_per_48_groups", "goals_met")


def figures(run: Path) -> dict:
    got = goal_figures(run)
    return {"run": run.name, **{k: got.get(k) for k in KEYS}}


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["experiments/results/2026-12-02-h200-design"]:
        print(json.dumps(figures(Path(arg)), indent=1))
