"""Does dividing out the SM clock narrow the A/A interval? Recomputed from a committed run's raw samples.

    python experiments/benchmarks/aa_clock_normalised.py [RUN]   (default: 2026-12-02-h200-design)

Per group, the A/A 95 % half-width of the raw sample times and of each time multiplied by the SM clock NVML
read with it (``experiments.analysis.gpu_runs.aa_clock_normalised``). Prints one JSON record.
"""

from __future__ import annotations

import json
import sys

from experiments.analysis import gpu_runs as analysis_gpu
from experiments.analysis import static_runs as analysis


def main() -> None:
    run = sys.argv[1] if len(sys.argv) > 1 else "2026-12-02-h200-design"
    t = analysis_gpu.aa_clock_normalised(analysis.results_dir(run))
    print(json.dumps({"run": run, "groups": len(t),
                      "halfwidth_median": {"raw": float(t.raw.median()),
                                           "clock_normalised": float(t.clock_normalised.median())},
                      "halfwidth_max": {"raw": float(t.raw.max()), "clock_normalised": float(t.clock_normalised.max())},
                      "groups_narrower_when_normalised": int((t.clock_normalised < t.raw).sum())}, indent=1))


if __name__ == "__main__":
    main()
