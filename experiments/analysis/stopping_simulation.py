"""The stopping rule validated by simulation across the scenarios the audit named.

    python experiments/analysis/stopping_simulation.py --out experiments/results/DATE-cpu-stopping-simulation

What is validated: a *prespecified level* (``stats.sequential_level``: 95 % with the miss rate divided by the
number of looks taken, first at ``min_rounds`` then every ``batch_rounds``). It is not alpha spending (a union
bound over looks at 5 %/k would add up to 5 % x (1 + 1/2 + ... + 1/k), 15 % for 11 looks) and not an anytime-valid
sequence: it holds because the stopping decision (``timing.stop_reason``) reads half-widths only, never the
estimate, and this simulation is the evidence that it does where the rounds are not the tidy independent,
symmetric sample the signed-rank interval assumes.

Each simulated block is what the rule sees: per-round paired log ratios of each compared pair, judged at the
rounds ``timing.look_rounds`` gives, by the tool's own ``paired_interval`` at the tool's own level, stopped by
the tool's own ``stop_reason``, with the every-default study's plan
(``experiments/definitions/h200_defaults.toml``); who runs first in a replay comes from the tool's own
``order_batches``. The per-round SD, the lag-1 autocorrelation, the first-in-replay penalty, the drift of one arm
and the pool of resampled rounds are read from the committed every-default runs. Scenarios:

* ``normal``: independent normal rounds (most blocks stop at the first look);
* ``several-looks``: the same, 2.5 times as noisy, so blocks stop anywhere from the first look to ``max_rounds``:
  where the looks' cost to coverage would show;
* ``heavy-tails``: Student t with 3 degrees of freedom, scaled to the same SD (the runs' rounds have an excess
  kurtosis near 2; t3 has none finite);
* ``contamination``: 5 % of rounds slowed in one arm by 10 SDs (a stray clock dip);
* ``drift-both``: the card's speed drifts under both arms (1.2 % faster in the first round, as measured on the
  H200 after warm-up, decaying, plus 1 % over the block), each pair's A B B A graph placed by the tool's orders;
* ``drift-one``: the other arm slows steadily, by the 90th percentile of the runs' A/A slopes; the truth is then
  the ratio averaged over the rounds the block ran;
* ``autocorrelated``: the rounds' errors an AR(1) process with the lag-1 autocorrelation of the runs' *name*
  comparisons at their 90th percentile (the A/A rounds have none to speak of; the name comparisons do);
  ``autocorrelated-stress`` the same at the largest lag-1 a committed name comparison shows;
* ``first-in-replay``: the label first in a replay runs slower by the largest penalty the runs measured
  (``gpu_runs.first_in_replay``), on top of the measured SD (which already holds the typical penalty);
* ``three-pairs``: three comparisons of one block share the round's clock (correlation 0.5), each stopped on its
  own half-width (``look_stops``; the block ends with the last);
* ``overflow``: rounds 6 times as noisy, so blocks pass ``max_rounds`` above the ceiling and stop inside the
  overflow rounds; ``overflow-cap``: 8 times, so most run to the cap;
* ``resampled-runs``: rounds drawn with replacement from one committed group's A/A log ratios (centred on their
  pseudo-median), the group drawn at random per block: the runs' own spreads, tails and skew.

Per scenario and true ratio (1.0, the A/A case, and 0.995): coverage of the true ratio with its exact two-sided
95 % (Clopper-Pearson) interval, the share of significant intervals (false positives at ratio 1) with its own,
mean rounds and why blocks stopped (``stop_reason``'s target / ceiling / cap, and how many took overflow rounds).
A scenario *undercovers* when the upper end of its coverage interval is below 95 %. Counterfactuals are run
beside them and claim nothing about the tool: the level left at 95 % at every look (``unadjusted-level``), a rule
that also stops as soon as an interval excludes 1 (``stops-on-significance``), and the scenarios that may fail
run for a fixed ``min_rounds`` rounds with one look (``fixed-rounds``), which says whether a shortfall comes from
the stopping or from the interval itself.

The interval is the tool's default (``signed-rank-hac``: the signed-rank interval widened for serial correlation,
``stats.serial``); the counterfactual ``independence-interval`` runs the autocorrelated scenarios with the signed-rank
interval alone, which the runs before used. FINDINGS.md's measurement section states what the committed result says
(which scenarios undercover is read from it, and the test pins it).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxprobe.api import (  # noqa: E402
    TimingPlan,
    cp_lower,
    cp_upper,
    look_rounds,
    look_stops,
    order_batches,
    stats,
    stop_reason,
)

LEVEL = 0.95
CI = 0.95  # the coverage and false-positive intervals: two-sided exact, each end one-sided at (1 + CI) / 2
SCENARIOS = ("normal", "several-looks", "heavy-tails", "contamination", "drift-both", "drift-one", "autocorrelated",
             "autocorrelated-stress", "first-in-replay", "three-pairs", "overflow", "overflow-cap", "resampled-runs")
COUNTERFACTUALS = ("unadjusted-level", "stops-on-significance", "fixed-rounds", "independence-interval")
AUTOCORRELATED = ("autocorrelated", "autocorrelated-stress")
FIXED_ROUNDS = ("contamination", "autocorrelated-stress")  # rerun without stopping: is a shortfall the rule's?
TRUE_RATIOS = (1.0, 0.995)
SIMS = 4000  # blocks per cell: a coverage of 95 % then has an exact 95 % interval about 94.3-95.6 %
SEED = 29
WARMUP = 0.012  # the first rounds' unit times ran 1.2 % faster (timing.TimingPlan.warmup_s's note, H200)
SLOW_DRIFT = 0.01  # and the card 1 % slower by the cap: a drift both arms share
DEFAULT_RUNS = ("2026-12-04-h200-defaults", "2026-12-04-h200-defaults-repro", "2026-12-04-h200-defaults-sized-plants")

LevelRule = Callable[[int, int, int], float]
StopRule = Callable[[int, list, TimingPlan], "str | None"]


@dataclass(frozen=True)
class Scenario:
    name: str
    sd: float  # per-round SD of a log ratio
    pairs: int = 1
    shared: float = 0.0  # correlation of the pairs' errors (the round's clock, shared)
    first_penalty: float = 0.0  # how much slower the label first in a replay runs (log)
    phi: float = 0.0  # lag-1 autocorrelation of the rounds' errors
    slope: float = 0.0  # per round, how much slower the other arm gets (log): drift of one arm


@dataclass(frozen=True)
class Measured:
    """What the committed every-default runs say about their rounds."""

    round_sd: float
    lag1: float
    name_lag1_p90: float  # the name comparisons' lag-1: 90th percentile and largest
    name_lag1_max: float
    first_penalty: float
    slope: float
    pool: tuple  # each group's centred A/A log ratios


def study_plan() -> TimingPlan:
    """The every-default study's timing plan, as its experiment file states it."""
    from ptxprobe.api import load_experiment, run_config

    return run_config(load_experiment(str(ROOT / "experiments" / "definitions" / "h200_defaults.toml")).run).timing


def _aa_series(runs: tuple[str, ...]) -> list[np.ndarray]:
    from experiments.analysis.gpu_runs import _names_blocks, compared_series
    from ptxprobe.api import AA_LABELS

    out = []
    for run in runs:
        for rows in _names_blocks(ROOT / "experiments" / "results" / run).values():
            if AA_LABELS[0] in rows and AA_LABELS[1] in rows:
                out.append(stats.log_ratios(*compared_series(rows[AA_LABELS[0]], rows[AA_LABELS[1]])))
    return out


def pseudo_median(x: np.ndarray) -> float:
    """The median of (X + Y) / 2 for X, Y drawn independently from x's values: the resampled rounds' truth."""
    return float(np.median((x[:, None] + x[None, :]) / 2.0))


def measure(runs: tuple[str, ...] = DEFAULT_RUNS) -> Measured:
    """The noise the scenarios use, from the committed runs' A/A comparisons: the median per-round SD, the mean
    lag-1 autocorrelation, the largest first-in-replay penalty, the 90th percentile of |slope| per round."""
    from experiments.analysis.gpu_runs import first_in_replay, name_series

    series = _aa_series(runs)
    names = [s["lag1"] for s in name_series(runs)]
    lag1 = []
    for x in series:
        c = x - x.mean()
        lag1.append(float(np.sum(c[1:] * c[:-1]) / np.sum(c * c)))
    slopes = [abs(float(np.polyfit(np.arange(x.size), x, 1)[0])) for x in series]
    penalty = max(float(first_in_replay(ROOT / "experiments" / "results" / run).first_penalty.max()) for run in runs)
    return Measured(round_sd=float(np.median([x.std(ddof=1) for x in series])), lag1=float(np.mean(lag1)),
                    name_lag1_p90=float(np.percentile(names, 90)), name_lag1_max=float(max(names)),
                    first_penalty=penalty, slope=float(np.percentile(slopes, 90)),
                    pool=tuple(x - pseudo_median(x) for x in series))


def scenarios(m: Measured) -> list[Scenario]:
    sd = m.round_sd
    special = {"several-looks": Scenario("several-looks", 2.5 * sd),
               "drift-one": Scenario("drift-one", sd, slope=m.slope),
               "autocorrelated": Scenario("autocorrelated", sd, phi=m.name_lag1_p90),
               "autocorrelated-stress": Scenario("autocorrelated-stress", sd, phi=m.name_lag1_max),
               "first-in-replay": Scenario("first-in-replay", sd, first_penalty=m.first_penalty),
               "three-pairs": Scenario("three-pairs", sd, pairs=3, shared=0.5),
               "overflow": Scenario("overflow", 6 * sd), "overflow-cap": Scenario("overflow-cap", 8 * sd)}
    return [special.get(name, Scenario(name, sd)) for name in SCENARIOS]


def _placed(sc: Scenario, cap: int, plan: TimingPlan, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pair and round, whether the baseline ran first in its replay and the pair's place in the round, as
    the tool's own orders (``timing.order_batches``) would run this block."""
    pairs = [(f"base{p}", f"other{p}") for p in range(sc.pairs)]
    index = {label: p for p, pair in enumerate(pairs) for label in pair}
    base_first, place = np.zeros((sc.pairs, cap), bool), np.zeros((sc.pairs, cap), int)
    orders = [o for batch in order_batches(plan, [], pairs, seed) for o in batch][:cap]
    for r, order in enumerate(orders):
        for pos, unit in enumerate(order):
            base_first[index[unit[0]], r], place[index[unit[0]], r] = unit[0].startswith("base"), pos
    return base_first, place


def _drift_both(sc: Scenario, cap: int, plan: TimingPlan, seed: int) -> np.ndarray:
    """(pairs, rounds) log ratios a drift of both arms leaves: each pair's graph runs A B B A (A the label the
    order puts first) in its place in the round, and each label's time is the mean over its two units."""
    base_first, place = _placed(sc, cap, plan, seed)
    per_round = 4 * sc.pairs
    # (pairs, rounds, 4) unit slots, each with its time factor
    t = (np.arange(cap) * per_round + 4 * place)[..., None] + np.arange(4)
    factor = np.exp(-WARMUP * np.exp(-t / per_round) + SLOW_DRIFT * t / (cap * per_round))
    first = np.log((factor[..., 0] + factor[..., 3]) / (factor[..., 1] + factor[..., 2]))
    return np.where(base_first, first, -first)


def _errors(sc: Scenario, cap: int, rng: np.random.Generator, plan: TimingPlan, seed: int,
            pool: tuple) -> np.ndarray:
    """(pairs, rounds) errors of the per-round log ratios log(base / other) under the scenario."""
    shape = (sc.pairs, cap)
    if sc.name == "resampled-runs":
        return rng.choice(pool[int(rng.integers(len(pool)))], size=shape)
    if sc.name == "heavy-tails":
        return rng.standard_t(3, shape) * sc.sd / math.sqrt(3.0)
    if sc.name == "contamination":
        return rng.normal(0, sc.sd, shape) - 10 * sc.sd * (rng.random(shape) < 0.05)  # the other arm slowed
    if sc.phi:
        e = np.empty(shape)
        e[:, 0] = rng.normal(0, sc.sd, sc.pairs)
        for r in range(1, cap):
            e[:, r] = sc.phi * e[:, r - 1] + rng.normal(0, sc.sd * math.sqrt(1 - sc.phi**2), sc.pairs)
        return e
    if sc.first_penalty:
        base_first = _placed(sc, cap, plan, seed)[0]
        return rng.normal(0, sc.sd, shape) + np.where(base_first, sc.first_penalty, -sc.first_penalty)
    if sc.name == "drift-both":
        return rng.normal(0, sc.sd, shape) + _drift_both(sc, cap, plan, seed)
    if sc.shared:
        common = rng.normal(0, sc.sd * math.sqrt(sc.shared), (1, cap))
        return common + rng.normal(0, sc.sd * math.sqrt(1 - sc.shared), shape)
    return rng.normal(0, sc.sd, shape)


def simulate_block(sc: Scenario, true_ratio: float, plan: TimingPlan, rng: np.random.Generator, seed: int,
                   pool: tuple = (), level_rule: LevelRule | None = None, stop_rule: StopRule | None = None) -> dict:
    """One block run to its stop by the tool's rule (``look_stops``: each comparison on its own half-width, or all
    together as the plan says): its rounds (the longest comparison's), why that one stopped, each pair's final
    interval and the true ratio over the rounds it ran (``level_rule`` / ``stop_rule`` replace the tool's for a
    counterfactual only; ``stop_rule`` judges one comparison's interval)."""
    cap = plan.round_cap
    trend = -sc.slope * np.arange(cap)  # the other arm slowing: log(base / other) falls
    logs = math.log(true_ratio) + trend + _errors(sc, cap, rng, plan, seed, pool)
    level_rule = level_rule or stats.sequential_level
    ivs: list = [None] * len(logs)
    rounds, why = [0] * len(logs), [""] * len(logs)
    timed = list(range(len(logs)))
    for done in look_rounds(plan):
        level = level_rule(done, plan.min_rounds, plan.batch_rounds)
        for i in timed:
            ivs[i] = stats.paired_interval(logs[i][:done], level=level, method=plan.interval)
        stops = ([stop_rule(done, [ivs[i]], plan) for i in timed] if stop_rule else
                 look_stops(done, [stats.half_width(ivs[i]) for i in timed], plan))
        for i, reason in zip(timed, stops, strict=True):
            if reason:
                rounds[i], why[i] = done, reason
        timed = [i for i in timed if not rounds[i]]
        if not timed:
            last = max(range(len(logs)), key=lambda i: rounds[i])
            truths = [math.exp(math.log(true_ratio) + float(trend[:n].mean())) for n in rounds]
            return {"rounds": rounds[last], "why": why[last], "intervals": ivs, "truths": truths,
                    "comparison_rounds": rounds}
    raise AssertionError("look_rounds ends at the cap, where stop_reason always stops")


def stops_on_significance(done: int, ivs: list, plan: TimingPlan) -> str | None:
    """The counterfactual rule: the tool's, plus a stop as soon as the interval excludes 1 (peeking)."""
    if done >= plan.min_rounds and any(iv.low > 1.0 or iv.high < 1.0 for iv in ivs):
        return "significant"
    return stop_reason(done, [stats.half_width(iv) for iv in ivs], plan)


def exact_interval(k: int, n: int, ci: float = CI) -> list[float]:
    """The two-sided exact (Clopper-Pearson) interval of a rate seen k times in n."""
    return [cp_lower(k, n, (1 + ci) / 2), cp_upper(k, n, (1 + ci) / 2)]


def run_scenario(sc: Scenario, true_ratio: float, plan: TimingPlan, sims: int, seed: int, pool: tuple = (),
                 level_rule: LevelRule | None = None, stop_rule: StopRule | None = None) -> dict:
    """``sims`` blocks of one scenario at one true ratio, counted."""
    rng = np.random.default_rng(seed)
    covered = significant = total = in_overflow = 0
    rounds, why, comparison_rounds = [], Counter(), []
    for _ in range(sims):
        b = simulate_block(sc, true_ratio, plan, rng, int(rng.integers(1 << 31)), pool, level_rule, stop_rule)
        rounds.append(b["rounds"])
        why[b["why"]] += 1
        in_overflow += b["rounds"] > plan.max_rounds
        comparison_rounds += b["comparison_rounds"]
        for iv, truth in zip(b["intervals"], b["truths"], strict=True):
            total += 1
            covered += iv.low <= truth <= iv.high
            significant += iv.low > 1.0 or iv.high < 1.0
    cover = exact_interval(covered, total)
    return {"scenario": sc.name, "true_ratio": true_ratio, "seed": seed, "round_sd": sc.sd, "pairs": sc.pairs,
            "phi": sc.phi, "first_penalty": sc.first_penalty, "slope": sc.slope, "blocks": sims,
            "intervals": total, "covered": covered, "coverage": covered / total, "coverage_ci": cover,
            "undercovers": cover[1] < LEVEL, "significant": significant, "significant_rate": significant / total,
            "significant_ci": exact_interval(significant, total), "mean_rounds": float(np.mean(rounds)),
            "mean_comparison_rounds": float(np.mean(comparison_rounds)),
            "max_rounds_used": int(max(rounds)), "stopped_by": dict(sorted(why.items())), "in_overflow": in_overflow}


def write_manifest(out: Path, what: str, command: str, inputs: list[str], code: list[str]) -> None:
    """A CPU analysis's manifest: what it is, how to rerun it, the committed runs it read and the sha256 of the code
    that produced it (a test compares them with the code now)."""
    import hashlib

    doc = {"what": what, "command": command, "inputs": [f"experiments/results/{r}" for r in inputs],
           "code_sha256": {c: hashlib.sha256((ROOT / c).read_bytes()).hexdigest() for c in code},
           "date": time.strftime("%Y-%m-%d"), "host": f"CPU, {__import__('os').cpu_count()} cores"}
    (out / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")


def cell_seed(seed: int, name: str, ratio: float) -> int:
    """Each cell's own seed, stable when scenarios are added or reordered."""
    return stats.stable_seed(seed, f"{name}/{ratio:g}")


def simulate(sims: int = SIMS, seed: int = SEED, measured: Measured | None = None,
             plan: TimingPlan | None = None, names: tuple[str, ...] = SCENARIOS) -> dict:
    """Every scenario at every true ratio, and the counterfactuals: the figures the committed result holds."""
    plan = plan or study_plan()
    m = measured or measure()
    rows = [run_scenario(sc, r, plan, sims, cell_seed(seed, sc.name, r), m.pool)
            for sc in scenarios(m) if sc.name in names for r in TRUE_RATIOS]
    looks = Scenario("several-looks", 2.5 * m.round_sd)
    counterfactual = [
        {**run_scenario(looks, r, plan, sims, cell_seed(seed, "several-looks", r), level_rule=lambda *_: LEVEL),
         "counterfactual": "unadjusted-level"} for r in TRUE_RATIOS]
    counterfactual.append({**run_scenario(looks, 1.0, plan, sims, cell_seed(seed, "several-looks", 1.0),
                                          stop_rule=stops_on_significance), "counterfactual": "stops-on-significance"})
    fixed = replace(plan, rounds=plan.min_rounds)  # one look, at 95 %: whatever fails here is the interval's
    counterfactual += [{**run_scenario(sc, r, fixed, sims, cell_seed(seed, sc.name, r), m.pool),
                        "counterfactual": "fixed-rounds"}
                       for sc in scenarios(m) if sc.name in FIXED_ROUNDS for r in TRUE_RATIOS]
    independence = replace(plan, interval="signed-rank")  # the interval before: independent rounds assumed
    counterfactual += [{**run_scenario(sc, r, independence, sims, cell_seed(seed, sc.name, r), m.pool),
                        "counterfactual": "independence-interval"}
                       for sc in scenarios(m) if sc.name in AUTOCORRELATED for r in TRUE_RATIOS]
    return {"level": LEVEL, "ci": CI,
            "guarantee": "a prespecified level (stats.sequential_level: the miss rate divided by the looks taken), "
                         "validated by this simulation; not alpha spending, not an anytime-valid sequence",
            "plan": {k: getattr(plan, k) for k in ("design", "min_rounds", "batch_rounds", "max_rounds",
                                                   "overflow_rounds", "target_halfwidth", "ceiling_halfwidth",
                                                   "interval", "stopping")},
            "measured": {"round_sd": m.round_sd, "lag1": m.lag1, "name_lag1_p90": m.name_lag1_p90,
                         "name_lag1_max": m.name_lag1_max, "first_penalty": m.first_penalty,
                         "slope": m.slope, "pool_groups": len(m.pool), "pool_rounds": int(sum(x.size for x in m.pool)),
                         "from": list(DEFAULT_RUNS)},
            "prespecified": {"sims_per_cell": sims, "seed": seed, "true_ratios": list(TRUE_RATIOS),
                             "warmup": WARMUP, "slow_drift": SLOW_DRIFT},
            "undercovers": [r["scenario"] for r in rows if r["undercovers"]],
            "rows": rows, "counterfactuals": counterfactual}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for simulation.json and manifest.json")
    ap.add_argument("--sims", type=int, default=SIMS, help="blocks per scenario and true ratio")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    t0 = time.time()
    result = simulate(args.sims, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulation.json").write_text(json.dumps(result, indent=1) + "\n")
    import scipy

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT).stdout.strip()

    mine = ["experiments/analysis/stopping_simulation.py", "experiments/analysis/serial_correlation.py",
            "ptxprobe/gpu/timing.py", "ptxprobe/stats/paired.py", "ptxprobe/stats/serial.py"]
    manifest = {"what": "the stopping rule's coverage simulated across the audit's scenarios (simulation.json)",
                "command": f"python3 experiments/analysis/stopping_simulation.py --out {args.out} --sims {args.sims} "
                           f"--seed {args.seed}",
                "git_commit": git("rev-parse", "HEAD"), "code_changed_since_commit": bool(git("status", "--porcelain",
                                                                                              "--", *mine)),
                "host": {"platform": platform.platform(), "cpus": __import__("os").cpu_count(),
                         "python": platform.python_version()},
                "numpy": np.__version__, "scipy": scipy.__version__, "wall_s": round(time.time() - t0, 1),
                "parameters": result["prespecified"], "measured_from": list(DEFAULT_RUNS)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for r in result["rows"] + result["counterfactuals"]:
        lo, hi = r["coverage_ci"]
        print(f"{r.get('counterfactual', r['scenario']):22s} {r['true_ratio']:.3f}  coverage {r['coverage']:.4f} "
              f"[{lo:.4f}, {hi:.4f}]{' UNDERCOVERS' if r['undercovers'] else ''}  significant "
              f"{r['significant_rate']:.4f}  rounds {r['mean_rounds']:.1f}  {r['stopped_by']} overflow "
              f"{r['in_overflow']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
