"""The proof tune decides by, on simulated races with known truths (experiments/analysis/tune_proof.py; render.py).

Every number is read from the committed result; which goals hold is read from it too."""

from __future__ import annotations

import json

from experiments.analysis import static_runs as analysis

RESULT = "2026-12-05-cpu-tune-proof"


def _pct(rate: dict | None) -> str:
    if not rate or not rate["of"]:
        return "–"
    lo, hi = rate["ci"]
    return f"{rate['rate'] * 100:.1f} % [{lo * 100:.1f}, {hi * 100:.1f}]"


def _bias(x: float | None) -> str:
    return "–" if x is None else f"{x:+.3f}"


def section() -> list[str]:
    d = json.loads((analysis.results_dir(RESULT) / "proof.json").read_text())
    goals, plan = d["prespecified"]["goals"], d["race_plan"]
    rows = ["| field (true ratios) | noise | change recommended | the right one | the race alone would recommend | "
            "proof covers | race's choice covers | gain bias, race / proof (points) | rounds, race + proof |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in d["cells"]:
        truths = sorted(set(c["true_ratios"].values()), reverse=True)
        rows.append(f"| {c['field']} ({', '.join(f'{t:g}' for t in truths)}) | {c['noise']} | "
                    f"{_pct(c['recommended'])} | {_pct(c['right'])} | {_pct(c['race_alone_recommends'])} | "
                    f"{_pct(c['proof_coverage'])} | {_pct(c['race_coverage'])} | {_bias(c['race_bias_pct'])} / "
                    f"{_bias(c['proof_bias_pct'])} | {c['mean_race_rounds']:.0f} + {c['mean_proof_rounds']:.0f} |")
    by = {(c["field"], c["noise"]): c for c in d["cells"]}
    missed = [f"{f} at {n} noise" for (f, n), c in by.items()
              if (f in goals["recommended_max"] and c["recommended"]["rate"] > goals["recommended_max"][f])
              or (f in goals["right_min"] and c["right"]["rate"] < goals["right_min"][f])
              or (c["proof_coverage"]["of"] >= 100 and c["proof_coverage"]["rate"] < goals["proof_coverage_min"])]
    race_alone_over = [f"{f} at {n} noise" for (f, n), c in by.items()
                       if f in goals["recommended_max"] and c["race_alone_recommends"]["rate"] >
                       goals["recommended_max"][f]]
    intro = (f"**The race chooses, a proof on fresh rounds decides** (`{RESULT}`, "
             "`experiments/analysis/tune_proof.py`). Fields of candidates with known true ratios against yours are "
             "raced by the tool's own code (default race plan: first rung "
             f"{plan['first_rounds']} rounds, cap {plan['max_rounds']}, target ±{plan['target_halfwidth'] * 100:g} %, "
             f"`{plan['interval']}`, BH over every candidate raced), the choice proven on fresh rounds "
             "(`tune.proof`), and the recommendation taken as `tuned.json` records it; independent normal rounds at "
             f"the committed A/A noise ({', '.join(f'{n} {sd * 100:.3f} %' for n, sd in d['noise'].items())} per "
             f"round), {d['prespecified']['sims_per_cell']} tunes per cell. Rates with exact 95 % intervals; the "
             "bias is the mean log error of the reported gain against the chosen candidate's truth, in points:")
    after = ("Goals (a change recommended at most "
             f"{max(goals['recommended_max'].values()) * 100:g} % of the time where every candidate is equal, +0.3 % "
             f"or +0.45 %; one +1 % among equals recommended at least {goals['right_min']['one-faster'] * 100:g} %; "
             f"the proof covering at least {goals['proof_coverage_min'] * 100:g} %): "
             + ("all met." if not missed else f"missed in {', '.join(missed)}.")
             + " At kernel-level noise the margin rule already keeps the race alone from recommending the sub-margin "
             "fields " + ("in every cell" if not race_alone_over else f"except {', '.join(race_alone_over)}")
             + "; what the proof adds is the number: where candidates tie beyond the margin the race's gain is "
             "biased up by choosing the best of several (the winner's curse), the proof's, from rounds the race never "
             "saw, less (the table's bias columns; small at this noise, since the race's rounds are many). The "
             "price is the proof's rounds (one pair, against the race's many), and power just "
             "beyond the margin at high noise, where the proof's cap leaves a true +0.6 % unconfirmed more often "
             "than the race alone would. The committed tune runs below were made before the proof: their gains are "
             "the race's.")
    return [intro, "", *rows, "", after, ""]


GPU_RUN = "2026-12-05-h100-tune"
PROGRAM_RACE = "2026-12-05-h200-program-race"  # the race whose rounds could not reach significance
PROGRAM_RACE_AGAIN = "2026-12-05-h100-program-race"  # the same program raced again with the rounds floor


def gpu_section() -> list[str]:
    """The proof on the GPU: the FFMA matmul's tune, and its program tuned alone (read from their tuned.json)."""
    d = analysis.results_dir(GPU_RUN)
    doc = json.loads((d / "ffma-proof" / "tuned.json").read_text())
    k = doc["kernels"][0]
    c, g = k["race_choice"], k["proof"]
    ab = json.loads((d / "ffma-proof" / "apply" / "apply.json").read_text())
    tuned = next(x for x in ab["comparisons"] if x["arm"] == "tuned")
    prog = json.loads((d / "program" / "tuned.json").read_text())["kernels"][0]
    return [f"**On the GPU** (`{GPU_RUN}`, {doc['gpu']['gpu']}; the device lent no H200): the FFMA matmul "
            f"(`cutlass_matmul_fp32`) tuned from its source, the race chose `{c['label']}` at {c['ratio']:.4f} "
            f"[{c['low']:.4f}, {c['high']:.4f}] ({c['rounds']} rounds) and the proof, on {g['rounds']} fresh rounds "
            f"({g['looks']} look, {g['stopped_by']}), says {g['verdict']} at {g['ratio']:.4f} [{g['low']:.4f}, "
            f"{g['high']:.4f}]: `outcome` {k['outcome']}; the program run with it, A/B against yours over "
            f"{tuned['rounds']} rounds, {tuned['verdict']} at {tuned['ratio']:.4f} [{tuned['low']:.4f}, "
            f"{tuned['high']:.4f}]. The same program tuned alone (raced inside the program) ran out of the call's "
            f"time during its proof: `outcome` {prog['outcome']}, and the record says "
            f"\"{prog['change']}\".", ""]


def program_race_section() -> list[str]:
    """The H200 program race that ran too few rounds for any verdict: recomputed from the program runs it kept."""
    import numpy as np

    from ptxprobe.api import race_logs, stats

    d = analysis.results_dir(PROGRAM_RACE)
    doc = json.loads((d / "program" / "tuned.json").read_text())
    k = doc["kernels"][0]
    logs = race_logs(k)
    p = {label: stats.paired_pvalue(np.asarray(x)) for label, x in logs.items()}
    q = dict(zip(p, stats.bh_qvalues(list(p.values())), strict=True))
    lead = k["race"]["standings"][0]
    rounds = len(logs[lead["label"]])
    same_sign = sum(all(v > 0 for v in x) for x in logs.values())
    need = stats.decisive_rounds(len(logs))
    return [f"**A race too short to decide** (`{PROGRAM_RACE}`, {doc['gpu']['gpu']}, `bash "
            "experiments/gpu/h200_tune.sh program`): the FFMA matmul's program tuned alone raced "
            f"{len(logs)} codes {rounds} rounds each inside the program. The leader `{lead['label']}` ran "
            f"{lead['ratio']:.4f} [{lead['low']:.4f}, {lead['high']:.4f}] against yours, {same_sign} of the "
            f"{len(logs)} faster in every round, yet every verdict was {lead['verdict']}: {rounds} rounds give the "
            f"exact signed-rank test no p below {2 / 2 ** rounds:.4f}, and Benjamini-Hochberg over the {len(logs)} "
            f"codes raced lifts the leader's to q {q[lead['label']]:.3f}, above 0.05 whatever the data; the race "
            f"stopped ({k['race']['stopped_by']}) and yours stayed. A race now runs at least the rounds its family "
            f"can need (`stats.decisive_rounds`: {need} for {len(logs)} codes) before it stops.", "",
            *_program_race_again()]


def _program_race_again() -> list[str]:
    """The same program raced again with the rounds floor (on an H100: the device lent no H200), its proof and A/B."""
    d = analysis.results_dir(PROGRAM_RACE_AGAIN)
    doc = json.loads((d / "program" / "tuned.json").read_text())
    applied = json.loads((d / "program" / "apply" / "apply.json").read_text())
    k = doc["kernels"][0]
    standings, proof = k["race"]["standings"], k["proof"]
    faster = [s for s in standings if s["verdict"] == "faster"]
    ab = {c["arm"]: c for c in applied["comparisons"]}
    pred = applied["prediction"]
    shown = ", ".join(f"`{s['label']}` {s['ratio']:.4f}" for s in faster)
    return [f"Raced again with that floor (`{PROGRAM_RACE_AGAIN}`, {doc['gpu']['gpu']}, "
            "the same command; the device lent no H200): each code ran "
            f"{min(s['rounds'] for s in standings)} rounds or more, {len(faster)} of the {len(standings)} codes still "
            f"standing came out faster ({shown}; {len(k['race'].get('dropped', []))} more dropped as clearly "
            "slower than the leader), "
            f"and the fewest changes among them, `{proof['label']}`, was proven on {proof['rounds']} fresh rounds: "
            f"{proof['ratio']:.4f} [{proof['low']:.4f}, {proof['high']:.4f}], p {proof['p_value']:.4f}, "
            f"{proof['verdict']} ({k['outcome']}). Applied to the program with an A/B of {applied['rounds']} rounds: "
            f"tuned {ab['tuned']['ratio']:.4f} [{ab['tuned']['low']:.4f}, {ab['tuned']['high']:.4f}] "
            f"{ab['tuned']['verdict']}, the A/A copy {ab['aa']['ratio']:.4f} {ab['aa']['verdict']}; the program's "
            f"estimate {'inside' if pred['inside'] else 'outside'} the interval tune predicted "
            f"({pred['difference'] * 100:+.2f} points). One card each, two models: what it shows is that the race "
            "now decides where the data decide, not that the H200 would have answered the same.", ""]
