"""What "faster" means under the margin rule, on data where the truth is known.

    python -m experiments.analysis.margin_rule    # writes experiments/results/2026-12-05-cpu-margin-rule/verdicts.json

Blocks of paired rounds are simulated and run to their stop by the tool's own stopping code
(``stopping_simulation.simulate_block``: the every-default study's timing plan, its sequential level), with the
per-round noise the committed H200 A/A comparisons measured: their median SD ("typical"), their 90th percentile
("noisy") and the noisiest group's ("noisiest"). At true effects of 0, +0.3, +0.4, +0.45 and +1 % each block's final
interval is judged by today's rule (``stats.decide``, ``margin+bh``: faster only when the interval's low end is above
1 + margin) and by the rule before (``stats.decide_significant``, ``interval+bh``: faster whenever significant). The
rates come with exact 95 % intervals; ``tests/study/test_margin_rule.py`` checks the committed file against what the
issue asks (a true +0.3 % or +0.4 % called faster at most 2.5 % of the time, A/A significant at most 5 %, a true +1 %
faster at least 95 % of the time at typical noise) and that the rule before fails the first.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import numpy as np

from experiments.analysis import stopping_simulation as sim
from ptxprobe.api import stats

OUT = sim.ROOT / "experiments" / "results" / "2026-12-05-cpu-margin-rule" / "verdicts.json"
TRUE_RATIOS = (1.0, 1.003, 1.004, 1.0045, 1.01)
NOISE = {"typical": 50, "noisy": 90, "noisiest": 100}  # percentile of the committed A/A groups' per-round SD
SIMS = 4000
SEED = 41
RULES = {stats.VERDICT_RULE: stats.decide, stats.SIGNIFICANCE_RULE: stats.decide_significant}


def noise_levels(m: sim.Measured) -> dict[str, float]:
    sds = [float(x.std(ddof=1)) for x in m.pool]
    return {name: float(np.percentile(sds, q)) for name, q in NOISE.items()}


def run_cell(sd: float, true_ratio: float, plan, sims: int, seed: int) -> dict:
    """``sims`` blocks at one noise and one true ratio: each rule's verdict counts over their final intervals."""
    rng = np.random.default_rng(seed)
    counts = {rule: Counter() for rule in RULES}
    rounds = []
    for _ in range(sims):
        b = sim.simulate_block(sim.Scenario("margin", sd), true_ratio, plan, rng, int(rng.integers(1 << 31)))
        rounds.append(b["rounds"])
        (iv,) = b["intervals"]
        for rule, decide in RULES.items():
            counts[rule][decide(iv, plan.margin)] += 1
    out = {"true_ratio": true_ratio, "sd": sd, "seed": seed, "blocks": sims, "mean_rounds": float(np.mean(rounds))}
    for rule, c in counts.items():
        faster = c[stats.FASTER]
        significant = sum(c[v] for v in stats.SIGNIFICANT)
        out[rule] = {"counts": dict(sorted(c.items())), "faster_rate": faster / sims,
                     "faster_ci": sim.exact_interval(faster, sims), "significant_rate": significant / sims,
                     "significant_ci": sim.exact_interval(significant, sims)}
    return out


def simulate(sims: int = SIMS, seed: int = SEED) -> dict:
    m, plan = sim.measure(), sim.study_plan()
    levels = noise_levels(m)
    cells = [{"noise": name, **run_cell(sd, r, plan, sims, sim.cell_seed(seed, name, r))}
             for name, sd in levels.items() for r in TRUE_RATIOS]
    return {"question": "How often is a true effect called faster, under the margin rule and the rule before?",
            "command": "python -m experiments.analysis.margin_rule", "margin": plan.margin,
            "plan": {"min_rounds": plan.min_rounds, "max_rounds": plan.max_rounds, "interval": plan.interval},
            "noise": {name: {"percentile": NOISE[name], "round_sd": sd} for name, sd in levels.items()},
            "runs": list(sim.DEFAULT_RUNS), "prespecified": {"sims_per_cell": sims, "seed": seed,
                                                            "true_ratios": list(TRUE_RATIOS)},
            "cells": cells}


def main() -> int:
    doc = simulate()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    sim.write_manifest(OUT.parent, "verdict rates of the margin rule and the rule before on simulated blocks stopped "
                       "by the tool's own code", doc["command"], list(sim.DEFAULT_RUNS),
                       ["experiments/analysis/margin_rule.py", "experiments/analysis/stopping_simulation.py",
                        "ptxprobe/stats/paired.py", "ptxprobe/stats/serial.py"])
    for c in doc["cells"]:
        now, before = c[stats.VERDICT_RULE], c[stats.SIGNIFICANCE_RULE]
        print(f"{c['noise']:9s} {c['true_ratio']:.4f}  faster {now['faster_rate']:.4f} (rule before "
              f"{before['faster_rate']:.4f})  significant {now['significant_rate']:.4f}  rounds {c['mean_rounds']:.1f}")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
