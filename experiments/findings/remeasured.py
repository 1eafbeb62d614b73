"""The every-default H200 study measured five times: the between-run model, the calibration pooled over the runs,
and what the plants taught about sizing a plant (imported by render.py)."""

from __future__ import annotations

import gzip
import itertools

import numpy as np

from experiments.analysis import gpu_runs as analysis_gpu
from experiments.analysis import static_runs as analysis
from ptxprobe.api import SIZE_RULE, RunDir, repro

RUNS = repro.BETWEEN_RUN_RUNS
NOMINAL_SIZED = "2026-12-04-h200-defaults"  # plants judged against their nominal size; code plant's 4-byte word
DIRECTLY_SIZED = "2026-12-04-h200-defaults-sized-plants"
GLUON = "2026-12-04-h200-gluon-hopper"  # its first attempt, with the 4-byte word, logged beside the run
GLUON_FIRST_ATTEMPT = "with-4-byte-plant-word.log.gz"


def _d(run: str):
    return analysis.results_dir(run)


def between_runs() -> list[str]:
    """The run effect fitted over all five runs, against the first pair's, and whether any two runs disagree."""
    rows = [RunDir(_d(r)).runtime_rows() for r in RUNS]
    comps = {run: repro.name_comparisons(r) for run, r in zip(RUNS, rows, strict=True)}
    fit = repro.estimate_from_runs(rows)
    first = repro.estimate_from_runs(rows[:2])
    pairs = list(itertools.combinations(RUNS, 2))
    opposite = sum(repro.direction(comps[a][k]) * repro.direction(comps[b][k]) == -1
                   for a, b in pairs for k in comps[a] if k in comps[b])
    keys = set.intersection(*(set(c) for c in comps.values()))
    same_dir = sum(len({repro.direction(comps[r][k]) for r in RUNS}) == 1 for k in keys)
    return [f"**Every default, five times** ({', '.join(f'`{r}`' for r in RUNS)}: two days, each a run and its "
            f"`ptxprobe repro` on the H200, and one run with directly sized plants): REML over the "
            f"{fit.comparisons} timed name comparisons measured {fit.runs} times puts the run-to-run effect at "
            f"{fit.slope * 100:.1f} % of the effect with no measurable floor (τ₀ {fit.tau0 * 100:.3f} %; "
            f"DerSimonian–Laird's flat τ {fit.tau0_dl * 100:.3f} %); the first pair alone gave "
            f"{first.slope * 100:.1f} %, the model `repro` used until now. No two of the {len(pairs)} pairs of runs "
            f"claim significant effects of opposite sign outside the margin ({opposite} such comparisons); "
            f"{same_dir} of {len(keys)} comparisons make the same claim in all five (an effect up, one down, or "
            "none; a `negligible` effect, shown inside the margin, counts as none since its sign does not "
            "reproduce).", ""]


def pooled_calibration() -> list[str]:
    """The five runs' calibrations counted together, with the exact bounds the goals are stated in."""
    p = analysis_gpu.pooled_calibration([_d(r) for r in RUNS])
    fp_each = ", ".join(f"{r['aa_false_positives']}/{r['groups']}" for r in p["per_run"])
    f = "0.002"
    return [f"*Pooled calibration* of those runs (`gpu.calibrate.pooled`, Clopper–Pearson one-sided 95 %): A/A false "
            f"positives {p['aa_false_positives']} of {p['groups']} groups ({fp_each} run by run), certified at most "
            f"{p['aa_false_positive_upper_95'] * 100:.1f} % (goal ≤ 5 %; one run alone certifies no better than "
            f"{min(r['aa_false_positive_upper_95'] for r in p['per_run']) * 100:.1f} %); the 0.2 % plant found in "
            f"{_of_delivered(p, f)} groups ({p['power'][f]:.0%}, at least {p['power_lower_95'][f]:.0%}; goal 90 %); "
            "0.5 %, 1 % and 2 % in " + ", ".join(_of_delivered(p, k) for k in ("0.005", "0.01", "0.02"))
            + " (a plant whose sizing ruled out its stated size is undelivered and counts for no power: "
            "`gpu.calibrate.delivered`).", ""]


def _of_delivered(p: dict, f: str) -> str:
    """Found of those delivered, and the undelivered beside them."""
    more = p["planted_in_groups"][f] - p["delivered_in_groups"][f]
    found = f"{p['detected_in_groups'][f]} of {p['delivered_in_groups'][f]}"
    return found + (f" (+{more} undelivered)" if more else "")


def _size_ratios(run: str, key: str) -> np.ndarray:
    recs = [g["calibration"]["planted"][key] for g in RunDir(_d(run)).groups
            if key in (g.get("calibration") or {}).get("planted", {})]
    return np.array([r["measured_fraction"] / float(key) for r in recs])


def plant_sizes() -> list[str]:
    """Why a plant is sized directly, and what the code plant's shared word did to dynamic shared memory."""
    nominal = analysis_gpu.calibration(_d(NOMINAL_SIZED))
    again = analysis_gpu.calibration(_d(f"{NOMINAL_SIZED}-repro"))
    error = next(ln for ln in gzip.open(_d(GLUON) / GLUON_FIRST_ATTEMPT, "rt") if "internal error" in ln)
    error = error.split("RuntimeError: ", 1)[1].split(" (run with")[0].strip()
    sized = analysis_gpu.calibration(_d(DIRECTLY_SIZED))
    r = _size_ratios(NOMINAL_SIZED, "0.002")
    judged = [g["calibration"]["planted"] for g in RunDir(_d(DIRECTLY_SIZED)).groups if g.get("calibration")]
    recs = [rec for p in judged for k, rec in p.items() if k != "code"]
    assert {rec["size_rule"] for rec in recs} == {SIZE_RULE}
    replays = {rec["sized_replays"] for rec in recs}
    cov = sized["planted_size_covered_in_groups"]
    n = sized["planted_in_groups"]
    old_code, new_code = nominal["code_plant"], sized["code_plant"]
    gluon_code = analysis_gpu.calibration(_d(GLUON))["code_plant"]
    return [f"*A plant's size is measured, not assumed.* In `{NOMINAL_SIZED}` the sleeps, set from a rate fitted "
            f"right after the unit, measured {r.min():.2f}–{r.max():.2f} times their nominal 0.2 % (median "
            f"{np.median(r):.2f}): the fit's own noise, larger than the block's intervals, so the calibration failed "
            "on sizes (" + "; ".join(nominal["failures"]) + "); its repro's calibration "
            + ("passed" if again["passed"] else "failed too (" + "; ".join(again["failures"]) + ")") + ". "
            f"With each sleep sized directly before the block (`{DIRECTLY_SIZED}`; "
            f"{'/'.join(map(str, sorted(replays)))} paired replays, the block's "
            "measurement judged against that sizing with both errors) the sizes agree in "
            + ", ".join(f"{cov[k]} of {n[k]} ({float(k) * 100:g} %)" for k in sorted(cov, key=float))
            + f" groups and the calibration {'passed' if sized['passed'] else 'failed'}.", "",
            "*The code plant's shared word moved the kernels' dynamic shared memory.* A 4-byte static word placed "
            f"Triton's dynamic buffer at offset 16 instead of 0: the Gluon Hopper attention stopped with \"{error}\" "
            f"(`{GLUON}/{GLUON_FIRST_ATTEMPT}`), and Triton's attentions ran on, "
            f"{old_code['measured_fraction_median']:.1%} slower (median, `{NOMINAL_SIZED}`), a cost of the "
            "misalignment rather than of the chain. With the word "
            f"taking 1 KiB aligned to 1 KiB (`{DIRECTLY_SIZED}`) the chain costs "
            f"{new_code['measured_fraction_median']:.1%} (median) and the speed changed in "
            f"{new_code['slower_in_groups'] + new_code['faster_in_groups']} of {new_code['planted_in_groups']} groups, "
            f"{new_code['faster_in_groups']} of them faster (in `{GLUON}` {gluon_code['slower_in_groups']} slower "
            f"and {gluon_code['faster_in_groups']} faster of {gluon_code['planted_in_groups']}): more work in the loop "
            "does not make a kernel slower by construction, so the code plant is reported with its direction and "
            "certifies nothing.", ""]


def section() -> list[str]:
    return [*between_runs(), *pooled_calibration(), *plant_sizes()]
