"""What tune recommends when the race chooses and a proof on fresh rounds decides, on data where the truth is known.

    python -m experiments.analysis.tune_proof   # writes experiments/results/2026-12-05-cpu-tune-proof/proof.json

Fields of candidates with known true ratios against the user's configuration are raced by the tool's own code
(``tune.race.race`` with the default ``RacePlan``, BH over every candidate raced), the choice made as tune makes it
(``tune.answer.chosen``) and proven on fresh rounds (``tune.proof.proved``); the recommendation is what
``tune.answer.kernel_answer`` would record. Per-round log ratios are independent normal draws at the committed H200
A/A noise (the median group's per-round SD, "typical", and the noisiest group's, as ``margin_rule`` reads them).
Per cell: how often a change is recommended (and the right one), the proof interval's coverage of the chosen
candidate's truth, and, as the counterfactual the proof replaces, how often the race alone would have recommended
and how its winner's interval covered and its gain was biased (the winner's curse). Rates with exact 95 %
intervals; ``tests/study/test_tune_proof.py`` checks the committed file against the issue's goals.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from experiments.analysis import margin_rule
from experiments.analysis import stopping_simulation as sim
from ptxprobe.api import CONFIRMED, Candidate, RacePlan, chosen, proved
from ptxprobe.api import race_candidates as race

OUT = sim.ROOT / "experiments" / "results" / "2026-12-05-cpu-tune-proof"
FIELDS = {  # label -> true ratio (candidate faster when > 1); the user's configuration is 1
    "equals": dict.fromkeys("abcdef", 1.0),
    "one-faster": {"a": 1.01, **dict.fromkeys("bcdef", 1.0)},
    "field-0.45": dict.fromkeys("abcdef", 1.0045),
    "field-0.3": dict.fromkeys("abcdef", 1.003),
    "field-0.6": dict.fromkeys("abcdef", 1.006),  # just beyond the margin: the winner's curse lifts the race's gain
    "field-1": dict.fromkeys("abcdef", 1.01),
    "mixed": {"a": 1.012, "b": 1.008, "c": 1.002, "d": 0.996, "e": 0.97, "f": 0.99, "g": 1.0},
}
NOISE = ("typical", "noisiest")
SIMS = 1000
SEED = 67
GOALS = {"recommended_max": {"equals": 0.05, "field-0.45": 0.05, "field-0.3": 0.05},
         "right_min": {"one-faster": 0.90}, "proof_coverage_min": 0.94}
CODE = ["experiments/analysis/tune_proof.py", "ptxprobe/tune/proof.py", "ptxprobe/tune/race.py",
        "ptxprobe/tune/answer.py", "ptxprobe/stats/paired.py", "ptxprobe/stats/serial.py"]


def _candidates(field: dict[str, float]) -> tuple[Candidate, dict[str, Candidate]]:
    """The user's configuration and one candidate per label, each a rename (one change: ``chosen``'s tie-break
    is then the estimate)."""
    def cand(label: str, is_user: bool = False) -> Candidate:
        return Candidate("k", "sm_90a", "{base}" if is_user else f"{label}_{{base}}", "k" if is_user else
                         f"{label}_k", "12.8.93", "ptxas", (), label * 64, "ok", None, 100, is_user)

    return cand("user", True), {label: cand(label) for label in field}


def one_tune(field: dict[str, float], sd: float, rng: np.random.Generator, plan: RacePlan) -> dict:
    """One kernel's race and proof on simulated rounds: what was chosen, proven and recommended."""
    spent = [0]
    user, by_field = _candidates(field)
    truth = {c.label: field[x] for x, c in by_field.items()}  # the race sees tune's labels
    name = {c.label: x for x, c in by_field.items()}

    def measure(labels, rounds):
        spent[0] += rounds * len(labels)
        return {x: list(math.log(truth[x]) + rng.normal(0.0, sd, rounds)) for x in labels}

    res = race(list(truth), measure, plan)
    choice = chosen(res, {c.label: c for c in by_field.values()}, user, plan.prefer)
    raced = spent[0]
    proof, _ = proved(choice, res, plan, measure)
    out = {"race_choice": None, "recommended": None, "race_rounds": raced, "proof_rounds": spent[0] - raced}
    if choice is not None:
        t = truth[choice.label]
        out.update(race_choice=name[choice.label], race_covers=choice.low <= t <= choice.high,
                   race_error=math.log(choice.ratio / t))
        if proof is not None:
            out.update(proof_covers=proof.low <= t <= proof.high, proof_error=math.log(proof.ratio / t),
                       proof_verdict=proof.verdict,
                       recommended=name[choice.label] if proof.outcome == CONFIRMED else None)
    return out


def _rate(k: int, n: int) -> dict:
    return {"count": k, "of": n, "rate": k / n if n else None, "ci": sim.exact_interval(k, n) if n else None}


def run_cell(field_name: str, sd: float, sims: int, seed: int, plan: RacePlan) -> dict:
    field = FIELDS[field_name]
    rng = np.random.default_rng(seed)
    tunes = [one_tune(field, sd, rng, plan) for _ in range(sims)]
    best = max(field.values())
    right = {x for x, r in field.items() if r == best and r > 1.0 + plan.margin}
    chose = [t for t in tunes if t["race_choice"]]
    proven = [t for t in chose if "proof_covers" in t]
    return {"field": field_name, "true_ratios": field, "round_sd": sd, "seed": seed, "tunes": sims,
            "recommended": _rate(sum(t["recommended"] is not None for t in tunes), sims),
            "right": _rate(sum(t["recommended"] in right for t in tunes), sims) if right else None,
            "race_alone_recommends": _rate(len(chose), sims),
            "race_coverage": _rate(sum(t["race_covers"] for t in chose), len(chose)),
            "proof_coverage": _rate(sum(t["proof_covers"] for t in proven), len(proven)),
            "race_bias_pct": float(np.mean([t["race_error"] for t in chose]) * 100) if chose else None,
            "proof_bias_pct": float(np.mean([t["proof_error"] for t in proven]) * 100) if proven else None,
            "mean_race_rounds": float(np.mean([t["race_rounds"] for t in tunes])),
            "mean_proof_rounds": float(np.mean([t["proof_rounds"] for t in tunes]))}


def simulate(sims: int = SIMS, seed: int = SEED) -> dict:
    levels = margin_rule.noise_levels(sim.measure())
    plan = RacePlan()
    cells = [{"noise": noise, **run_cell(f, levels[noise], sims, sim.cell_seed(seed, f"{f}/{noise}", 1.0), plan)}
             for f in FIELDS for noise in NOISE]
    return {"question": "How often does tune recommend a change, and is its gain right, when a proof on fresh "
                        "rounds decides?", "command": f"python -m experiments.analysis.tune_proof --sims {sims}",
            "race_plan": {"first_rounds": plan.first_rounds, "max_rounds": plan.max_rounds,
                          "target_halfwidth": plan.target_halfwidth, "margin": plan.margin,
                          "interval": plan.interval, "prefer": plan.prefer},
            "noise": {n: levels[n] for n in NOISE}, "runs": list(sim.DEFAULT_RUNS),
            "prespecified": {"sims_per_cell": sims, "seed": seed, "goals": GOALS}, "cells": cells}


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sims", type=int, default=SIMS)
    args = ap.parse_args()
    doc = simulate(args.sims)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proof.json").write_text(json.dumps(doc, indent=1) + "\n")
    sim.write_manifest(args.out, "tune's recommendations when a proof on fresh rounds decides, on simulated races "
                       "with known truths (proof.json)", doc["command"], list(sim.DEFAULT_RUNS), CODE)
    for c in doc["cells"]:
        pc = c["proof_coverage"]
        print(f"{c['field']:11s} {c['noise']:9s} recommended {c['recommended']['rate']:.3f} "
              f"(race alone {c['race_alone_recommends']['rate']:.3f}) right "
              f"{c['right']['rate'] if c['right'] else float('nan'):.3f} proof coverage "
              f"{pc['rate'] if pc['of'] else float('nan'):.3f} of {pc['of']} race coverage "
              f"{c['race_coverage']['rate'] if c['race_coverage']['of'] else float('nan'):.3f} bias race "
              f"{c['race_bias_pct'] if c['race_bias_pct'] is not None else float('nan'):+.3f} % proof "
              f"{c['proof_bias_pct'] if c['proof_bias_pct'] is not None else float('nan'):+.3f} % rounds "
              f"{c['mean_race_rounds']:.0f}+{c['mean_proof_rounds']:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
