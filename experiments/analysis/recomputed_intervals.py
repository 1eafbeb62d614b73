"""Intervals recomputed from the raw rounds of committed GPU runs under rules other than the one each run used: the
superseded runs' verdicts at the look-adjusted level (``gpu_runs.resequenced``), A/A half-widths under every interval
method (``aa_halfwidth_by_interval``) and with the SM clock divided out (``aa_clock_normalised``).

Each is a few thousand BCa bootstraps: computed once here and committed, so FINDINGS reads the numbers instead of
redrawing them on every render (a test checks the code that made them is the code there is now, and recomputes one
run's A/A half-widths)::

    python -m experiments.analysis.recomputed_intervals
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from experiments.analysis import gpu_runs
from experiments.analysis import stopping_simulation as sim
from experiments.analysis.static_runs import results_dir

OUT = sim.ROOT / "experiments" / "results" / "2026-12-05-cpu-recomputed-intervals"
RESULT = "recomputed_intervals.json"
CODE = ["experiments/analysis/recomputed_intervals.py", "experiments/analysis/gpu_runs.py",
        "ptxprobe/stats/paired.py", "ptxprobe/stats/serial.py"]
# each table: the function that recomputes it from one run directory, and the runs FINDINGS reads it for
TABLES: dict[str, tuple[Callable[[Path], pd.DataFrame], tuple[str, ...]]] = {
    "resequenced": (gpu_runs.resequenced, ("2026-12-02-h200-design", "2026-12-02-h200-design-user",
                                           "2026-12-02-h200-design-pairs")),
    "aa_halfwidth_by_interval": (gpu_runs.aa_halfwidth_by_interval, (
        "2026-12-03-h200-interleaved-fast", "2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro")),
    "aa_clock_normalised": (gpu_runs.aa_clock_normalised, ("2026-12-02-h200-design",)),
}


def recompute(table: str, run: str) -> pd.DataFrame:
    """One table for one committed run, from its raw rounds."""
    return TABLES[table][0](results_dir(run))


def committed(table: str, run: str) -> pd.DataFrame:
    """One table for one run as committed (the columns and values ``recompute`` gives)."""
    doc = json.loads((OUT / RESULT).read_text())
    try:
        return pd.DataFrame(doc[table][run])
    except KeyError:
        raise KeyError(f"{table} of {run} is not in {OUT.name}: add it to TABLES and rerun "
                       "python -m experiments.analysis.recomputed_intervals") from None


def main() -> int:
    doc = {table: {run: recompute(table, run).to_dict(orient="records") for run in runs}
           for table, (_, runs) in TABLES.items()}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / RESULT).write_text(json.dumps(doc, indent=1) + "\n")
    inputs = sorted({run for _, runs in TABLES.values() for run in runs})
    sim.write_manifest(OUT, "intervals recomputed from committed runs' raw rounds under rules they did not use "
                       f"({RESULT}: table -> run -> rows)", "python -m experiments.analysis.recomputed_intervals",
                       inputs, CODE)
    print(", ".join(f"{t}: {sum(len(v) for v in doc[t].values())} rows" for t in doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
