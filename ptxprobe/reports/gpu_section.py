"""The GPU answer of a report, drawn first when a run has GPU data: each renamed name's throughput ratio vs the
baseline name with its interval, per kernel, problem size and ptxas, as a forest plot (a pure SVG: the group's A/A
interval as a grey band, the ±margin equivalence band shaded), the numerics beside each mark, and the calibration in
words with the bounds it was judged by.
"""

from __future__ import annotations

import re

from ptxprobe.core.display import problem_label
from ptxprobe.gpu.calibrate import CRITERIA, delivered_counts
from ptxprobe.ptx.labels import table_names
from ptxprobe.runs.rundir import RunDir
from ptxprobe.stats import paired as stats
from ptxprobe.stats.paired import BEYOND_MARGIN, STRADDLES_MARGIN
from ptxprobe.stats.regime import Regime

ROW_LABEL_WIDTH = 48  # characters of a kernel label in the plot (shortened as in the terminal answer)
CHAR_W = 7.4  # px per character of an 11.5 px label, generously: label columns are sized from their longest text
PLOT_W = 500  # the ratio axis (px)
NAME_COL_W = 200  # the verdict and numerics of each name, right of the axis
LANE_H, ROW_PAD, HEAD_H, AXIS_H = 9, 6, 48, 34
SHAPES = ("circle", "square", "triangle", "diamond")
TICK_STEPS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def natural(text: str) -> tuple:
    """A sort key that orders the numbers inside a label by value: N=1024 < N=4096 < N=16384, 12.4 < 12.10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))


def group_order(row: dict) -> tuple:
    """Where a timed group's rows go in every table and plot: kernel, problem size (numerically), ptxas release."""
    return natural(row["kernel"]), natural(problem_label(row)), natural(row.get("run_ptxas_version") or "")


def is_comparison(row: dict) -> bool:
    """A renamed name timed (or not: identical code) against its baseline name; not the baseline itself, an A/A
    copy, a planted control or another implementation (SDPA)."""
    label = row.get("label") or ""
    return not row.get("is_baseline") and "{base}" in label and "#" not in label


def is_aa(row: dict) -> bool:
    return (row.get("label") or "").startswith("{base}#AA")


def verdict_of(row: dict) -> str:
    return row.get("runtime_verdict") or row.get("runtime_verdict_vs_floor") or "unknown"


def said(verdict: str) -> str:
    """A verdict as words: ``no_difference`` -> 'no difference' (the first GPU design's verdicts)."""
    return verdict.replace("_", " ")


def groups_word(n) -> str:
    return f"{n} group" if n == 1 else f"{n} groups"


def margin_of(rd: RunDir) -> float:
    """The equivalence margin the run judged by: its groups' timing plan, its experiment's timing, or the default."""
    for g in rd.groups:
        if (g.get("timing_plan") or {}).get("margin") is not None:
            return float(g["timing_plan"]["margin"])
    timing = ((rd.manifest.get("experiment") or {}).get("run") or {}).get("timing") or {}
    return float(timing.get("margin", stats.EQUIVALENCE_MARGIN))


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.0208 -> '2.1 %', 0.05 -> '5 %' (digits after the point, a whole number bare)."""
    if x is None:
        return "-"
    text = f"{100 * x:.{digits}f}"
    return (text.rstrip("0").rstrip(".") if "." in text and float(text) == round(100 * x) else text) + " %"


def signed_pct(ratio: float, digits: int = 2) -> str:
    """A ratio as a signed change: 1.0123 -> '+1.23 %' (a minus sign, not a hyphen); ``digits=None``: as few as
    needed (axis ticks)."""
    d = 100 * (ratio - 1)
    if abs(d) < 1e-9:
        return "0"
    return (f"{d:+g} %" if digits is None else f"{d:+.{digits}f} %").replace("-", "−")


def numerics_text(row: dict) -> str:
    """bitwise equal / max ULP of one comparison, as the plot prints beside its mark."""
    bitwise, ulp = row.get("bitwise_equal_to_baseline"), row.get("max_ulp_vs_baseline")
    if bitwise is True:
        return "bitwise ="
    if bitwise is False and row.get("within_baseline_spread"):  # the baseline differs from itself that much
        return f"max ULP {ulp}, within the baseline's own spread ({row.get('baseline_self_max_ulp')})"
    if bitwise is False:
        return f"max ULP {ulp}" if ulp is not None else "not bitwise ="
    return "numerics not checked"


def regime_text(regime: Regime | None) -> str:
    """A verdict's or a gain's regime in one cell: which regime, the SM clock (median ± half its IQR; the arms'
    difference where they did not share it), the share throttled, the power against its limit (a run recorded
    without a limit shows the power alone), and a clock-dependent gain's slope."""
    if regime is None:
        return "-"
    parts = [regime.regime]
    if regime.sm_clock_mhz is not None:
        clock = f"{regime.sm_clock_mhz:.0f}±{(regime.sm_clock_iqr_mhz or 0) / 2:.0f} MHz"
        if regime.clock_delta_mhz:
            clock += f" (Δ{regime.clock_delta_mhz:+.0f})"
        parts.append(clock)
    if regime.throttled_share is not None:
        parts.append(f"throttled {100 * regime.throttled_share:.0f}%")
    if regime.power_w is not None:
        parts.append(f"{regime.power_w:.0f}/{regime.power_limit_w:.0f} W" if regime.power_limit_w
                     else f"{regime.power_w:.0f} W")
    if regime.clock_dependent:
        parts.append(f"clock-dependent {100 * regime.slope.per_100mhz:+.2f}%/100 MHz")  # type: ignore[union-attr]
    return ", ".join(parts)


def _ticks(lo: float, hi: float) -> list[float]:
    step = next((s for s in TICK_STEPS if (hi - lo) / s <= 8), TICK_STEPS[-1])
    first = -(-lo // step) * step
    return [round(first + i * step, 6) for i in range(int((hi - first) / step + 1e-9) + 1)]


def aa_bands(rows: list[dict], compared: list[dict]) -> dict[str, tuple[float, float]]:
    """Each group's A/A interval: from its comparison rows, else (runs from before the A/A interval was on every
    row) from the A/A copy's own row."""
    aa = {r["group_id"]: (r["aa_ci_low"], r["aa_ci_high"]) for r in compared if r.get("aa_ci_low") is not None}
    for r in rows:
        if is_aa(r) and r.get("ratio_ci_low") is not None:
            aa.setdefault(r["group_id"], (r["ratio_ci_low"], r["ratio_ci_high"]))
    return aa


def ratio_range(compared: list[dict], bands: list[tuple[float, float]], margin: float) -> tuple[float, float]:
    """The axis: every estimate and interval shown, the A/A bands and the margin, padded by 8 %."""
    values = [1 - margin, 1 + margin, *(v for band in bands for v in band)]
    for r in compared:
        values += [v for v in (r.get("ratio_ci_low"), r.get("ratio_ci_high"), r.get("ratio_vs_baseline")) if v]
    pad = 0.08 * (max(values) - min(values))
    return min(values) - pad, max(values) + pad


def forest_mark(r: dict, name: str, lane: int, y: float, row_h: float, x, right: float) -> dict:
    """One name's mark in one row: its estimate and interval (or 1 where the code is the baseline's), its tip."""
    cy = y + ROW_PAD / 2 + LANE_H * lane + LANE_H / 2
    timed = r.get("ratio_vs_baseline") is not None and r.get("ratio_ci_low") is not None
    verdict = verdict_of(r)
    tip = (f"{r['kernel']} {r['name']} · {problem_label(r)} · ptxas {r.get('run_ptxas_version')}: "
           + (f"ratio {r['ratio_vs_baseline']:.4f} [{r['ratio_ci_low']:.4f}, {r['ratio_ci_high']:.4f}]"
              if timed else "identical machine code, not timed")
           + f" · {verdict} · {numerics_text(r)}")
    return {
        "name": name, "shape": SHAPES[lane % len(SHAPES)], "verdict": verdict, "y": round(cy, 1),
        "text_y": y + row_h / 2 + 4,
        "x": x(r["ratio_vs_baseline"]) if timed else x(1.0), "timed": timed,
        "x0": x(r["ratio_ci_low"]) if timed else None, "x1": x(r["ratio_ci_high"]) if timed else None,
        "tip": tip, "numerics": numerics_text(r),
        "said": f"{signed_pct(r['ratio_vs_baseline'])} {said(verdict)}" if timed else "identical code",
        "col": right + NAME_COL_W * lane,
        "bitwise": r.get("bitwise_equal_to_baseline"),
    }


def forest(rows: list[dict], templates: list[str], margin: float) -> dict:
    """The forest plot's geometry: one row per (kernel, problem, ptxas), one lane and one mark per name in it."""
    compared = [r for r in rows if is_comparison(r)]
    if not compared:
        return {}
    names = [t for t in templates if any(r["label"] == t for r in compared)]
    names += sorted({r["label"] for r in compared} - set(names))
    groups: dict[str, list[dict]] = {}
    for r in compared:
        groups.setdefault(r["group_id"], []).append(r)
    aa = aa_bands(rows, compared)
    shown = table_names([r["kernel"] for r in compared], ROW_LABEL_WIDTH)
    lo, hi = ratio_range(compared, [band for gid, band in aa.items() if gid in groups], margin)
    ordered = sorted(groups, key=lambda gid: group_order(groups[gid][0]))
    labels = [(shown[groups[g][0]["kernel"]], problem_label(groups[g][0]), groups[g][0].get("run_ptxas_version") or "")
              for g in ordered]
    cols = [4.0]
    for i, head in enumerate(("kernel", "problem")):
        cols.append(round(cols[-1] + CHAR_W * max(len(head), *(len(lb[i]) for lb in labels)) + 12, 1))
    x0 = round(cols[-1] + CHAR_W * max(5, *(len(lb[2]) for lb in labels)) + 20, 1)

    def x(v: float) -> float:
        return round(x0 + PLOT_W * (v - lo) / (hi - lo), 1)

    right = x0 + PLOT_W + 16
    row_h = ROW_PAD + LANE_H * len(names)
    out_rows, marks, y, last_kernel = [], [], HEAD_H, None
    for gid in ordered:
        first = groups[gid][0]
        band = aa.get(gid, (None, None))
        out_rows.append({
            "y": y, "h": row_h, "kernel": shown[first["kernel"]] if first["kernel"] != last_kernel else "",
            "rule": last_kernel is not None and first["kernel"] != last_kernel,
            "problem": problem_label(first), "ptxas": first.get("run_ptxas_version") or "",
            "aa": {"x": x(band[0]), "w": max(1.0, x(band[1]) - x(band[0]))} if band[0] is not None else None,
        })
        last_kernel = first["kernel"]
        by_name = {r["label"]: r for r in groups[gid]}
        marks += [forest_mark(by_name[name], name, lane, y, row_h, x, right) for lane, name in enumerate(names)
                  if name in by_name]
        y += row_h
    return {
        "names": [{"template": n, "shape": SHAPES[i % len(SHAPES)], "col": right + NAME_COL_W * i}
                  for i, n in enumerate(names)],
        "rows": out_rows, "marks": marks, "top": HEAD_H, "bottom": y, "height": y + AXIS_H,
        "width": right + NAME_COL_W * len(names), "x0": x0, "x1": x0 + PLOT_W, "cols": cols,
        "one": x(1.0), "band": {"x": x(1 - margin), "w": x(1 + margin) - x(1 - margin)},
        "ticks": [{"x": x(t), "label": signed_pct(t, None)} for t in _ticks(lo, hi)], "margin": pct(margin),
    }


def name_tallies(rows: list[dict], templates: list[str]) -> list[dict]:
    """Per renamed name: how many groups judged it faster, slower, ... and its numerics, in words."""
    out = []
    for t in templates:
        mine = [r for r in rows if is_comparison(r) and r["label"] == t]
        if not mine:
            continue
        counts: dict[str, int] = {}
        for r in mine:
            counts[said(verdict_of(r))] = counts.get(said(verdict_of(r)), 0) + 1
        timed = [r["ratio_vs_baseline"] for r in mine if r.get("ratio_vs_baseline") is not None]
        unequal = [r for r in mine if r.get("bitwise_equal_to_baseline") is False]
        checked = [r for r in mine if r.get("bitwise_equal_to_baseline") is not None]
        ulps = [r["max_ulp_vs_baseline"] for r in unequal if r.get("max_ulp_vs_baseline") is not None]
        out.append({
            "template": t, "n": len(mine),
            "counts": [(v.replace(stats.IDENTICAL_CODE, "not timed (identical machine code)"), n)
                       for v, n in sorted(counts.items(), key=lambda kv: -kv[1])],
            "range": (signed_pct(min(timed)), signed_pct(max(timed))) if timed else None,
            "numerics": (f"bitwise equal to the baseline in {len(checked) - len(unequal)} of {len(checked)}"
                         + (f"; max ULP {max(ulps)}" if ulps else "")) if checked else "numerics not checked",
        })
    return out


def calibration_words(calibration: dict | None, groups: list[dict]) -> dict | None:
    """calibration.json as sentences with their bounds (no raw numbers: counts and percentages)."""
    if not calibration:
        return None
    crit = {**CRITERIA, **(calibration.get("criteria") or {})}
    n_aa = sum(1 for g in groups if g.get("aa")) or calibration.get("groups") or 0
    parts = []
    rate = calibration.get("aa_false_positive_rate")
    if rate is not None:
        parts.append(f"A/A false positives {round(rate * n_aa)} of {n_aa} ({pct(rate)}; at most "
                     f"{pct(crit['aa_false_positive_rate_max'])} allowed)")
    planted = []
    counts = delivered_counts(calibration)
    for f, power in sorted((calibration.get("power") or {}).items(), key=lambda kv: float(kv[0])):
        n, undelivered = counts.get(f, (0, 0))  # n: the power's denominator
        need = crit["power_min"].get(f)
        measured = (calibration.get("planted_measured_fraction_median") or {}).get(f)
        planted.append(f"{pct(float(f))} slower found in {round(power * n)} of {groups_word(n)}"
                       + (f" ({undelivered} more not delivered: their sizing ruled the size out)"
                          if undelivered else "")
                       + (f" (at least {pct(need, 0)} required)" if need is not None else "")
                       + (f", measured as {pct(measured, 2)}" if measured is not None else ""))
    if planted:
        parts.append("planted slowdowns (the baseline made slower on purpose): " + "; ".join(planted))
    hw = (calibration.get("aa_halfwidth_median"), calibration.get("aa_halfwidth_max"))
    if hw[0] is not None:
        parts.append(f"A/A interval half-width median {pct(hw[0], 2)}, largest {pct(hw[1], 2)} (the grey bands)")
    seconds = calibration.get("gpu_seconds")
    return {
        "passed": bool(calibration.get("passed")),
        "head": f"GPU calibration {'passed' if calibration.get('passed') else 'FAILED'} over "
                f"{groups_word(calibration.get('groups'))}" + (f" ({seconds:.0f} GPU-seconds)" if seconds else ""),
        "parts": parts,
        "failures": list(calibration.get("failures") or []),
    }


def others_words(rows: list[dict]) -> list[str]:
    """Other implementations timed in the same groups (SDPA backends), as ranges of their ratio: for scale."""
    by: dict[str, list[float]] = {}
    for r in rows:
        label = r.get("label") or ""
        if not r.get("is_baseline") and "{base}" not in label and r.get("ratio_vs_baseline") is not None:
            by.setdefault(label, []).append(r["ratio_vs_baseline"])
    return [f"{label} {min(v):.2f}–{max(v):.2f}×" for label, v in sorted(by.items())]


def speed_answer(rd: RunDir, templates: list[str]) -> dict | None:
    """Everything the report's first section draws, or None for a run without GPU data."""
    rows = rd.runtime_rows() if rd.has_runtime else []
    if not any(is_comparison(r) for r in rows):
        return None
    margin = margin_of(rd)
    return {
        "forest": forest(rows, templates, margin),
        "tallies": name_tallies(rows, templates),
        "groups": len({r["group_id"] for r in rows if is_comparison(r)}),
        "margin": pct(margin),
        "level": next((r["ci_level"] for r in rows if r.get("ci_level")), 0.95),
        "calibration": calibration_words(rd.calibration, rd.groups),
        "others": others_words(rows),
        "table": group_rows(rows, templates),
    }


def group_rows(rows: list[dict], templates: list[str]) -> list[dict]:
    """One record per timed group (kernel, problem, ptxas) for the terminal: each name's ratio, interval and verdict,
    and the group's largest timed change (what the condensed answer ranks by)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if is_comparison(r):
            groups.setdefault(r["group_id"], []).append(r)
    out = []
    for members in sorted(groups.values(), key=lambda rs: group_order(rs[0])):
        first, names = members[0], {}
        for r in members:
            timed = r.get("ratio_vs_baseline") is not None and r.get("ratio_ci_low") is not None
            names[r["label"]] = {"verdict": verdict_of(r), "ratio": r.get("ratio_vs_baseline"),
                                 "said": (f"{signed_pct(r['ratio_vs_baseline'])} [{_bare(r['ratio_ci_low'])}, "
                                          f"{_bare(r['ratio_ci_high'])}] {said(verdict_of(r))}")
                                 if timed else "same code"}
        ratios = [abs(v["ratio"] - 1) for v in names.values() if v["ratio"] is not None]
        out.append({"kernel": first["kernel"], "problem": problem_label(first),
                    "ptxas": first.get("run_ptxas_version") or "", "names": names,
                    "changes": any(v["verdict"] in BEYOND_MARGIN for v in names.values()),
                    "straddles": any(v["verdict"] == STRADDLES_MARGIN for v in names.values()),
                    "largest": max(ratios, default=0.0)})
    return out


def _bare(ratio: float) -> str:
    """An interval end as a signed change without its unit (the estimate before it carries the %)."""
    return signed_pct(ratio).removesuffix(" %")
