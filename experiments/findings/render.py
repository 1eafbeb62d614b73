"""Generate FINDINGS.md from the committed results (no number in it is typed by hand), organised by question, each
question with a figure (docs/figures/*.svg, drawn by figures.py from the same data and compared byte for byte).

    python experiments/findings/render.py           # rewrite FINDINGS.md
    python experiments/findings/render.py --check   # exit 1 if FINDINGS.md or a figure differs from what the data says

tests/study/test_readme.py runs the check. Every section ends with the run directories it read.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.analysis import gpu_runs as analysis_gpu  # noqa: E402
from experiments.analysis import recomputed_intervals as recomputed  # noqa: E402
from experiments.analysis import static_runs as analysis  # noqa: E402
from experiments.findings import (  # noqa: E402
    atlas,
    atlas_cost,
    atlas_figure,
    atlas_speed,
    cost,
    external_kernels,
    figures,
    index,
    measurement,
    proof,
    reduction,
    regime,
    remeasured,
    stopping,
    tuning,
)
from experiments.findings.common import JUDGED_NOW, calibration_line, pct  # noqa: E402
from ptxprobe.api import RunDir, arch_order, stats, version_key  # noqa: E402

FINDINGS = ROOT / "FINDINGS.md"
FIGURES = ROOT / "docs" / "figures"
DESIGN, DESIGN_USER = "2026-12-02-h200-design", "2026-12-02-h200-design-user"
LONG = "2026-12-02-h200-design-long"
PAIRS = "2026-12-02-h200-design-pairs"
REMOVED_RUNS_COMMIT = "7801c8c"  # the last commit with the superseded run directories in the tree


def static_section() -> list[str]:
    s = analysis.load_static(analysis.results_dir("2026-12-02-cpu-ptxas-matrix"))
    cut, ctl = analysis.change_matrix(s), analysis.change_matrix(s, "xutlass_{base}")
    regs = analysis.register_deltas(s)
    out = ["**Static (CPU).** `2026-12-02-cpu-ptxas-matrix` (our Triton attention, D128, fp16/fp8, causal and not): "
           "share of kernels whose code `cutlass_` changes beyond ptxas's own spread, and the register change:", "",
           "| arch | ptxas | `cutlass_` changes | control `xutlass_` changes | registers baseline → cutlass |",
           "|---|---|---|---|---|"]
    for arch in sorted(cut.index, key=lambda a: int("".join(c for c in a if c.isdigit()))):
        for ver in cut.columns:
            v = cut.loc[arch, ver]
            if v != v:  # not accepted by this ptxas
                continue
            r = regs[(regs.arch == arch) & (regs.ptxas_version == ver) & (regs.name_template == "cutlass_{base}")]
            pairs = ", ".join(f"{int(b)}→{int(c)}" for b, c in zip(r.baseline_registers, r.registers, strict=True))
            out.append(f"| {arch} | {ver} | {v:.0%} | {ctl.loc[arch, ver]:.0%} | {pairs} |")
    return out


MATRIX = ("2026-12-02-cpu-ptxas-all", "2026-12-02-cpu-ptxas-all-sm80")


def _matrix_static():
    """The every-release runs that are committed, and their static rows together."""
    import pandas as pd

    runs = [analysis.RESULTS / m for m in MATRIX if (analysis.RESULTS / m).is_dir()]
    return runs, (pd.concat([analysis.load_static(d) for d in runs], ignore_index=True) if runs else None)


def machine_code_figure() -> str:
    """The share of kernels whose code `cutlass_` (and the control `xutlass_`) changes, per arch and release."""
    runs, static = _matrix_static()
    archs = sorted(set(static.arch), key=arch_order)
    versions = sorted(set(static.ptxas_version), key=version_key)
    cut, ctl = (analysis.change_matrix(static, t).reindex(index=archs, columns=versions)
                for t in ("cutlass_{base}", "xutlass_{base}"))
    r = analysis.renamed(static)
    kernels = r[r.name_template == "cutlass_{base}"].groupby("arch").kernel.nunique()
    return figures.machine_code(cut, ctl, {a: int(kernels[a]) for a in archs}, [d.name for d in runs])


def matrix_section() -> list[str]:
    """Every ptxas release: per kernel and arch, the runs of releases with one outcome of the cutlass_ name."""
    runs, static = _matrix_static()
    if not runs:
        return []
    seg = analysis.release_segments(static)
    ctrl = analysis.renamed(static)
    ctrl = ctrl[ctrl.name_template == "xutlass_{base}"]
    versions = sorted(set(static.ptxas_version), key=version_key)
    out = [f"**Every ptxas release** (`{'`, `'.join(d.name for d in runs)}`: {len(versions)} releases "
           f"{versions[0]} … {versions[-1]} from PyPI, `ptxprobe toolchain install all`; each arch with the releases "
           "that accept it). Runs of consecutive releases with one outcome of the `cutlass_` name (register change "
           f"vs the baseline name); the control `xutlass_` differed in {int(ctrl.verdict.isin(analysis.DIFFERS).sum())}"
           f" of {len(ctrl)} kernel × arch × release cells:", "",
           "| kernel | arch | releases | `cutlass_` by release |", "|---|---|---|---|"]
    seg = seg.assign(_a=seg.arch.map(arch_order)).sort_values(["kernel", "_a"])
    for r in seg.itertuples():
        out.append(f"| {r.kernel} | {r.arch} | {r.releases} | {r.segments} |")
    flagged = ctrl[ctrl.verdict.isin(analysis.DIFFERS)]
    check = analysis.RESULTS / "2026-12-02-cpu-ptxas-all-control-check"
    if len(flagged) and check.is_dir():
        again = analysis.renamed(analysis.load_static(check))
        again = again.set_index(["kernel", "arch", "ptxas_version"])
        runs = int(again.n_runs.min())
        cells = [(r.kernel, r.arch, r.ptxas_version, r.verdict_confidence) for r in flagged.itertuples()]
        out += ["", "The control cells that \"differ\" rest on the fewest runs the 0.98 target allows; assembled "
                f"{runs} times a name (`{check.name}`) they read: "
                + "; ".join(f"{k} {a} ptxas {v} (confidence {c:.3f}) → {again.loc[(k, a, v)].verdict}"
                            for k, a, v, c in cells)
                + ". That is ptxas's own run-to-run spread, within what a 0.98 confidence admits."]
    return [*out, ""]


def triggers_section() -> list[str]:
    d = analysis.RESULTS / "2026-12-02-cpu-scan-triggers"
    if not d.is_dir():
        return []
    static = analysis.load_static(d)
    r = analysis.renamed(static)
    cannot = r[r.status != "ok"]
    r = r[r.status == "ok"].assign(changed=lambda x: x.verdict.isin(analysis.DIFFERS))
    versions = sorted(set(static.ptxas_version), key=version_key)
    out = [f"**The other name literals** ptxas compares with `strstr` (`ptxprobe ptxas-scan`), each as a name prefix "
           f"(`{d.name}`: fp16 attention and sgemm.cu, sm_90a and sm_100a, {len(versions)} releases "
           f"{versions[0]} … {versions[-1]}; {len(cannot)} cells that a release cannot build for sm_100a left out):",
           "", "| name | cells where the code changes |", "|---|---|"]
    for t, g in r.groupby("name_template"):
        out.append(f"| `{t}` | {int(g.changed.sum())} of {len(g)} |")
    return [*out, ""]


def runtime_section() -> list[str]:
    out = []
    for run, title in ((DESIGN, "Triton attention, classic and persistent"),
                       (DESIGN_USER, "the CUDA C++ attention and sgemm.cu"),
                       (PAIRS, "the same Triton attention experiment, timed with the paired design")):
        d = analysis.results_dir(run)
        gpu = json.loads((d / "gpu.json").read_text())
        eff = analysis_gpu.name_effects(analysis_gpu.load(d))
        counts = analysis_gpu.verdict_counts(eff)
        out += [f"**`{run}`** ({title}; {gpu['gpu']}, driver {gpu['driver']}): {calibration_line(run)}.", "",
                "| name | ptxas | faster | slower | straddles ±0.5 % | negligible | equivalent | inconclusive |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| `{t}` | {v} | {r.faster} | {r.slower} | {r[stats.STRADDLES_MARGIN]} | {r.negligible} | "
                f"{r.equivalent} | {r.inconclusive} |" for (t, v), r in counts.iterrows()]
        ranges = analysis_gpu.effect_ranges(eff)
        out += ["", "`cutlass_` against the baseline name, per kernel, dtype and mask (groups = N values or sizes; "
                "significant = q ≤ 0.05 after Benjamini-Hochberg over the sweep):", "",
                "| kernel | causal | ptxas | groups | significant | faster | slower | ratio range |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r.family} | {'yes' if r.causal else 'no'} | {r.run_ptxas_version} | {r.groups} | "
                f"{r.significant} | {r.faster} | {r.slower} | {pct(r.ratio_min, 2)} … {pct(r.ratio_max, 2)} |"
                for r in ranges.itertuples()]
        rs = recomputed.committed("resequenced", run)
        changed = rs[rs.verdict_plain != rs.verdict_sequential]
        pairs = changed.groupby(["verdict_plain", "verdict_sequential"])
        moves = ", ".join(f"{a} → {b}: {len(g)}" for (a, b), g in pairs)
        out += ["", f"These runs judged each comparison at 95 % when they stopped; recomputed from the raw times at "
                f"the look-adjusted level the adaptive rule now uses, {len(changed)} of {len(rs)} verdicts change"
                + (f" ({moves})." if moves else ".")]
        n = analysis_gpu.numerics_summary(eff)
        out += ["", f"Numbers: {n['bitwise_equal']} of {n['rows']} renamed rows bitwise equal to the baseline name "
                f"over {n['draws']} input draws at the timed and a small size (max ULP distance {n['max_ulp']}).", ""]
    return out


OPTIONS = "2026-12-02-cpu-ptxas-options"


def options_section() -> list[str]:
    """The cutlass_ name under ptxas's newer options, each applied where that ptxas's --help lists it."""
    d = analysis.results_dir(OPTIONS)
    if not d.exists():
        return []
    static = analysis.load_static(d)
    r = analysis.register_deltas(static)
    r = r[r.name_template == "cutlass_{base}"].copy()
    r["option"] = r.ptxas_flags.str.replace("-lineinfo", "").str.strip().replace("", "(none)")
    options = list(dict.fromkeys(r.option))
    short = {"identical": "same", "option_unsupported": "n/a", "differs_within_noise": "noise"}

    def cell(g) -> str:
        x = g.iloc[0]
        text = short.get(x.verdict, x.verdict)
        if x.verdict == "differs" and x.register_delta == x.register_delta:
            text += f" {int(x.register_delta):+d}r"
        return text

    ctl = analysis.register_deltas(static)
    ctl = ctl[ctl.name_template == "xutlass_{base}"]
    out = [f"**ptxas options** (`{OPTIONS}`, `ptxprobe rename-sweep -e ptxas_options`): the `cutlass_` name's verdict "
           "and register change under each option (n/a: that ptxas's `--help` does not list the option; failed: "
           "that ptxas cannot target the arch). The control `xutlass_`: "
           + ", ".join(f"{k} {v}" for k, v in ctl.verdict.value_counts().items()) + ".", "",
           "| dtype | arch | ptxas | " + " | ".join(f"`{o}`" for o in options) + " |",
           "|---|---|---|" + "---|" * len(options)]
    for (dtype, arch, ver), g in r.groupby(["dtype", "arch", "ptxas_version"], sort=True):
        cells = [cell(g[g.option == o]) if (g.option == o).any() else "-" for o in options]
        out.append(f"| {dtype} | {arch} | {ver} | " + " | ".join(cells) + " |")
    applied = r[~r.verdict.isin(["option_unsupported", "failed"])]
    per_row = applied.groupby(["dtype", "arch", "ptxas_version"]).verdict.nunique()
    spread = applied.groupby(["dtype", "arch", "ptxas_version"]).register_delta.agg(lambda x: x.max() - x.min())
    out += ["", f"Across the options the `cutlass_` verdict is the same in {int((per_row == 1).sum())} of "
            f"{len(per_row)} (dtype, arch, ptxas) rows; its register change moves by at most "
            f"{int(spread.max())} registers between options."]
    return [*out, ""]


def design_comparison() -> list[str]:
    """The paired design against the full-round design on the same experiment and card."""
    old, new = (json.loads((analysis.results_dir(r) / "calibration.json").read_text()) for r in (DESIGN, PAIRS))
    planned = old["groups"]  # the full-round run timed every planned group

    def line(c) -> str:
        return (f"A/A half-width median {c['aa_halfwidth_median'] * 100:.3f} %, "
                f"max {c['aa_halfwidth_max'] * 100:.2f} %; A/A false positives {c['aa_false_positive_rate']:.1%}; "
                "planted 0.5 % found in "
                f"{c['power']['0.005']:.0%}, 1 % in {c['power']['0.01']:.0%}; {c['gpu_seconds']:.0f} GPU s for "
                f"{c['groups']} groups")

    spread = analysis_gpu.aa_spread_by_distance(analysis.results_dir(DESIGN))
    by_d = ", ".join(f"{r.distance}: {r.mad * 100:.2f} %" for r in spread.itertuples())
    clock = recomputed.committed("aa_clock_normalised", DESIGN)
    return [f"**The paired design.** In `{DESIGN}` the spread of the fp16 groups' A/A log ratios "
            f"(median absolute deviation) grew with how many samples apart the two copies ran in a round ({by_d}). "
            "Dividing out the SM clock NVML read with each sample does not help: the A/A half-width median goes "
            f"from {clock.raw.median() * 100:.3f} % to {clock.clock_normalised.median() * 100:.3f} % "
            "(`experiments/benchmarks/aa_clock_normalised.py`). So the default design now times each compared pair "
            "back to "
            "back in every round (the pairs in a random order, which of the two goes first random). Same "
            "experiment, same card:", "",
            f"- full rounds (`{DESIGN}`): {line(old)};",
            f"- pairs (`{PAIRS}`, {new['groups']} of {planned} groups; cut by a device call's time limit and "
            f"resumed in a second one): {line(new)}; calibration "
            f"{'passed' if new['passed'] else 'FAILED: ' + '; '.join(new['failures'])}.",
            "", agreement_line(), "", false_positive_context(new), ""]


SWEEP_EXPLAIN = "2026-12-02-h200-sweep-explain"


def sgemm_repeat_line() -> list[str]:
    """sgemm.cu re-timed (paired design, another device call) against the first run's figures: same cubins."""
    d = analysis.results_dir(SWEEP_EXPLAIN)
    if not d.exists():
        return []
    rows = {}
    for run in (DESIGN_USER, SWEEP_EXPLAIN):
        for r in RunDir(analysis.results_dir(run)).runtime_log:
            if "sgemm" in r["group_id"] and r.get("name_template") == "cutlass_{base}" and r.get("block") == "names":
                rows.setdefault(r["group_id"], {})[run] = r
    parts, same_verdict, throttled, clocks = [], [], 0, set()
    for gid, by in sorted(rows.items()):
        if len(by) < 2:
            continue
        a, b = by[DESIGN_USER], by[SWEEP_EXPLAIN]
        same = "same cubins" if a["text_sha256"] == b["text_sha256"] else "OTHER cubins"
        va, vb = analysis_gpu.judged_now(a), analysis_gpu.judged_now(b)
        same_verdict.append(va == vb)
        for r in (a, b):
            throttled += sum(r["samples"]["throttled"])
            clocks |= {c for c in r["samples"]["sm_clock_mhz"] if c}
        parts.append(f"{gid.split('@', 1)[1]}: {pct(a['ratio_vs_baseline'], 2)} ({va}) then "
                     f"{pct(b['ratio_vs_baseline'], 2)} ({vb}), {same}")
    return [f"**sgemm.cu timed again** (`{SWEEP_EXPLAIN}`: `rename-sweep --cu … --run --explain`, paired design, "
            f"another device call), `cutlass_sgemm` against `sgemm` as first measured in `{DESIGN_USER}`: "
            + "; ".join(parts) + f". Same verdict in {sum(same_verdict)} of {len(same_verdict)} sizes; the "
            f"`cutlass_sgemm` samples of both runs: {throttled} throttled, SM clock "
            f"{'/'.join(str(c) for c in sorted(clocks))} MHz. A size whose verdict flips between runs of the same "
            "code on an unthrottled card is a between-run difference this design does not explain: one run's "
            "verdict there is not a finding.", ""]


def false_positive_context(c: dict) -> str:
    """How often an exactly calibrated 5 % test would show at least this many A/A false positives in these groups."""
    from scipy.stats import binom

    n = c["groups"]
    k = round(c["aa_false_positive_rate"] * n)
    return (f"{k} A/A false positives in {n} groups is what an exactly calibrated 5 % test gives at least that often "
            f"with probability {binom.sf(k - 1, n, 0.05):.2f}: with {n} groups the ≤ 5 % criterion cannot tell a "
            "calibrated test from a slightly anti-conservative one, in either direction.")


def agreement_line() -> str:
    """Do the two designs agree on the name comparisons both ran?"""
    def verdicts(run):
        e = analysis_gpu.name_effects(analysis_gpu.load(analysis.results_dir(run)))
        return {(r.group_id, r.name_template): (r.runtime_verdict, r.ratio_vs_baseline) for r in e.itertuples()}

    a, b = verdicts(DESIGN), verdicts(PAIRS)
    both = [k for k in a if k in b]
    directed = [k for k in both if a[k][0] in ("faster", "slower") and b[k][0] in ("faster", "slower")]
    same = sum(a[k][0] == b[k][0] for k in directed)
    corr = float(np.corrcoef([a[k][1] for k in both], [b[k][1] for k in both])[0, 1])
    return (f"On the {len(both)} name comparisons both runs made, the ratios correlate at r = {corr:.3f}; where both "
            f"designs found a direction ({len(directed)}), it is the same in {same}; the verdicts are equal in "
            f"{sum(a[k][0] == b[k][0] for k in both)} of {len(both)}.")


def explain_section() -> list[str]:
    """What ncu's stall samples say about the name effects (``ptxprobe explain``), from the committed profiles."""
    out = ["**Why, from the hardware** (`ptxprobe explain`, ncu warp-stall sampling of one launch per name with the "
           "timing's inputs; `explain.json` in the run directories). ncu ratio = baseline ÷ variant elapsed cycles; "
           "stall changes as a share of the baseline's samples; \"beyond noise\" = aligned instructions whose samples "
           "differ by more than 3σ of Poisson noise:", "",
           "| group | name | same code | timed ratio | ncu ratio | samples | largest stall changes | beyond noise |",
           "|---|---|---|---|---|---|---|---|"]
    groups = [g for run in (DESIGN_USER, DESIGN, SWEEP_EXPLAIN)
              for g in json.loads((analysis.results_dir(run) / "explain.json").read_text())["groups"]]
    for g in groups:
        base = g["samples"]["baseline"]
        top = sorted(g["stall_delta"].items(), key=lambda kv: -abs(kv[1]))[:3]
        said = ", ".join(f"{k.removeprefix('stall_')} {v / base:+.1%}" for k, v in top)
        out.append(f"| `{g['group_id']}` | `{g['variant']}` | {'yes' if g['identical_code'] else 'no'} | "
                   f"{g['timing']['ratio_vs_baseline']:.4f} | {g['ncu_ratio_vs_baseline']:.4f} | "
                   f"{base} → {g['samples']['variant']} | {said} | {g['checks']['instructions_beyond_noise']} of "
                   f"{g['checks']['aligned_rows']} |")
    joined = sum(g["checks"]["joined_all_samples"] and not any(g["checks"]["opcode_mismatches"].values())
                 for g in groups)
    same = [g for g in groups if g["identical_code"]]
    seen = sum(g["checks"]["instructions_beyond_noise"] for g in same)
    chance = sum(g["checks"]["aligned_rows"] for g in same) * 0.0027  # two-sided 3-sigma tail
    signs = [g["checks"]["duration_sign_agrees"] for g in groups if g["checks"]["duration_sign_agrees"] is not None]
    out += ["", f"Every sample joined to an instruction at its offset, with the opcode ncu shows equal to ptxprobe's, "
            f"in {joined} of {len(groups)} comparisons; ncu's cycle ratio has the timing's sign in {sum(signs)} of "
            f"{len(signs)} with a timed direction (ncu profiles one launch after flushing the caches, its "
            "default `--cache-control all`, which ptxprobe leaves alone; the timing is warm and back to back). "
            f"The identical-code controls have {seen} instructions beyond noise "
            f"where chance alone gives about {chance:.1f}, so the renamed kernels' changes are not sampling noise. "
            "Pairing single instructions inside a rescheduled loop is by shape, so "
            "the per-loop and per-reason totals are the robust reading, not single instruction pairs.", ""]
    return out


def noise_section() -> list[str]:
    t = analysis_gpu.throttling(analysis.results_dir(DESIGN))
    out = [f"**Where the noise comes from** (`{DESIGN}`, the baseline's samples): the card's power management. "
           "Kernels that never hit the power limit hold the boost clock and have the narrowest A/A intervals:", "",
           "| kernel | causal | groups | samples throttled (NVML) | median SM clock | median A/A 95 % half-width |",
           "|---|---|---|---|---|---|"]
    out += [f"| {r.family} | {'yes' if r.causal else 'no'} | {r.groups} | {r.throttled:.0%} | "
            f"{r.sm_clock_mhz:.0f} MHz | {r.aa_half_width * 100:.2f} % |" for r in t.itertuples()]
    c = analysis_gpu.calibration(analysis.results_dir(LONG))
    out += ["", f"Longer samples are not the cure: `{LONG}` timed the power-capped persistent fp16 kernel with 50 ms "
            f"samples and 1 s of warm-up per label ({c['groups']} groups before its time limit): A/A half-width median "
            f"{c['aa_halfwidth_median'] * 100:.2f} %, planted slowdowns detected "
            + ", ".join(f"{float(f) * 100:g} %: {p:.0%}" for f, p in sorted(c["power"].items(),
                                                                           key=lambda x: float(x[0])))
            + "; the planted sizes measured larger than planted there ("
            + ", ".join(f"{float(f) * 100:g} % → {m * 100:.2f} %" for f, m in
                        sorted(c["planted_measured_fraction_median"].items(), key=lambda x: float(x[0]))) + ").", ""]
    return out


RUN = re.compile(r"\b20\d\d-\d\d-\d\d-[a-z0-9][a-z0-9.-]*[a-z0-9]")

HEAD = ["# Findings", "",
        "Generated by `python experiments/findings/render.py` from the run directories committed under "
        "`experiments/results/` (each with `manifest.json`: command, experiment, input and tool sha256, host; GPU runs "
        "add `gpu.json`, `calibration.json` and the raw per-sample times in `runtime.jsonl`). Nothing here is typed "
        "by hand: `python experiments/findings/render.py --check` (run by `tests/study/test_readme.py`) fails if "
        "this file and the data disagree. How the GPU numbers are measured: [docs/gpu-method.md](docs/gpu-method.md). "
        "Every section ends with the run directories it read.", "", JUDGED_NOW, ""]


# one figure per question: file under docs/figures/, its alt text, the function that draws it (SVG text)
FIGURE_LIST = {
    "machine-code": ("machine-code.svg", "Share of kernels whose machine code the cutlass_ name (and the control "
                     "xutlass_) changes, per arch and ptxas release", machine_code_figure),
    "speed": ("speed.svg", "cutlass_ throughput ratios with their intervals per kernel, problem and ptxas in the run "
              "with every default, with the equivalence margin and the A/A band", measurement.speed_figure),
    "external": ("other-kernels.svg", "CuTe DSL kernels under their own name and the Gluon Hopper attention under "
                 "cutlass_, each beside its control, with intervals", external_kernels.figure),
    "atlas": ("atlas.svg", "Share of each atlas cell's kernels whose machine code the trigger changes, per ptxas "
              "release, and per library the register change it brings", atlas_figure.figure),
    "measurement": ("measurement.svg", "A/A half-widths per group, median and maximum against the goals, and planted "
                    "slowdowns as measured, across the runs of the interleaved design", measurement.measurement_figure),
}


def render_figures() -> dict[str, str]:
    """File name under docs/figures/ -> SVG text, one per question."""
    return {name: draw() for name, _, draw in FIGURE_LIST.values()}


def section(title: str, intro: str, lines: list[str], figure: str | None = None) -> list[str]:
    """A question's section: its figure, its lines, then the run directories they name."""
    runs = sorted(set(RUN.findall("\n".join(lines))))
    tail = ["", "Run directories: " + ", ".join(f"`{r}`" for r in runs) + "."] if runs else []
    fig = []
    if figure:
        name, alt, _ = FIGURE_LIST[figure]
        fig = [f"![{alt}](docs/figures/{name})", ""]
    return [f"## {title}", "", intro, "", *fig, *lines, *tail, ""]


def findings() -> str:
    out = [*HEAD, *section(
        "Does the name change the machine code?",
        "Static results, no GPU: each kernel assembled under the baseline name, `cutlass_` and a same-length "
        "control, by arch and by ptxas release, repeated until ptxas's own run-to-run spread is known.",
        [*matrix_section(), *triggers_section(), *static_section(), "", *options_section()], "machine-code")]
    out += section("What in a kernel makes the name matter", reduction.INTRO, reduction.section())
    out += section(
        "Does it change speed? (H200)",
        "Calibrated GPU runs on an H200 (the interleaved design with its defaults unless said otherwise), and what "
        "ncu's stall samples say about the differences.",
        [*measurement.cutlass_two_runs(), "", *measurement.interleaved_effects(), *sgemm_repeat_line(),
         *explain_section()], "speed")
    out += section("Which name, ptxas and options are fastest? (tune on the H200)", tuning.INTRO,
                   [*proof.section(), *proof.gpu_section(), *proof.program_race_section(), *regime.section(),
                    *regime.sampled_section(), *regime.cute_section(), *tuning.section()])
    out += section(
        "Other people's kernels",
        "Kernels nobody here wrote (CuTe DSL, Triton's fused-attention tutorial and Gluon example, Inductor's "
        "kernels of a torch.compile'd block), and a Gluon Hopper attention written to match the state of the art.",
        [*external_kernels.external_section(), "", *measurement.programs_section(), *external_kernels.gluon_hopper()],
        "external")
    out += section("The name in the wild (the atlas)", atlas.INTRO,
                   [*atlas.section(), *atlas.shipped_section(), *atlas.prune_check_section(), *atlas.reduce_section(),
                    *atlas.triton_section(), *atlas_speed.trial_section(), *atlas_cost.section(),
                    *atlas.standing()], "atlas")
    out += section(
        "How good is the measurement?",
        "The timing design against its goals (A/A half-widths, A/A false positives, planted slowdowns found, GPU "
        "time), where the noise comes from, `repro` of a whole study, and what a sweep costs.",
        [*measurement.timing_design(), *remeasured.section(), *stopping.section(), *stopping.serial_section(),
         *stopping.gpu_cost_section(), *stopping.stopping_cost_section(), *stopping.warmup_cost_section(),
         *noise_section(), *cost.bench_section(), *cost.ray_bench_section()],
        "measurement")
    out += section(
        "Appendix: superseded designs",
        "Runs with the earlier full-round and paired designs, kept because later choices rest on them. Runs "
        "that nothing here rests on left the tree; git keeps them: the first two GPU test logs "
        "(`2026-12-02-h200-gpu-tests`, `-v2`, superseded by what is now `2026-12-02-h200-gpu-tests`) are at "
        f"commit `{REMOVED_RUNS_COMMIT}`.",
        [*runtime_section(), *design_comparison()])
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def render() -> str:
    return findings()


def main() -> int:
    new = render()
    readme = index.render(new, RUN)
    figs = render_figures()
    if "--check" in sys.argv:
        stale = [] if FINDINGS.exists() and FINDINGS.read_text() == new else [FINDINGS.name]
        stale += [] if index.README.exists() and index.README.read_text() == readme else ["experiments/README.md"]
        stale += [f"docs/figures/{n}" for n, svg in figs.items()
                  if not (FIGURES / n).exists() or (FIGURES / n).read_bytes() != svg.encode()]
        stale += [f"docs/figures/{p.name} (drawn by nothing)" for p in sorted(FIGURES.glob("*.svg"))
                  if p.name not in figs]
        if stale:
            import matplotlib

            print(f"differs from the committed results: {', '.join(stale)}; run python experiments/findings/render.py"
                  f" (figures are compared byte for byte; drawn here with matplotlib {matplotlib.__version__})")
            return 1
        return 0
    FINDINGS.write_text(new)
    index.README.write_text(readme)
    FIGURES.mkdir(parents=True, exist_ok=True)
    for p in FIGURES.glob("*.svg"):
        if p.name not in figs:
            p.unlink()
    for n, svg in figs.items():
        (FIGURES / n).write_bytes(svg.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
