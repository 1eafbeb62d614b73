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
from ptxprobe.api import AA_LABELS, RunDir, Sampled, clock_slope, paired_readings, stats

RUNS = ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro", "2026-12-04-h200-defaults",
        "2026-12-04-h200-defaults-repro", "2026-12-04-h200-defaults-sized-plants", "2026-12-05-h100-defaults",
        "2026-12-05-h100-defaults-signed-rank")
PLANTED = (0.0025, 0.005, 0.01)  # log-ratio change per 100 MHz
CLOCK_RELATED_R = 0.7  # a comparison whose runs' ratios follow their median clocks at least this closely
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
    aa, names, _ = _series(run)
    return aa, names


def _series(run: str) -> tuple[list, list, dict]:
    """``series`` and, per name comparison (group, label), its run's log ratio (the row's) and median clock."""
    by_group: dict[str, dict[str, dict]] = {}
    for row in RunDir(results_dir(run)).runtime_log:
        if row.get("block") == "names" and row.get("samples"):
            by_group.setdefault(row["group_id"], {})[row["label"]] = row
    aa, names, per = [], [], {}
    for group, rows in by_group.items():
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
            seen = [c for c in clocks if c is not None]
            if into is names and seen:
                per[(group, b)] = (float(np.log(rows[b]["ratio_vs_baseline"])), float(np.median(seen)),
                                   clock_slope(list(logs), clocks))
    return aa, names, per


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


def across_runs(runs=RUNS[:5]) -> dict:
    """Does a comparison's within-run clock slope predict how its ratio moves between runs? Per name comparison
    timed in four or more of these runs, its runs' log ratios against their median clocks (the across-run slope and
    correlation) beside the mean of its within-run slopes; counted where the runs' clocks explain the ratio
    (|r| >= 0.7): how often the two slopes agree in sign. (The five H200 defaults runs: one card, one design.)"""
    by: dict[tuple, list] = {}
    for run in runs:
        for key, v in _series(run)[2].items():
            by.setdefault(key, []).append(v)
    rows = []
    for key, v in by.items():
        y, c = np.array([x[0] for x in v]), np.array([x[1] for x in v])
        within = [x[2].per_100mhz for x in v if x[2] is not None]
        if len(v) < 4 or np.ptp(c) == 0 or np.ptp(y) == 0 or not within:
            continue
        rows.append({"group": key[0], "label": key[1], "runs": len(v), "r": float(np.corrcoef(y, c)[0, 1]),
                     "across_per_100mhz": float(np.polyfit(c / 100.0, y, 1)[0]),
                     "within_per_100mhz": float(np.mean(within))})
    strong = [r for r in rows if abs(r["r"]) >= CLOCK_RELATED_R]
    agree = [r for r in strong if np.sign(r["across_per_100mhz"]) == np.sign(r["within_per_100mhz"])]
    top = max(strong, key=lambda r: abs(r["r"]), default=None)
    return {"runs": list(runs), "comparisons": len(rows), "clock_related": len(strong), "sign_agrees": len(agree),
            "clock_related_r": CLOCK_RELATED_R, "strongest": top}


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
            "per_run": per_run, "across_runs": across_runs()}


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
