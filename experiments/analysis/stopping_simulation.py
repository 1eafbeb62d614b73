"""The stopping rule validated by simulation across the scenarios the audit named.

    python experiments/analysis/stopping_simulation.py --out experiments/results/DATE-cpu-stopping-simulation

What is validated: a *prespecified level* (``stats.sequential_level``: 95 % widened by Bonferroni over the looks
taken, first at ``min_rounds`` then every ``batch_rounds``), not alpha spending and not an anytime-valid sequence.
The stopping decision reads half-widths only (``timing.stop_reason``), never the estimate, which is why the
looks cost little coverage; the simulation checks that it holds where the rounds are not the tidy normal sample
the signed-rank interval assumes.

Each simulated block is what the rule sees: per-round paired log ratios of each compared pair, judged at the
rounds ``timing.look_rounds`` gives, by the tool's own ``paired_interval`` at the tool's own level, stopped by
the tool's own ``stop_reason``, with the every-default study's plan (``experiments/h200_defaults.toml``). The
per-round SD is taken from the committed every-default runs (their A/A half-widths and rounds); scenarios:

* ``normal``: independent normal rounds (most blocks stop at the first look);
* ``several-looks``: the same, 2.5 times as noisy, so blocks stop anywhere from the first look to ``max_rounds``:
  where the looks' cost to coverage would show;
* ``heavy-tails``: Student t with 3 degrees of freedom, scaled to the same SD;
* ``contamination``: 5 % of rounds slowed in one arm by 10 SDs (a stray clock dip);
* ``drift``: the rounds' errors an AR(1) process with the lag-1 autocorrelation the committed runs' A/A rounds
  have (what a wandering clock leaves after interleaving); ``drift-stress`` the same with phi 0.5, far beyond
  what was measured, to show where the rule's independence assumption breaks;
* ``first-in-replay``: the label that runs first in a round is slower, by the largest penalty the committed runs
  measured (``gpu_runs.first_in_replay``), who runs first drawn by the tool's balanced ``random_pair_orders``;
* ``three-pairs``: three comparisons of one block share the baseline's round effect (correlation 0.5) and the
  block stops only when all three are narrow;
* ``overflow``: rounds 8 times as noisy, so blocks reach ``max_rounds`` above the ceiling and take the overflow
  rounds.

Per scenario and true ratio (1.0, the A/A case, and 0.995): coverage of the true ratio with its exact
(Clopper-Pearson) 95 % interval, the share of significant intervals at ratio 1 (false positives), mean rounds
and why blocks stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptxprobe.gpu.timing import TimingPlan, look_rounds, stop_reason  # noqa: E402
from ptxprobe.stats import paired as stats  # noqa: E402
from ptxprobe.stats.bounds import cp_lower, cp_upper  # noqa: E402

SCENARIOS = ("normal", "several-looks", "heavy-tails", "contamination", "drift", "drift-stress", "first-in-replay",
             "three-pairs", "overflow")
STRESS_PHI = 0.5
TRUE_RATIOS = (1.0, 0.995)
DEFAULT_RUNS = ("2026-12-04-h200-defaults", "2026-12-04-h200-defaults-repro", "2026-12-04-h200-defaults-sized-plants")


@dataclass(frozen=True)
class Scenario:
    name: str
    sd: float  # per-round SD of a log ratio
    pairs: int = 1
    shared: float = 0.0  # correlation of the pairs' errors (a shared baseline round effect)
    first_penalty: float = 0.0  # how much slower the label first in a round runs (log)
    phi: float = 0.0  # lag-1 autocorrelation of the rounds' errors


def study_plan() -> TimingPlan:
    """The every-default study's timing plan, as its experiment file states it."""
    from ptxprobe.gpu.plan import run_config
    from ptxprobe.static.experiment import load_experiment

    return run_config(load_experiment(str(ROOT / "experiments" / "h200_defaults.toml")).run).timing


def measured_round_sd(runs: tuple[str, ...] = DEFAULT_RUNS) -> float:
    """The median per-round SD of the A/A log ratios in the committed runs, from each group's half-width and
    rounds (half-width = z * sd / sqrt(rounds), z at the level the half-width was taken at)."""
    from statistics import NormalDist

    from ptxprobe.runs.rundir import RunDir

    sds = []
    for run in runs:
        for g in RunDir(ROOT / "experiments" / "results" / run).groups:
            aa = g["aa"]
            z = NormalDist().inv_cdf(0.5 + aa.get("ci_level", 0.95) / 2)
            sds.append(aa["half_width"] * math.sqrt(aa["rounds"]) / z)
    return float(np.median(sds))


def measured_lag1(runs: tuple[str, ...] = DEFAULT_RUNS) -> float:
    """The mean lag-1 autocorrelation of the A/A per-round log ratios over the committed runs' groups."""
    from experiments.analysis.gpu_runs import _names_blocks, compared_series
    from ptxprobe.gpu.calibrate import AA_LABELS

    rs = []
    for run in runs:
        for rows in _names_blocks(ROOT / "experiments" / "results" / run).values():
            if AA_LABELS[0] in rows and AA_LABELS[1] in rows:
                x = stats.log_ratios(*compared_series(rows[AA_LABELS[0]], rows[AA_LABELS[1]]))
                x = x - x.mean()
                rs.append(float(np.sum(x[1:] * x[:-1]) / np.sum(x * x)))
    return float(np.mean(rs))


def measured_first_penalty(runs: tuple[str, ...] = DEFAULT_RUNS) -> float:
    """The largest penalty of running first in a replay over the committed runs' groups (log units)."""
    from experiments.analysis.gpu_runs import first_in_replay

    return float(max(first_in_replay(ROOT / "experiments" / "results" / run).first_penalty.max() for run in runs))


def _errors(sc: Scenario, rounds: int, rng: np.random.Generator, seed: int) -> np.ndarray:
    """(pairs, rounds) errors of the per-round log ratios under the scenario."""
    shape = (sc.pairs, rounds)
    if sc.name == "heavy-tails":
        return rng.standard_t(3, shape) * sc.sd / math.sqrt(3.0)
    if sc.name == "contamination":
        e = rng.normal(0, sc.sd, shape)
        return e - 10 * sc.sd * (rng.random(shape) < 0.05)  # the other arm slowed: log(base / other) drops
    if sc.phi:
        phi, e = sc.phi, np.empty(shape)
        e[:, 0] = rng.normal(0, sc.sd, sc.pairs)
        for r in range(1, rounds):
            e[:, r] = phi * e[:, r - 1] + rng.normal(0, sc.sd * math.sqrt(1 - phi**2), sc.pairs)
        return e
    if sc.name == "first-in-replay":
        pair_names = [(f"base{p}", f"other{p}") for p in range(sc.pairs)]
        orders = stats.random_pair_orders(pair_names, rounds, seed=seed)
        base_first = np.array([[next(u for u in o if u[0].endswith(str(p)) or u[1].endswith(str(p)))[0]
                                .startswith("base") for o in orders] for p in range(sc.pairs)])
        # the label first in the replay is slower: base first raises log(base / other), else lowers it
        return rng.normal(0, sc.sd, shape) + np.where(base_first, sc.first_penalty, -sc.first_penalty)
    if sc.shared:
        common = rng.normal(0, sc.sd * math.sqrt(sc.shared), (1, rounds))
        return common + rng.normal(0, sc.sd * math.sqrt(1 - sc.shared), shape)
    return rng.normal(0, sc.sd, shape)


def simulate_block(sc: Scenario, true_ratio: float, plan: TimingPlan, rng: np.random.Generator, seed: int) -> dict:
    """One block run to its stop by the tool's rule: its rounds, why it stopped, and each pair's final interval."""
    cap = plan.round_cap
    logs = math.log(true_ratio) + _errors(sc, cap, rng, seed)  # log(base / other): other slower -> below 0
    for done in look_rounds(plan):
        level = stats.sequential_level(done, plan.min_rounds, plan.batch_rounds)
        ivs = [stats.paired_interval(x[:done], level=level, method=plan.interval) for x in logs]
        why = stop_reason(done, [stats.half_width(iv) for iv in ivs], plan)
        if why:
            return {"rounds": done, "why": why, "intervals": ivs}
    raise AssertionError("look_rounds ends at the cap, where stop_reason always stops")


def run_scenario(sc: Scenario, true_ratio: float, plan: TimingPlan, sims: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    covered = significant = total = 0
    rounds, why = [], Counter()
    for k in range(sims):
        b = simulate_block(sc, true_ratio, plan, rng, seed * 100_003 + k)
        rounds.append(b["rounds"])
        why[b["why"]] += 1
        for iv in b["intervals"]:
            total += 1
            covered += iv.low <= true_ratio <= iv.high
            significant += iv.low > 1.0 or iv.high < 1.0
    return {"scenario": sc.name, "true_ratio": true_ratio, "round_sd": sc.sd, "pairs": sc.pairs, "phi": sc.phi,
            "first_penalty": sc.first_penalty, "blocks": sims,
            "intervals": total, "covered": covered, "coverage": covered / total,
            "coverage_cp95": [cp_lower(covered, total), cp_upper(covered, total)],
            "significant": significant, "significant_rate": significant / total,
            "mean_rounds": float(np.mean(rounds)), "max_rounds_used": int(max(rounds)),
            "stopped_by": dict(sorted(why.items()))}


def scenarios(sd: float, first_penalty: float, phi: float) -> list[Scenario]:
    special = {"three-pairs": Scenario("three-pairs", sd, pairs=3, shared=0.5),
               "overflow": Scenario("overflow", 8 * sd),
               "several-looks": Scenario("several-looks", 2.5 * sd),
               "first-in-replay": Scenario("first-in-replay", sd, first_penalty=first_penalty),
               "drift": Scenario("drift", sd, phi=max(phi, 0.0)),
               "drift-stress": Scenario("drift-stress", sd, phi=STRESS_PHI)}
    return [special.get(name, Scenario(name, sd)) for name in SCENARIOS]


def simulate(sims: int, seed: int = 29, sd: float | None = None, first_penalty: float | None = None,
             phi: float | None = None, plan: TimingPlan | None = None) -> dict:
    """Every scenario at every true ratio; the figures the committed result holds."""
    plan = plan or study_plan()
    sd = measured_round_sd() if sd is None else sd
    first_penalty = measured_first_penalty() if first_penalty is None else first_penalty
    phi = measured_lag1() if phi is None else phi
    rows = [run_scenario(sc, r, plan, sims, seed + 7 * i + j)
            for i, sc in enumerate(scenarios(sd, first_penalty, phi)) for j, r in enumerate(TRUE_RATIOS)]
    return {"level": 0.95, "level_rule": "stats.sequential_level (Bonferroni over the looks taken)",
            "plan": {k: getattr(plan, k) for k in ("min_rounds", "batch_rounds", "max_rounds", "overflow_rounds",
                                                   "target_halfwidth", "ceiling_halfwidth", "interval")},
            "round_sd": sd, "first_penalty": first_penalty, "lag1": phi, "sims_per_cell": sims, "seed": seed,
            "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for simulation.json and manifest.json")
    ap.add_argument("--sims", type=int, default=400, help="blocks per scenario and true ratio")
    ap.add_argument("--seed", type=int, default=29)
    args = ap.parse_args()
    result = simulate(args.sims, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulation.json").write_text(json.dumps(result, indent=1) + "\n")
    import scipy

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    manifest = {"command": "python experiments/analysis/stopping_simulation.py --out " + args.out
                + f" --sims {args.sims} --seed {args.seed}", "git": commit, "python": platform.python_version(),
                "numpy": np.__version__, "scipy": scipy.__version__, "round_sd_from": list(DEFAULT_RUNS)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for r in result["rows"]:
        lo, hi = r["coverage_cp95"]
        print(f"{r['scenario']:16s} ratio {r['true_ratio']:.3f}  coverage {r['coverage']:.3f} [{lo:.3f}, {hi:.3f}]  "
              f"significant {r['significant_rate']:.3f}  rounds {r['mean_rounds']:.1f}  {r['stopped_by']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
