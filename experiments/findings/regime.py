"""The regime a gain was measured in: the FFMA matmul in bursts and held alone, on two cards, and the
clock-dependence flag validated on the committed runs (render.py). Every number is read from committed results."""

from __future__ import annotations

import json

from experiments.analysis import static_runs as analysis
from ptxprobe.api import CLOCK_STEP_MHZ, RunDir

RUNS = ("2026-12-05-h200-regime", "2026-12-05-h100-regime")
CUTE = "2026-12-06-h100-cute-regime"  # the static-layout CuTe FA2 program in its two run lengths, each proven
CUTE_CUT = "2026-12-05-h100-cute-regime"  # the same, cut by the call's limit before a proof
CLOCK_SLOPE = "2026-12-05-cpu-clock-slope"
REGIMES = ("burst", "sustained")


def _ci(r: float, lo: float, hi: float) -> str:
    return f"{r:.4f} [{lo:.4f}, {hi:.4f}]"


def gains(run: str) -> dict[str, dict]:
    """Per regime: the tune's proven gain with its regime, and the sweep's name row (the same kernel and names)."""
    d = analysis.results_dir(run)
    out = {}
    for regime in REGIMES:
        k = json.loads((d / f"ffma-{regime}" / "tuned.json").read_text())["kernels"][0]
        rows = RunDir(d / f"sweep-ffma-{regime}").runtime_rows()
        name = next(r for r in rows if r.get("name_template") == "{base_untriggered}")
        out[regime] = {"tune": k, "sweep": name, "gpu": json.loads((d / f"sweep-ffma-{regime}" / "gpu.json")
                                                                   .read_text())["gpu"]}
    return out


def predicted_sustained(burst_ratio: float, sustained_regime: dict) -> float:
    """The burst gain with the clock the faster code gave back: ratio x (1 + its clock difference / the clock)."""
    return burst_ratio * (1.0 + sustained_regime["clock_delta_mhz"] / sustained_regime["clock_mhz"])


def _plants(run: str) -> dict:
    cal = json.loads((analysis.results_dir(run) / "sweep-ffma-sustained" / "calibration.json").read_text())
    return cal


def section() -> list[str]:
    rows = ["| card | regime | tune: proven gain [95 %] (rounds) | sweep: ratio [95 %], verdict | clock (MHz), "
            "choice − yours | power / limit (W) | throttled |", "|---|---|---|---|---|---|---|"]
    checks, limits = [], set()
    for run in RUNS:
        g = gains(run)
        for regime in REGIMES:
            k, s = g[regime]["tune"], g[regime]["sweep"]
            reg, gain = k["regime"], k["gain"]
            swept = _ci(s["ratio_vs_baseline"], s["ratio_ci_low"], s["ratio_ci_high"])
            rows.append(f"| {g[regime]['gpu']} (`{run}`) | {regime} | {_ci(gain['ratio'], gain['low'], gain['high'])} "
                        f"({k['proof']['rounds']}) | {swept}, {s['runtime_verdict']} | {reg['clock_mhz']:.0f}, "
                        f"{reg['clock_delta_mhz']:+.1f} | {reg['power_w']:.0f} / {reg['power_limit_w']:.0f} | "
                        f"{reg['throttled_share'] * 100:.0f} % |")
            limits.add(reg["power_limit_w"])
        b, sus = g["burst"]["tune"], g["sustained"]["tune"]
        delta, predicted = sus["regime"]["clock_delta_mhz"], predicted_sustained(b["gain"]["ratio"], sus["regime"])
        inside = sus["gain"]["low"] <= predicted <= sus["gain"]["high"]
        checks.append(f"{g['burst']['gpu']}: {b['gain']['ratio']:.4f} × (1 − {abs(delta):.1f}/"
                      f"{sus['regime']['clock_mhz']:.0f}) = {predicted:.4f} against {sus['gain']['ratio']:.4f} "
                      f"measured [{sus['gain']['low']:.4f}, {sus['gain']['high']:.4f}], "
                      + ("inside: the clock accounts for the drop" if inside else
                         "below the interval: the clock difference predicts a larger drop than measured (the time "
                         "per launch does not follow the clock one for one)" if predicted < sus["gain"]["low"] else
                         "above the interval: the clock accounts for part of the drop, not all of it"))
    cal = _plants(RUNS[0])
    sized = {f: cal["planted_measured_fraction_median"][f] for f in ("0.01", "0.02")}
    cs = json.loads((analysis.results_dir(CLOCK_SLOPE) / "clock_slope.json").read_text())
    aa, names, planted = cs["aa"], cs["names"], cs["planted"]
    return [
        "**The regime is part of the answer** (`" + "`, `".join(RUNS) + "`; `bash experiments/gpu/h200_tune.sh regime "
        "regime-sweep`). The FFMA matmul named `cutlass_matmul_fp32`, tuned with `--regime burst` and `--regime "
        "sustained` (the race in bursts, the proof in the regime asked for) and rename-swept with `--run --regime` "
        "against its trigger-free spelling, on the H200 and then on an H100:",
        "", *rows, "",
        "In bursts both codes run under one clock (the choice − yours difference is 0): the gain is what the code "
        f"does per cycle. Held alone for seconds at the {' / '.join(f'{x:.0f}' for x in sorted(limits))} W limit, the "
        "faster code draws more power and the card gives it a lower clock, and the gain shrinks. If the time per "
        "launch went with the clock alone, the burst gain times "
        "the clock given back would predict the sustained one: " + "; ".join(checks) + " (the clock is read in "
        f"{CLOCK_STEP_MHZ:g} MHz steps). Every tuned gain, verdict row and `api.compare` comparison now carries its "
        "regime, and the terminal tables show it.",
        "",
        "Held alone, a sleep plant is not of its sized size: a sleep idles the SMs, the power drops and the clock "
        f"rises for the compute around it. On the H200 the 1 % and 2 % plants read {sized['0.01'] * 100:.2f} % and "
        f"{sized['0.02'] * 100:.2f} %, and that sustained sweep's calibration failed on their sizes; sustained plants "
        "are now judged by their direction alone (`gpu.calibrate.DIRECTION_RULE`), and the H100's sustained sweep "
        "passed under that rule.",
        "",
        f"**Is a gain clock-dependent?** (`{CLOCK_SLOPE}`, `experiments/analysis/clock_slope.py`.) Each comparison's "
        "per-round log ratio is regressed on the per-round SM clock, its interval from the long-run variance at b = 1 "
        "with fixed-b critical values, never below the heteroscedasticity-robust variance (a conservative interval: "
        f"the flag is a diagnostic). On the {aa['of'] + aa['no_regression']} committed A/A pairs of "
        f"{len(cs['runs'])} defaults runs (truth: no dependence) it flagged {aa['hits']} of the {aa['of']} whose clock "
        f"moved ({aa['no_regression']} ran at one clock: nothing to regress on); with a slope planted on those same "
        "series' own clocks it found " + ", ".join(f"{float(k) * 100:g} % per 100 MHz in {v['rate'] * 100:.0f} %"
                                                     for k, v in planted.items())
        + f" (the clock moved {cs['aa_clock_range_mhz_median']:.0f} MHz from its 10th to 90th percentile in the "
        f"median series). The same runs' name comparisons: {names['hits']} of {names['of']} flagged clock-dependent "
        f"({names['rate'] * 100:.1f} %). "
        + _across(cs["across_runs"]),
        "",
    ]


def _across(a: dict) -> str:
    """Whether within-run slopes predict the between-run movement (why repro adds no clock term)."""
    top = a["strongest"]
    return (f"Across the {len(a['runs'])} H200 defaults runs, {a['clock_related']} of {a['comparisons']} name "
            f"comparisons moved with the run's median clock (|r| ≥ {a['clock_related_r']:g}), but their within-run "
            "slopes agreed in sign "
            f"with that movement in only {a['sign_agrees']} of them. The strongest (`{top['group']}`, "
            f"r = {top['r']:.2f}) moved {top['across_per_100mhz'] * 100:+.2f} % per 100 MHz between runs and "
            f"{top['within_per_100mhz'] * 100:+.2f} % within them. A comparison's own slope does not predict how "
            "it moves from run to run, so `repro` does not correct a gap for the runs' clock difference; it shows "
            "both runs' regimes beside the gap instead.")


def cute_regimes() -> dict[str, dict]:
    """Per run length: the tune's race, its proof on fresh rounds and its regime, and the program A/B (apply)."""
    d = analysis.results_dir(CUTE)
    out = {}
    for regime in REGIMES:
        k = json.loads((d / regime / "tuned.json").read_text())["kernels"][0]
        ab = {c["arm"]: c for c in json.loads((d / regime / "apply.json").read_text())["comparisons"]}
        out[regime] = {"race": k["race"], "proof": k["proof"], "regime": k["regime"], "outcome": k["outcome"],
                       "tuned": ab["tuned"], "aa": ab["aa"]}
    return out


def cute_section() -> list[str]:
    """The CuTe DSL FA2 program tuned in bursts and held, each proven on fresh rounds."""
    runs = cute_regimes()
    parts = []
    for regime, r in runs.items():
        race, proof, t, aa = r["race"]["standings"][0], r["proof"], r["tuned"], r["aa"]
        parts.append(f"{regime}: the race {_ci(race['ratio'], race['low'], race['high'])} in {race['rounds']} rounds "
                     f"(stopped by {r['race']['stopped_by']}), the proof on {proof['rounds']} fresh rounds "
                     f"{_ci(proof['ratio'], proof['low'], proof['high'])}, {r['outcome']}; the program A/B "
                     f"{_ci(t['ratio'], t['low'], t['high'])} {t['verdict']}, its A/A {aa['verdict']}")
    b, s = runs["burst"]["proof"], runs["sustained"]["proof"]
    overlap = max(b["low"], s["low"]) <= min(b["high"], s["high"])
    power = {regime: r["regime"]["power_w"] for regime, r in runs.items()}
    limit = runs["burst"]["regime"]["power_limit_w"]
    return [f"**The CuTe DSL FA2 program in both regimes** (`{CUTE}`, one H100; `bash experiments/gpu/h200_tune.sh "
            "cute-regime`): the static-layout program, whose kernel the DSL names `kernel_cutlass_…`, tuned against "
            "the trigger-free spelling in runs of 20 timed launches (a burst) and in runs that launch for 1.5 s "
            "before timing 500. " + "; ".join(parts) + ". The trigger-free name is faster in both, and the two "
            "proofs' intervals " + ("overlap: the run length does not move this gain" if overlap else
                                    "do not overlap: the run length moves this gain")
            + f". The regime recorded beside them is the median over each whole program run ({power['burst']:.0f} "
            f"and {power['sustained']:.0f} W of {limit:.0f}), mostly the card idling through the DSL's JIT compile; "
            "the monitor now reads a program's clock and power only while a kernel runs. An earlier call "
            f"(`{CUTE_CUT}`) was cut inside both races' first rung: nothing was proven there, and these runs "
            "complete it.", ""]


SAMPLED = {"burst": "2026-12-06-h100-sampled-burst", "sustained": "2026-12-06-h100-sampled-sustained"}


def sampled_section() -> list[str]:
    """Four groups of the every-default study timed in bursts and then held alone, on one card: what the sustained
    regime says about the name, and what it costs."""
    rows = {regime: {r["group_id"]: r for r in RunDir(analysis.results_dir(run)).runtime_rows()
                     if r.get("block") == "names" and r.get("name_template") == "cutlass_{base}"}
            for regime, run in SAMPLED.items()}
    groups = {regime: RunDir(analysis.results_dir(run)).groups for regime, run in SAMPLED.items()}
    gpu = {regime: json.loads((analysis.results_dir(run) / "gpu.json").read_text()) for regime, run in SAMPLED.items()}
    if len({g["uuid"] for g in gpu.values()}) != 1:
        raise ValueError(f"the runs of {SAMPLED} were timed on different cards")
    table = ["| group | bursts: ratio [95 %], verdict (rounds) | held alone: ratio [95 %], verdict (rounds) | "
             "clock (MHz), bursts / held |", "|---|---|---|---|"]
    for gid, b in sorted(rows["burst"].items()):
        s = rows["sustained"][gid]
        table.append(f"| `{gid}` | {_ci(b['ratio_vs_baseline'], b['ratio_ci_low'], b['ratio_ci_high'])}, "
                     f"{b['runtime_verdict']} ({b['rounds']}) | "
                     f"{_ci(s['ratio_vs_baseline'], s['ratio_ci_low'], s['ratio_ci_high'])}, {s['runtime_verdict']} "
                     f"({s['rounds']}) | {b['clock_mhz']:.0f} / {s['clock_mhz']:.0f} |")
    seconds = {regime: sum(g["gpu_seconds"] for g in gs) for regime, gs in groups.items()}
    aa = {regime: sorted(g["aa"]["half_width"] for g in gs) for regime, gs in groups.items()}
    lower = sum(rows["sustained"][g]["ratio_vs_baseline"] < r["ratio_vs_baseline"] for g, r in rows["burst"].items())
    faster = {regime: sum(r["runtime_verdict"] == "faster" for r in rs.values()) for regime, rs in rows.items()}
    return [
        f"**The every-default study's groups held alone** (`{SAMPLED['burst']}`, `{SAMPLED['sustained']}`; "
        "`SAMPLED_REGIMES=burst bash experiments/gpu/h200_study.sh sampled-regimes`, then `SAMPLED_REGIMES=sustained`; "
        "`experiments/definitions/h200_defaults_sampled_regimes.toml`): four of its groups where `cutlass_` changes "
        f"the code, timed in bursts and then with each arm held alone, on one {gpu['burst']['gpu']} "
        f"(`{gpu['burst']['uuid'][:12]}…`, the device lent no H200):",
        "", *table, "",
        f"Held alone, the name's gain is smaller than in bursts in {lower} of {len(rows['burst'])} groups, as the FFMA "
        f"matmul's was, but the sustained regime's few long rounds cannot resolve it: `faster` in "
        f"{faster['sustained']} of {len(rows['sustained'])} groups held alone against {faster['burst']} in bursts, "
        f"the A/A half-widths {aa['sustained'][0] * 100:.2f}–{aa['sustained'][-1] * 100:.2f} % held alone against "
        f"{aa['burst'][0] * 100:.2f}–{aa['burst'][-1] * 100:.2f} % in bursts, and "
        f"{seconds['sustained']:.0f} GPU s for the four groups against {seconds['burst']:.0f} s. A sustained answer "
        "at the precision a burst gives would take many more held rounds per group: the regime is for the few "
        "comparisons whose answer must hold at the power limit, not a default for a study.",
        "",
    ]
