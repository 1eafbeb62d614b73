"""Does dividing out the SM clock narrow the A/A interval? Recomputed from a committed run's raw samples.

    python benchmarks/aa_clock_normalised.py [RUN]   (default: 2026-12-02-h200-design)

For every group's two A/A copies, the per-round log ratio of their sample times, raw and with each sample's
time multiplied by the SM clock NVML read with it ("cycles"); the 95 % half-width of the Hodges-Lehmann
estimate of each (the same interval the verdicts use). Prints one JSON record: medians and maxima over groups,
and the groups where normalising helped.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from ptxprobe import analysis, stats
from ptxprobe.store import RUNTIME_LOG, read_log


def main() -> None:
    run = sys.argv[1] if len(sys.argv) > 1 else "2026-12-02-h200-design"
    by: dict[str, dict] = {}
    for r in read_log(analysis.results_dir(run) / RUNTIME_LOG):
        by.setdefault(r["group_id"], {})[r["label"]] = r
    out = []
    for gid, labels in sorted(by.items()):
        a, b = labels.get("{base}#AA1"), labels.get("{base}#AA2")
        if not a or not b:
            continue
        ta, tb = np.array(a["samples"]["times_ms"]), np.array(b["samples"]["times_ms"])
        ca, cb = (np.array(x["samples"]["sm_clock_mhz"], float) for x in (a, b))
        n = min(len(ta), len(tb))
        widths = []
        for logs in (np.log(tb[:n] / ta[:n]), np.log(tb[:n] * cb[:n] / (ta[:n] * ca[:n]))):
            widths.append(stats.half_width(stats.paired_interval(list(logs), level=0.95, n_boot=2000, seed=1)))
        out.append({"group": gid, "rounds": n, "raw": widths[0], "clock_normalised": widths[1]})
    raw = np.array([o["raw"] for o in out])
    norm = np.array([o["clock_normalised"] for o in out])
    print(json.dumps({"run": run, "groups": len(out),
                      "halfwidth_median": {"raw": float(np.median(raw)), "clock_normalised": float(np.median(norm))},
                      "halfwidth_max": {"raw": float(raw.max()), "clock_normalised": float(norm.max())},
                      "groups_narrower_when_normalised": int((norm < raw).sum())}, indent=1))


if __name__ == "__main__":
    main()
