"""Runtime-statistics figures from a committed GPU run: A/A spread and the slowed-on-purpose control.

    python benchmarks/gpu_noise.py experiments/results/<date>-h200-runtime

Targets: A/A half-width <= 0.5 %; a variant ~2 % slower is reported slower at 95 %.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ptxprobe.store import read_log

if __name__ == "__main__":
    rows = read_log(Path(sys.argv[1]) / "runtime.jsonl")
    base = [r for r in rows if r["is_baseline"]]
    half = np.array([(r["aa_ci_high"] - r["aa_ci_low"]) / 2 for r in base])
    aa = [r for r in rows if r["label"].endswith("#AA")]
    slowed = [r for r in rows if r["label"].endswith("#slowed")]
    print(
        json.dumps(
            {
                "groups": len(base),
                "aa_halfwidth_median_pct": round(100 * float(np.median(half)), 3),
                "aa_halfwidth_p90_pct": round(100 * float(np.percentile(half, 90)), 3),
                "aa_verdicts": {
                    v: sum(r["runtime_verdict"] == v for r in aa) for v in ("faster", "slower", "no_difference")
                },
                "aa_verdicts_vs_floor": {
                    v: sum(r.get("runtime_verdict_vs_floor") == v for r in aa)
                    for v in ("faster", "slower", "no_difference")
                },
                "slowed_control": [
                    {
                        "kernel": r["kernel"],
                        "seq_len": r["seq_len"],
                        "ratio": round(r["ratio_vs_baseline"], 4),
                        "ci": [round(r["ratio_ci_low"], 4), round(r["ratio_ci_high"], 4)],
                        "verdict": r["runtime_verdict"],
                        "verdict_vs_floor": r.get("runtime_verdict_vs_floor"),
                    }
                    for r in slowed
                ],
            },
            indent=1,
        )
    )
