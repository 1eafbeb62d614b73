"""The clock-dependence flag (``stats.regime.clock_slope``) on the committed runs' own rounds and clocks.

Truth is known twice: an A/A pair (the baseline's cubin loaded twice, interleaved in one graph) has no clock
dependence, so every flag on an A/A series is a false alarm; and a slope planted on those same series (their log
ratios plus ``slope`` times their own recorded clock's deviation) must be found. The name comparisons of the same
runs are then flagged with the validated rule (truth unknown: what the runs show). Every series is read through
the package (``gpu.timing.Sampled``, ``paired_readings``, ``stats.paired.log_ratios``)::

    python -m experiments.analysis.clock_slope
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from experiments.analysis import stopping_simulation as sim
from experiments.analysis.static_runs import results_dir
from ptxprobe.gpu.calibrate import AA_LABELS
from ptxprobe.gpu.timing import Sampled, paired_readings
from ptxprobe.runs.rundir import RunDir
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import clock_slope

RUNS = ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro", "2026-12-04-h200-defaults",
        "2026-12-04-h200-defaults-repro", "2026-12-04-h200-defaults-sized-plants", "2026-12-05-h100-defaults",
        "2026-12-05-h100-defaults-signed-rank")
PLANTED = (0.0025, 0.005, 0.01)  # log-ratio change per 100 MHz
OUT = Path(__file__).resolve().parents[1] / "results" / "2026-12-05-cpu-clock-slope"
CODE = ["experiments/analysis/clock_slope.py", "ptxprobe/stats/regime.py", "ptxprobe/stats/serial.py",
        "ptxprobe/gpu/timing.py"]


def _sampled(row: dict) -> Sampled:
    s = row["samples"]
    return Sampled(row["label"], times_ms=s["times_ms"], sm_clock_mhz=s.get("sm_clock_mhz", []),
                   power_w=s.get("power_w", []), throttled=s.get("throttled", []),
                   partners=s.get("partners", {}), partner_index=s.get("partner_index", {}))


def series(run: str) -> tuple[list, list]:
    """(A/A series, name series) of one run: each (log ratios, per-round clock) of the rounds it paired."""
    by_group: dict[str, dict[str, dict]] = {}
    for row in RunDir(results_dir(run)).runtime_log:
        if row.get("block") == "names" and row.get("samples"):
            by_group.setdefault(row["group_id"], {})[row["label"]] = row
    aa, names = [], []
    for rows in by_group.values():
        pairs = [(AA_LABELS[0], AA_LABELS[1], aa)]
        base = next((label for label, r in rows.items() if r.get("is_baseline")), None)
        pairs += [(base, label, names) for label, r in rows.items()
                  if base and r.get("name_template") and not r.get("is_baseline")]
        for a, b, into in pairs:
            if a not in rows or b not in rows:
                continue
            sa, sb = _sampled(rows[a]), _sampled(rows[b])
            logs = stats.log_ratios(*sa.paired_with(sb))
            readings = paired_readings(sa, sb)
            if readings is None:
                continue
            clocks = [None if x.sm_clock_mhz is None or y.sm_clock_mhz is None
                      else (x.sm_clock_mhz + y.sm_clock_mhz) / 2 for x, y in zip(*readings, strict=True)]
            into.append((np.asarray(logs, dtype=float), clocks))
    return aa, names


def _rate(hits: int, n: int) -> dict:
    return {"rate": hits / n if n else None, "hits": hits, "of": n, "ci": sim.exact_interval(hits, n) if n else None}


def flagged(items, slope: float = 0.0) -> dict:
    """How often the flag is raised on these series with ``slope`` planted on their own clocks; the series with
    too few distinct clocks to regress on are counted apart."""
    hits = n = 0
    for logs, clocks in items:
        x = np.array([np.nan if c is None else c for c in clocks], dtype=float)
        planted = logs + slope * np.nan_to_num(x - np.nanmean(x)) / 100.0 if slope else logs
        s = clock_slope(list(planted), clocks)
        if s is None:
            continue
        n += 1
        hits += s.dependent
    return {**_rate(hits, n), "no_regression": len(items) - n}


def analyse(runs=RUNS) -> dict:
    per_run, all_aa, all_names = {}, [], []
    for run in runs:
        aa, names = series(run)
        all_aa += aa
        all_names += names
        per_run[run] = {"aa": flagged(aa), "names": flagged(names)}
    spread = [float(np.nanpercentile([c for c in clocks if c is not None], 90)
                    - np.nanpercentile([c for c in clocks if c is not None], 10))
              for _, clocks in all_aa if any(c is not None for c in clocks)]
    return {"what": "clock-dependence flags on committed A/A series (truth: none), with slopes planted on their own "
                    "clocks (truth: the slope), and on the same runs' name comparisons",
            "command": "python -m experiments.analysis.clock_slope", "runs": list(runs),
            "aa": flagged(all_aa), "names": flagged(all_names),
            "planted": {f"{s:g}": flagged(all_aa, s) for s in PLANTED},
            "aa_clock_range_mhz_median": float(np.median(spread)) if spread else None,
            "per_run": per_run}


def main() -> int:
    doc = analyse()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "clock_slope.json").write_text(json.dumps(doc, indent=1) + "\n")
    sim.write_manifest(OUT, doc["what"] + " (clock_slope.json)", doc["command"], list(RUNS), CODE)
    print(f"A/A flagged {doc['aa']['hits']}/{doc['aa']['of']}; names flagged {doc['names']['hits']}/"
          f"{doc['names']['of']}; planted " + ", ".join(f"{k}: {v['hits']}/{v['of']}" for k, v in
                                                        doc["planted"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
