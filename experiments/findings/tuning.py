"""Which configuration is fastest: the committed ``ptxprobe tune`` and ``ptxprobe apply`` runs on the H200 (render.py).

Every number is read from the run's tuned.json and apply.json files, and ``problems`` recomputes what those files
claim with the tool's own functions (the recommendation from the final standings, the program's comparisons from
its recorded runs, the prediction check), so that a record that disagrees with its data is caught."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.analysis import gpu_runs
from experiments.analysis import static_runs as analysis
from experiments.findings.common import pct
from ptxprobe.api import (
    RACED_FAMILY,
    TRIGGER,
    Candidate,
    RaceResult,
    Standing,
    chosen,
    compare_arms,
    judged,
    prediction_check,
    race_logs,
    rung_level,
    standing,
    stats,
)
from ptxprobe.api import ProgramRun as Run

RUN = "2026-12-04-h200-tune"
BURSTS = "2026-12-04-h200-burst-length"
AOT = "2026-12-03-h200-cute-dsl-aot"  # the FA2 example's static-shape case, compiled ahead of time
STEPS = ("sgemm", "attention-fp8", "attention-cuda", "ffma", "ffma-proof", "ffma-trigger-names")
PROGRAM_STEPS = ("program", "program-repeat")  # `tune -- prog` with no sources: raced inside the program
CUTE_STEPS = ("cute-fa2-static", "cute-fa2")  # the same for a CuTe DSL program (CUTLASS's FA2 example, JIT)
INDUCTOR_STEP = "inductor"  # the same for a torch.compile'd block (Inductor's kernels)
GOAL_GPU_SECONDS = 180.0  # one kernel tuned in at most 3 GPU minutes
GOAL_HALF_WIDTH = 0.002  # the recommended configuration's interval half-width
INTRO = ("`ptxprobe tune` on the H200: per kernel, names × ptxas releases × option sets, pruned by machine code, "
         "the distinct codes raced against the user's configuration (successive halving, paired timing), then "
         "`ptxprobe apply --rounds` runs the program with the recommendation swapped in, A/B against the user's own "
         "configuration and an A/A copy.")


def run_dir(where: Path | None = None) -> Path:
    return where or analysis.results_dir(RUN)


def tuned(step: str, where: Path | None = None) -> dict:
    return json.loads((run_dir(where) / step / "tuned.json").read_text())


def applied(step: str, where: Path | None = None) -> dict | None:
    path = run_dir(where) / step / "apply" / "apply.json"
    return json.loads(path.read_text()) if path.exists() else None


def _standing(s: dict) -> Standing:
    return Standing(s["label"], s["rounds"], s["ratio"], s["low"], s["high"], s["level"], s["verdict"],
                    s["p_value"])


def recommended_again(k: dict) -> str:
    """The recommendation recomputed from the final standings with the rule the record names (``prefer``; a record
    without one was made when the race's leader was always recommended)."""
    by_label = {c["label"]: Candidate.from_json(c, k["kernel"], k["arch"]) for c in k["distinct"]}
    result = RaceResult(tuple(_standing(s) for s in k["race"]["standings"]), (), k["race"]["rungs"],
                        k["race"]["rounds_measured"], k["race"]["stopped_by"])
    user = by_label[k["user"]["label"]]
    pick = chosen(result, by_label, user, k.get("prefer", "fastest"))
    return pick.label if pick else user.label


def problems(where: Path | None = None) -> list[str]:
    """Every claim of the committed run recomputed; an empty list when the files agree with themselves."""
    out = []
    for step in (*STEPS, *PROGRAM_STEPS, *CUTE_STEPS, INDUCTOR_STEP):
        doc = tuned(step, where)
        for k in doc["kernels"]:
            stopped = (k.get("race") or {}).get("stopped_by")
            if (len(k["distinct"]) == 1) != (stopped == "alone"):
                out.append(f"{step}: {k['kernel']} has {len(k['distinct'])} distinct codes, its race {stopped}")
                continue
            if recommended_again(k) != k["best"]["label"]:
                out.append(f"{step}: the standings recommend {recommended_again(k)}, the record {k['best']['label']}")
            if (k["gain"] is None) != k["best_is_yours"]:
                out.append(f"{step}: a gain without a recommendation (or the reverse)")
            if "program_runs" in k:
                out += [f"{step}: {m}" for m in standings_recomputed(k, doc["race_plan"])]
        rec = applied(step, where)
        if rec is None:
            continue
        runs = [Run(**r) for r in rec["runs"]]
        again = {c["arm"]: c for c in compare_arms(runs, method=stats.recorded_method(rec["comparisons"],
                                                                                    "signed-rank"))}
        for c in rec["comparisons"]:
            a = again[c["arm"]]
            if a["verdict"] != c["verdict"] or abs(a.get("ratio", 0) - c.get("ratio", 0)) > 1e-12:
                out.append(f"{step}: the program's {c['arm']} comparison recomputes to {a['verdict']} "
                           f"{a.get('ratio')}, recorded {c['verdict']} {c.get('ratio')}")
        by_entry = {k.get("entry"): k for k in doc["kernels"] if k["status"] == "tuned"}
        for swapped in rec["kernels"]:
            k = by_entry.get(swapped["entry"])
            if k is None or swapped["machine_code_sha256"] != k["best"]["machine_code_sha256"] \
                    or not swapped["verified"]:
                out.append(f"{step}: the program ran another code than the recommended one for {swapped['entry']}")
            elif swapped["gain"] != k["gain"]:
                out.append(f"{step}: the gain apply.json compares with is not tune's for {swapped['entry']}")
            elif swapped.get("compiled_as", swapped["name"]) != k["best"]["name"]:
                out.append(f"{step}: the code loaded for {swapped['entry']} was assembled under "
                           f"{swapped.get('compiled_as')}, not the recommended name")
        if "prediction" in rec and rec["prediction"] != prediction_check(rec):
            out.append(f"{step}: the recorded prediction check is not what its numbers give")
    return out


def _space(doc: dict) -> str:
    k = doc["kernels"][0]
    names = sorted({c["name"] for c in k["distinct"]} | {p["name"] for p in k["pruned"]})
    sp = doc["space"]
    return (f"{len(names)} names ({', '.join(f'`{n}`' for n in names)}) × {len(sp['ptxas'])} ptxas × "
            f"{len(sp['option_sets'])} option sets")


def standings_recomputed(k: dict, plan: dict) -> list[str]:
    """A program-raced kernel's final standings computed again from the program runs its record keeps."""
    logs = race_logs(k)
    level = rung_level(k["race"]["rungs"], plan["level"])
    recorded = k["race"]["standings"]
    method = plan.get("interval", "signed-rank")  # races recorded before the plan named it used the signed-rank
    family = list(logs) if k["race"].get("bh_family") == RACED_FAMILY else None  # else the standings, as recorded
    again = judged([standing(s["label"], logs[s["label"]], level, method) for s in recorded], logs, plan["margin"],
                   method, family)
    return [f"{s['label']} recomputes to {a.ratio:.5f} [{a.low:.5f}, {a.high:.5f}] {a.verdict}, recorded "
            f"{s['ratio']:.5f} [{s['low']:.5f}, {s['high']:.5f}] {s['verdict']}"
            for s, a in zip(recorded, again, strict=True)
            if a.label != s["label"] or a.verdict != s["verdict"]
            or max(abs(a.ratio - s["ratio"]), abs(a.low - s["low"]), abs(a.high - s["high"])) > 1e-12]


def program_tuning(where: Path | None = None) -> list[str]:
    """``tune -- prog`` with no sources: the program's kernel raced inside it, then the proof on fresh rounds."""
    out = []
    for step in PROGRAM_STEPS:
        doc, rec = tuned(step, where), applied(step, where)
        k = doc["kernels"][0]
        c = {x["arm"]: x for x in rec["comparisons"]}
        pred = prediction_check(rec)
        out.append(f"- {step}: {_space(doc)}; {len(k['distinct'])} distinct codes, raced inside the program "
                   f"({k['race']['rounds_measured']} contender-rounds, {k['gpu_seconds']:.0f} s of program runs): "
                   f"**{k['best']['label']}** {_iv(k['gain'])}. The proof on {rec['rounds']} fresh rounds: "
                   f"{_iv(c['tuned'])} {c['tuned']['verdict']}, A/A {_iv(c['aa'])} {c['aa']['verdict']}; "
                   f"{'inside' if pred['inside'] else 'outside'} the race's interval "
                   f"({pred['difference'] * 100:+.2f} points).")
    return out


def cute_programs(where: Path | None = None) -> list[str]:
    """``tune -- prog`` of a CuTe DSL program: the DSL's own name (it holds the trigger) against the trigger-free
    spelling, raced inside the program with the hook loading each code under the DSL's own name."""
    out = []
    for step in CUTE_STEPS:
        doc, rec = tuned(step, where), applied(step, where)
        k = doc["kernels"][0]
        (s,) = k["race"]["standings"]
        free_name = next(c["name"] for c in k["distinct"] if c["label"] == s["label"])
        runs = k["program_runs"]["calls"][1:]
        us = {a: sorted(r["value"] for c in runs for r in c if r["arm"] == a) for a in k["program_runs"]["arms"]}
        med = {k["program_runs"]["arms"][a]: v[len(v) // 2] for a, v in us.items()}
        contender = "the trigger-free spelling" if TRIGGER not in free_name else f"`{free_name[:40]}`"
        line = (f"- {step} (`{' '.join(doc['program']['command'][1:])}`): {len(k['distinct'])} distinct codes; "
                f"median {med[k['user']['label']]:.0f} µs under the DSL's own name, {med[s['label']]:.0f} µs as "
                f"{contender}: {_iv(s)} **{s['verdict']}** ({s['rounds']} rounds). ")
        if k["best_is_yours"]:
            line += ("Recommended: **yours** (the DSL's own name): nothing to apply"
                     + (", no proof run." if rec is None else "."))
        else:
            c = {x["arm"]: x for x in rec["comparisons"]}
            pred = prediction_check(rec)
            line += (f"Recommended: **{contender}**, applied by the hook (its code loaded under the DSL's own "
                     f"name). The proof on {rec['rounds']} fresh rounds: {_iv(c['tuned'])} "
                     f"{c['tuned']['verdict']}, A/A {_iv(c['aa'])} {c['aa']['verdict']}; "
                     f"{'inside' if pred['inside'] else 'outside'} the race's interval "
                     f"({pred['difference'] * 100:+.2f} points).")
        out.append(line)
    from experiments.analysis import external_runs

    aot_path = analysis.results_dir(AOT) / "cute_aot.json"
    aot = external_runs.aot_comparisons(aot_path)
    aot_ptxas = json.loads(aot_path.read_text())["manifest"]["ptxas"]["version"]
    r = aot[(aot.case == "ampere_fa2_fp16_full") & (aot.role == "trigger")].iloc[0]
    (static, static_ptx), (dynamic, dynamic_ptx) = (
        (k["race"]["standings"][0], k["ptx_sha256"]) for k in (tuned(step, where)["kernels"][0] for step in CUTE_STEPS))
    same = (static["ratio"] > 1) == (r.ratio < 1)  # AOT: the DSL's own over trigger-free; tune: trigger-free's gain
    out.append(f"The ahead-of-time run of the static-shape case (`{AOT}`, ptxas {aot_ptxas}, cubins loaded through "
               f"an exported object) measured the trigger-free spelling at {pct(1 / r.ratio)}: the static-layout "
               f"program {'agrees in direction' if same else 'disagrees'}. Compiled with dynamic layouts, as the "
               f"example's own `run()` does, the kernel is "
               f"{'another PTX' if static_ptx != dynamic_ptx else 'the same PTX'} and the trigger-free spelling is "
               f"{dynamic['verdict']} ({pct(dynamic['ratio'])}): which name is faster belongs to the program's own "
               "kernel, which is why tune measures it there.")
    return out


def inductor_program(where: Path | None = None) -> str:
    """``tune -- prog`` of a torch.compile'd block: what static pruning left of Inductor's kernels."""
    doc = tuned(INDUCTOR_STEP, where)
    ks = doc["kernels"]
    one = [k for k in ks if len(k["distinct"]) == 1]
    entries = sorted({k["entry"] for k in ks})
    options = " and ".join(" ".join(o) or "default" for o in doc["space"]["option_sets"])
    ran_only_to_capture = applied(INDUCTOR_STEP, where) is None and not any("program_runs" in k for k in ks)
    return (f"**A torch.compile'd block** (`{INDUCTOR_STEP}`: `{' '.join(doc['program']['command'][1:])}`, "
            f"{_space(doc)}): the program compiled {len(ks)} kernels ({len(entries)} entries: "
            f"{', '.join(f'`{e}`' for e in entries)}); {len(one)} of {len(ks)} give one machine code under every "
            f"configuration" + (f", so tune raced nothing ({sum(k['gpu_seconds'] for k in ks):.0f} GPU s)"
                                + (" and ran the program only to capture it" if ran_only_to_capture else "")
                                + f": for these kernels neither the name nor the options ({options}) change the code "
                                f"under ptxas {', '.join(sorted({v['version'] for v in doc['ptxas'].values()}))}."
                                if len(one) == len(ks) else f"; the other {len(ks) - len(one)} were raced inside the "
                                "program."))


def _where(k: dict) -> str:
    size = k.get("sizes") or (f"N={k['seq_len']}" if k.get("seq_len") else "")
    return f"{k['kernel']} {size}".strip()


def _iv(g: dict) -> str:
    return f"{pct(g['ratio'], 2)} [{pct(g['low'], 2)}, {pct(g['high'], 2)}]"


def table(where: Path | None = None) -> list[str]:
    out = ["| kernel, problem | space: distinct codes of candidates | recommended | gain over yours [95 %], "
           "half-width | runner-up | race | GPU s |", "|---|---|---|---|---|---|---|"]
    for step in STEPS:
        doc = tuned(step, where)
        for k in doc["kernels"]:
            n = len(k["distinct"]) + len(k["pruned"])
            best = "yours (none proven faster)" if k["best_is_yours"] else f"`{k['best']['label']}`"
            gain = (f"{_iv(k['gain'])}, {k['gain']['half_width'] * 100:.2f} %" if k["gain"]
                    else f"leader {k['leader_verdict']}")
            if k.get("fastest"):
                gain += f" (fastest estimate `{k['fastest']['label']}` {pct(k['fastest']['ratio'], 2)}, tied)"
            r = k["runner_up"]
            runner = f"`{r['label']}` {pct(r['ratio'], 2)}" if r else "-"
            race = f"{k['race']['rounds_measured']} pair-rounds, stopped by {k['race']['stopped_by']}"
            out.append(f"| `{_where(k)}` ({step}) | {len(k['distinct'])} of {n} | {best} | {gain} | {runner} | "
                       f"{race} | {k['gpu_seconds']:.1f} |")
    return out


def name_effect(k: dict) -> dict[str, float]:
    """Per ptxas release, the trigger-holding name's throughput over the trigger-free name's, both at the default
    options (each measured against the user's configuration in the race, raced or dropped)."""
    seen = {s["label"]: s["ratio"] for s in [*k["race"]["standings"], *k["race"]["dropped"]]}
    seen[k["user"]["label"]] = 1.0
    by: dict[str, dict[bool, float]] = {}
    for c in k["distinct"]:
        if not c["options"] and c["label"] in seen:
            by.setdefault(c["ptxas_version"], {})[TRIGGER in c["name"]] = seen[c["label"]]
    return {v: r[True] / r[False] for v, r in sorted(by.items()) if True in r and False in r}


def o2_gives_trigger_free_code(k: dict) -> bool:
    """Whether, under every release, -O2 assembles both names to the trigger-free name's default machine code."""
    code = {(c["name"], c["ptxas_version"], tuple(c["options"])): c["machine_code_sha256"]
            for c in [*k["distinct"], *k["pruned"]]}
    free = {(v, c) for (n, v, o), c in code.items() if not o and TRIGGER not in n}
    return all((v, c) in free for (n, v, o), c in code.items() if o == ("-O2",))


def name_effects(where: Path | None = None) -> list[str]:
    out = []
    for step in ("sgemm", "attention-fp8", "attention-cuda", "ffma"):  # one per kernel (the ffma runs share one)
        k = tuned(step, where)["kernels"][-1]
        eff = name_effect(k)
        o2 = ("; with `-O2` both names assemble to the trigger-free name's default code under every release"
              if o2_gives_trigger_free_code(k) else "")
        out.append(f"- `{_where(k)}`: the trigger-holding name against the trigger-free one, default options: "
                   + ", ".join(f"ptxas {v} {pct(r)}" for v, r in eff.items()) + o2 + ".")
    return out


def programs(where: Path | None = None) -> list[str]:
    out = []
    for step in STEPS:
        rec = applied(step, where)
        if rec is None:
            continue
        c = {x["arm"]: x for x in rec["comparisons"]}
        pred = prediction_check(rec)
        k = rec["kernels"][0]
        out.append(
            f"- `{' '.join(rec['command'])}` ({step}), `{k['entry']}` loaded as `{k['name']}` (ptxas "
            f"{k['ptxas_version']}, {' '.join(k['options']) or 'default'} options; name and machine code checked), "
            f"{rec['rounds']} rounds of yours, tuned and an A/A copy, the program's own `ms=`: tuned "
            f"{_iv(c['tuned'])} **{c['tuned']['verdict']}**, A/A {_iv(c['aa'])} {c['aa']['verdict']}. Predicted by "
            f"tune {_iv(pred['predicted'])}: the program's estimate is "
            f"{'inside' if pred['inside'] else 'outside'} the predicted interval "
            f"({pred['difference'] * 100:+.2f} points), the intervals "
            f"{'overlap' if pred['overlap'] else 'do not overlap'}.")
    return out


def program_goal(where: Path | None = None) -> str:
    preds = [prediction_check(applied(step, where)) for step in PROGRAM_STEPS]
    return (f"Tuned by the program itself, the proof lies inside the race's interval in "
            f"{sum(p['inside'] for p in preds)} of {len(preds)} runs (goal: all): the race and the proof measure in "
            "the same regime, the program's own.")


def goals(where: Path | None = None) -> list[str]:
    ks = [k for step in STEPS for k in tuned(step, where)["kernels"]]
    sizes = sorted({len(k["distinct"]) + len(k["pruned"]) for k in ks})
    hws = [k["gain"]["half_width"] for k in ks if k["gain"]]
    preds = [prediction_check(rec) for step in STEPS if (rec := applied(step, where))]
    inside, overlap = sum(p["inside"] for p in preds), sum(p["overlap"] for p in preds)
    diffs = [p["difference"] * 100 for p in preds]
    return [f"Goals: every kernel tuned over {'/'.join(map(str, sizes))} candidates in at most "
            f"{max(k['gpu_seconds'] for k in ks):.1f} GPU s (goal ≤ {GOAL_GPU_SECONDS:.0f}); the recommended "
            f"configuration's half-width at most {max(hws) * 100:.2f} % (goal ≤ {GOAL_HALF_WIDTH * 100:g} %); the "
            f"program's A/B inside the predicted interval in {inside} of {len(preds)} runs (goal: all), its interval "
            f"overlapping the prediction in {overlap} of {len(preds)}: the programs measured "
            f"{', '.join(format(d, '+.2f') for d in diffs)} points from the kernel's prediction (mean "
            f"{sum(diffs) / len(diffs):+.2f})."]


def regime() -> list[str]:
    """How long the GPU runs the kernel back to back, against the name's gain (experiments/gpu/burst_length.py)."""
    t = gpu_runs.burst_gains(analysis.results_dir(BURSTS) / "burst_length.json")
    short, long_ = t.loc[t.ratio.idxmax()], t.iloc[-1]
    out = [f"**How long the GPU runs it changes the gain** (`{BURSTS}`: the FFMA matmul, Triton's own compile under "
           f"both names, bursts of back-to-back launches in random order, {int(t.rounds.min())} rounds, nvidia-smi "
           "logging clock, power and the clock-event reasons every 50 ms):", "",
           "| launches per burst | seconds | trigger-free name faster by | SM clock MHz (trigger-free / cutlass) | "
           "power W | bursts under the power cap |", "|---|---|---|---|---|---|"]
    out += [f"| {int(r.burst)} | {r.seconds:.2f} | {pct(r.ratio)} [{pct(r.low)}, {pct(r.high)}] | "
            f"{r.trigger_free_mhz:.0f} / {r.cutlass_mhz:.0f} | {r.trigger_free_w:.0f} / {r.cutlass_w:.0f} | "
            f"{r.trigger_free_capped:.0%} / {r.cutlass_capped:.0%} |" for r in t.itertuples()]
    race = tuned("ffma")["kernels"][0]["gain"]
    out += ["", f"tune's race (samples of about 10 ms, pauses between them) measured {pct(race['ratio'])} for this "
            f"kernel, as bursts of up to {short.seconds:.2f} s do ({pct(short.ratio)}). Held at the power limit for "
            f"{long_.seconds:.1f} s the gain is {pct(long_.ratio)}: the clock falls to "
            f"{long_.trigger_free_mhz:.0f} MHz under the faster code and {long_.cutlass_mhz:.0f} MHz under the slower, "
            "so part of the gain is given back as clock. A training job that keeps the GPU at its power limit gets "
            "the lower figure; the programs above (40 launches right after a float64 check) measured below the race "
            "in the same direction."]
    return out


def section(where: Path | None = None) -> list[str]:
    sg = tuned("sgemm", where)
    return [f"`{RUN}`, each kernel over {_space(sg)} (the FFMA matmul: {_space(tuned('ffma', where))}):", "",
            *table(where), "", "What each raced configuration measured against yours:", "", *name_effects(where),
            "", "The program, tuned and proven:", "", *programs(where), "", *goals(where), "", *regime(), "",
            "**The program tuned by itself** (`tune -o DIR --metric 'ms=(\\S+)' -- python3 "
            "experiments/user/ffma_matmul.py cutlass_matmul_fp32`, no sources: its kernel captured, swept, pruned, "
            "each distinct code raced inside the program by its `ms=` line, then the proof A/B):", "",
            *program_tuning(where), "", program_goal(where), "",
            f"**A CuTe DSL program tuned by itself** (CUTLASS's FA2 example, JIT-compiled on the "
            f"{tuned(CUTE_STEPS[0], where)['gpu']['gpu']} by the program; "
            "the capture hook loads each contender's cubin, assembled under its name and spelt back to the DSL's "
            "own, in place of the DSL's):", "", *cute_programs(where), "", inductor_program(where), "",
            "In the run whose space held only `{base}` and `cutlass_{base}` (ffma-trigger-names) the race's leader "
            "was recommended; since then the fewest changes among the configurations the race cannot tell apart "
            "is."]
