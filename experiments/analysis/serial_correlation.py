"""Serial correlation in the committed name comparisons, and the interval that stays valid under it.

    python -m experiments.analysis.serial_correlation   # writes experiments/results/2026-12-05-cpu-serial-correlation

The A/A rounds the stopping rule was calibrated on are not serially correlated; some *name* comparisons are. This
reads every name comparison of the every-default H200 runs (per-round log ratios, as the tool paired them), states
their lag-1 autocorrelations and how many are significantly positive (one-sided 5 %, z = (r + 1/n) sqrt(n)), and
resamples them through the tool's own stopping (``timing.look_rounds``, ``stats.sequential_level``,
``timing.stop_reason``, the every-default plan), each series centred on its pseudo-median so the truth is known
(ratio 1), in three ways:

* ``blocks-5`` / ``blocks-10``: moving blocks of 5 or 10 rounds of the series, joined to the round cap;
* ``ar1-fit``: an AR(1) with the series' own lag-1 (bias-corrected, +(1 + 3r)/n) driven by its own centred
  residuals (the harshest: the correction lifts every series' lag-1, and the correlated pool was chosen for a high
  one).

Each over two pools: ``all`` name series and ``correlated`` ones (significant positive lag-1). Intervals compared:
the tool's (``signed-rank-hac``: the signed-rank interval widened by ``stats.serial.widening``), the signed-rank
interval alone (what the runs used), and a counterfactual widening with the textbook n^(1/3) bandwidth. Coverage
with its exact 95 % interval; 1 - coverage is also the A/A false-positive rate of that pool (the truth is 1).

It also replays the committed names blocks: at which look the tool's interval would have stopped on the rounds the
run recorded (the rounds a rerun would need, a lower bound where the recorded rounds did not suffice), against the
rounds the runs took: what the widening costs in GPU time.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from experiments.analysis import stopping_simulation as sim
from experiments.analysis.gpu_runs import name_series
from ptxprobe.api import look_rounds, serial, stats, stop_reason

OUT = sim.ROOT / "experiments" / "results" / "2026-12-05-cpu-serial-correlation"
RUNS = ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro", *sim.DEFAULT_RUNS)
RESAMPLINGS = ("blocks-5", "blocks-10", "ar1-fit")
POOLS = ("all", "correlated")
METHODS = (stats.SERIAL_SIGNED_RANK, "signed-rank", "signed-rank-hac-cbrt")
SIMS = 2000
SEED = 53
GOAL = 0.94  # the coverage goal on the autocorrelated name series
CODE = ["experiments/analysis/serial_correlation.py", "experiments/analysis/stopping_simulation.py",
        "ptxprobe/stats/paired.py", "ptxprobe/stats/serial.py", "ptxprobe/gpu/timing.py"]


def positively_correlated(x: np.ndarray) -> bool:
    """Lag-1 significantly above 0 (one-sided 5 %) under independence: z = (r + 1/n) sqrt(n) > 1.645."""
    return (serial.lag1(x) + 1.0 / x.size) * math.sqrt(x.size) > 1.645


def interval(x: np.ndarray, level: float, method: str) -> stats.Interval:
    if method != "signed-rank-hac-cbrt":
        return stats.paired_interval(x, level=level, method=method)
    est = float(stats.hodges_lehmann(x))  # the counterfactual: the same widening with n^(1/3) lags
    lo, hi = stats.signed_rank_bounds(x, level)
    w = serial.widening(x, level, lags=max(1, math.ceil(x.size ** (1 / 3) - 1e-9)))
    return stats.Interval(math.exp(est), math.exp(est - (est - lo) * w), math.exp(est + (hi - est) * w), level)


def resample(x: np.ndarray, how: str, cap: int, rng: np.random.Generator) -> np.ndarray:
    """One series of ``cap`` rounds like ``x`` (centred on its pseudo-median: the truth is a log ratio of 0)."""
    c = x - sim.pseudo_median(x)
    if how.startswith("blocks-"):
        size = min(int(how.split("-")[1]), c.size)
        starts = rng.integers(0, c.size - size + 1, math.ceil(cap / size))
        return np.concatenate([c[s:s + size] for s in starts])[:cap]
    r = serial.lag1(c)
    r = min(0.95, max(-0.9, r + (1 + 3 * r) / c.size))
    d = c - c.mean()
    e = d[1:] - r * d[:-1]
    e = rng.choice(e - e.mean(), 50 + cap)
    v, out = 0.0, np.empty(50 + cap)
    for i, ei in enumerate(e):
        v = r * v + ei
        out[i] = v
    return out[50:]  # about 0: the residuals are centred (the pseudo-median too where they are symmetric)


def run_cell(pool: list[np.ndarray], how: str, method: str, plan, sims: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    covered, rounds = 0, []
    for _ in range(sims):
        x = resample(pool[int(rng.integers(len(pool)))], how, plan.round_cap, rng)
        for done in look_rounds(plan):
            iv = interval(x[:done], stats.sequential_level(done, plan.min_rounds, plan.batch_rounds), method)
            if stop_reason(done, [stats.half_width(iv)], plan):
                break
        covered += iv.low <= 1.0 <= iv.high
        rounds.append(done)
    return {"resampling": how, "method": method, "seed": seed, "blocks": sims, "covered": covered,
            "coverage": covered / sims, "coverage_ci": sim.exact_interval(covered, sims),
            "mean_rounds": float(np.mean(rounds))}


def replayed_stops(runs: tuple[str, ...], plan) -> dict:
    """Per committed names block: the rounds it ran, and the look at which each interval would have stopped on the
    same recorded rounds (None where those rounds did not suffice: the run would have gone on)."""
    from experiments.analysis.gpu_runs import _names_blocks, compared_series

    out = []
    for run in runs:
        for group, rows in _names_blocks(sim.ROOT / "experiments" / "results" / run).items():
            base = next((r for r in rows.values() if r.get("is_baseline")), None)
            series = [stats.log_ratios(*compared_series(_reference(rows, base, r), r)) for r in rows.values()
                      if base is not None and r is not base and r.get("samples", {}).get("times_ms")]
            if not series:
                continue
            n = min(x.size for x in series)
            stops = {}
            for method in METHODS[:2]:
                stops[method] = next((d for d in look_rounds(plan) if d <= n and stop_reason(d, [
                    stats.half_width(interval(x[:d], stats.sequential_level(d, plan.min_rounds, plan.batch_rounds),
                                              method)) for x in series], plan)), None)
            out.append({"run": run, "group": group, "rounds_run": n, "stops": stops})
    return {"blocks": out}


def _reference(rows: dict, base: dict, row: dict) -> dict:
    """What the block compared ``row`` with: the baseline, or its partner (the A/A copies are paired together)."""
    partners = row["samples"].get("partners") or {}
    return base if not partners or base["label"] in partners else rows[next(iter(partners))]


def analyse(sims: int = SIMS, seed: int = SEED) -> dict:
    plan = sim.study_plan()
    series = name_series(RUNS)
    logs = [s["logs"] for s in series]
    pools = {"all": logs, "correlated": [x for x in logs if positively_correlated(x)]}
    lags = np.array([s["lag1"] for s in series])
    cells = [{"pool": p, **run_cell(pools[p], how, m, plan, sims, stats.stable_seed(seed, f"{p}/{how}/{m}"))}
             for p in POOLS for how in RESAMPLINGS for m in METHODS]
    return {"runs": list(RUNS), "plan": {"min_rounds": plan.min_rounds, "max_rounds": plan.max_rounds,
                                         "batch_rounds": plan.batch_rounds, "round_cap": plan.round_cap,
                                         "target_halfwidth": plan.target_halfwidth},
            "series": len(series), "lag1": {"median": float(np.median(lags)), "p90": float(np.percentile(lags, 90)),
                                            "max": float(lags.max()), "correlated": len(pools["correlated"]),
                                            "max_at": next(f"{s['run']}/{s['group']}/{s['label']}" for s in series
                                                           if s["lag1"] == lags.max())},
            "prespecified": {"sims_per_cell": sims, "seed": seed, "goal": GOAL, "methods": list(METHODS),
                             "resamplings": list(RESAMPLINGS)},
            "cells": cells, "replay": replayed_stops(RUNS, plan)}


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sims", type=int, default=SIMS)
    args = ap.parse_args()
    doc = analyse(args.sims)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serial.json").write_text(json.dumps(doc, indent=1) + "\n")
    sim.write_manifest(args.out, "coverage of the intervals on the committed name series resampled through the "
                       "stopping rule, and the replayed stops (serial.json)",
                       f"python -m experiments.analysis.serial_correlation --sims {args.sims}", list(RUNS), CODE)
    for c in doc["cells"]:
        lo, hi = c["coverage_ci"]
        print(f"{c['pool']:10s} {c['resampling']:9s} {c['method']:22s} coverage {c['coverage']:.3f} [{lo:.3f}, "
              f"{hi:.3f}] rounds {c['mean_rounds']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
