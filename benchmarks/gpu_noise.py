"""The GPU measurement's figures for a run directory, against issue 15's goals.

    python benchmarks/gpu_noise.py experiments/results/2026-12-02-h200-design [...]

Prints one JSON record per run: A/A 95 % half-width (median, max), A/A false-positive rate, the power at each
planted slowdown and its measured size, GPU seconds per 48 groups, and each goal met or not. The figures come
from the run's own calibration.json and groups.jsonl (nothing is re-measured).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ptxprobe.gpu.calibrate import CRITERIA, summarize
from ptxprobe.store import read_log

# issue 15's goals beyond what a calibration itself requires (power and A/A false positives: CRITERIA)
GOALS = {"aa_halfwidth_median_max": 0.001, "aa_halfwidth_max_max": 0.0025, "gpu_seconds_per_48_groups_max": 180.0}


def figures(run: Path) -> dict:
    c = summarize(read_log(run / "groups.jsonl"))
    per48 = c["gpu_seconds"] / c["groups"] * 48
    got = {
        "run": run.name, "groups": c["groups"], "aa_halfwidth_median": c["aa_halfwidth_median"],
        "aa_halfwidth_max": c["aa_halfwidth_max"], "aa_false_positive_rate": c["aa_false_positive_rate"],
        "power": c["power"], "planted_in_groups": c.get("planted_in_groups"),
        "planted_measured_fraction_median": c["planted_measured_fraction_median"],
        "gpu_seconds_per_48_groups": round(per48, 1),
    }
    got["goals_met"] = {
        "aa_halfwidth_median": c["aa_halfwidth_median"] <= GOALS["aa_halfwidth_median_max"],
        "aa_halfwidth_max": c["aa_halfwidth_max"] <= GOALS["aa_halfwidth_max_max"],
        "power_0.5%": c["power"].get("0.005", 0) >= CRITERIA["power_min"]["0.005"],
        "power_1%": c["power"].get("0.01", 0) >= CRITERIA["power_min"]["0.01"],
        "aa_false_positives": c["aa_false_positive_rate"] <= CRITERIA["aa_false_positive_rate_max"],
        "gpu_seconds": per48 <= GOALS["gpu_seconds_per_48_groups_max"],
    }
    return got


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["experiments/results/2026-12-02-h200-design"]:
        print(json.dumps(figures(Path(arg)), indent=1))
