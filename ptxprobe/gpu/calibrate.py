"""Calibration that can fail, in every GPU group: planted slowdowns timed beside the names, judged like them.

The plants are labels of the names block itself (``names_compared``): each is paired with the baseline in the same
rounds and the same stopping as the names, so their power is the power the names' verdicts had. A *sleep plant*
is the baseline's own unit (k launches) with a spin kernel (``torch.cuda._sleep``) appended whose length is set
from a measured cycles-to-milliseconds rate so that it adds ``fraction`` of the unit's time (0.2 % to 2 %). The
*code plant* is the baseline's PTX with a small dependent chain in its hot loop (``ptx.plant``), assembled by the
same ptxas and loaded like a name: a real machine-code change of unknown effect (more work, yet a new schedule can
be faster), reported with its direction, never counted as power.

A sleep plant's size is known only as well as it is measured: before the block, the unit and the unit then the
sleep are replayed in turn (``size_plant``) and their mean log ratio is the plant's *sized* fraction with its
standard error. The block's measurement of the plant agrees with it when their difference is within the level's
z times the two standard errors combined (``judge_plant``). On the H200 the sleep set from a fitted rate alone came
out 0.65-1.46 times its nominal 0.2 % (the fit's own noise, 0.05-0.1 % of the unit), so a nominal size covered by a
0.06 % interval tested the sizing, not the measurement. At the level some plants of the right size disagree, so a
calibration fails on the sizes only when more do than that level allows (the exact binomial bound).
A plant whose sizing rules out its stated size did not slow the unit as stated (on a power-capped card a sleep can
give its time back as clock) and tests no power: it is *undelivered*, said apart and left out of the power
(``delivered``). A calibration also fails on a missed 0.5 % or 1 % plant or too many A/A "differences"; ``summarize``
states the Clopper-Pearson bounds of the A/A false-positive rate and of each plant's power, ``pooled`` the same over
runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.graphs import GraphSample, Unit
from ptxprobe.gpu.plan import CODE_PLANT, PLANTED
from ptxprobe.stats import bounds, meta
from ptxprobe.stats import paired as stats

AA_LABELS = ("{base}#AA1", "{base}#AA2")
CODE_PLANT_LABEL = "{base}#planted-code"
SIZE_RULE = "sizing"  # plant records judged by ``judge_plant`` against a direct sizing say so in ``size_rule``
# earlier records: "interval" (the nominal size inside the interval; judged the same way), none (within +-25 %)
JUDGED_RULES = ("interval", SIZE_RULE)
# the sustained regime judges a sleep plant by its direction alone: a sleep idles the SMs, the board's power drops and
# the clock rises under the cap, so the compute around it runs faster and the plant reads smaller than it was sized
# (experiments/results/2026-12-05-h200-regime: a 2 % plant read 1.26 %, 1 % read 0.83 %, held alone at 697/700 W)
DIRECTION_RULE = "direction"
SIZING_REPLAYS = 24


def planted_label(kind: float | str) -> str:
    return CODE_PLANT_LABEL if kind == CODE_PLANT else f"{{base}}#planted{float(kind) * 100:g}%"


def plant_key(kind: float | str) -> str:
    """The key a plant's record and summary go under: the fraction as ``f"{f:g}"``, or ``"code"``."""
    return CODE_PLANT if kind == CODE_PLANT else f"{float(kind):g}"


def names_compared(templates: list[str], identical: list[str], plants: tuple = ()) -> list[tuple[str, str]]:
    """The names block's compared pairs, in the order its run orders are drawn: each timed name against the
    baseline, then the two A/A copies (names with the baseline's machine code are not timed), then each plant
    against the baseline."""
    return ([(templates[0], t) for t in templates[1:] if t not in identical] + [AA_LABELS]
            + [(templates[0], planted_label(p)) for p in plants])


@dataclass(frozen=True)
class SleepRate:
    """What a ``torch.cuda._sleep`` launch in a graph costs: ``ms_per_cycle * cycles + overhead_ms``."""

    ms_per_cycle: float
    overhead_ms: float


def sleep_tail(cycles: int) -> Callable[[], None]:
    """A sleep plant's tail: a spin kernel of ``cycles`` launched after the unit's launches."""
    torch = require_gpu()
    return lambda: torch.cuda._sleep(cycles)


def sleep_rate_after(base: Unit, replays: int = 7) -> tuple[float, SleepRate]:
    """The unit's time and the cost of a sleep launched right after it, as a plant runs it: graphs of the unit
    alone, the unit then a short sleep, the unit then a long sleep, replayed in turn (one clock state for all
    three). A sleep counts cycles, so its milliseconds follow the SM clock, which a power-capped card lowers under
    a heavy kernel; fitted on an idle card instead, a plant after such a kernel came out 6 % larger than stated
    (H200, the persistent fp8 attention). The intercept is the sleep launch's own cost, which a plant in a 1 ms
    unit cannot ignore."""
    short, long = 20_000, 400_000
    graphs = [GraphSample(base.fn, base.k), *(GraphSample(base.fn, base.k, tail=sleep_tail(c)) for c in (short, long))]
    times: list[list[float]] = [[], [], []]
    for _ in range(replays):
        for g, t in zip(graphs, times, strict=True):
            t.append(g.replay_ms())
    unit, with_short, with_long = (float(np.median(t)) for t in times)
    slope = (with_long - with_short) / (long - short)
    return unit, SleepRate(slope, max(0.0, with_short - unit - slope * short))


@dataclass(frozen=True)
class Plant:
    fraction: float
    cycles: int


def plants(base_unit_ms: float, rate: SleepRate, fractions=PLANTED) -> list[Plant]:
    """Sleep lengths that add ``fraction`` of the unit's time, the launch's own cost included."""
    return [Plant(f, max(1, int(round((f * base_unit_ms - rate.overhead_ms) / rate.ms_per_cycle)))) for f in fractions]


@dataclass(frozen=True)
class Sizing:
    """A sleep plant's size measured directly: ``fraction`` from the mean log ratio of ``replays`` paired replays
    (the unit, the unit then the sleep), ``se`` that mean's standard error (log units)."""

    fraction: float
    se: float
    replays: int


def sizing_of(log_ratios: np.ndarray) -> Sizing:
    """The pure step of ``size_plant``: per-replay log(planted / plain) to a sized fraction."""
    logs = np.asarray(log_ratios, dtype=float)
    return Sizing(float(np.expm1(logs.mean())), float(logs.std(ddof=1) / math.sqrt(len(logs))), len(logs))


def size_plant(base: Unit, cycles: int, replays: int = SIZING_REPLAYS) -> Sizing:
    """The plant's own size on this card now: graphs of the unit and of the unit then the sleep, replayed in turn
    (which goes first alternates, so a drifting clock cancels)."""
    plain = GraphSample(base.fn, base.k)
    planted = GraphSample(base.fn, base.k, tail=sleep_tail(cycles))
    logs = []
    for i in range(replays):
        first, second = (plain, planted) if i % 2 == 0 else (planted, plain)
        a, b = first.replay_ms(), second.replay_ms()
        logs.append(math.log(b / a) if first is plain else math.log(a / b))
    return sizing_of(np.array(logs))


def delivered(fraction: float, sized_fraction: float | None, sized_se: float | None, level: float) -> bool | None:
    """Whether a sleep plant's direct sizing leaves its stated ``fraction`` possible: the sized log slowdown plus the
    level's z times its standard error reaches log(1 + fraction). On power-capped H100s a 0.5 % sleep after the
    causal fp16 attention at N=16384 was sized near zero in several runs of the defaults study and missed there: a
    plant that did not slow the unit as stated cannot show whether a slowdown of that size is found (left out, found
    or not, so that the power stays an estimate for plants of the stated size). None without a sizing (records
    before it; counted as delivered)."""
    if sized_fraction is None or sized_se is None:
        return None
    return math.log1p(sized_fraction) + meta.z_critical(level) * sized_se >= math.log1p(fraction)


def judge_plant(iv: stats.Interval, fraction: float, margin: float = stats.EQUIVALENCE_MARGIN,
                sized: Sizing | None = None, sustained: bool = False) -> dict:
    """A sleep plant's comparison (baseline vs plant, ratio < 1: the plant is slower) judged: detected when found
    slower (the interval below 1: slower, or negligible inside the margin). Its size: with a direct ``sized``
    measurement, it agrees when the log difference is within the level's z times both standard errors combined
    (the interval's taken from its width); without one, when the interval covers the nominal 1 / (1 + fraction).
    In the ``sustained`` regime its size is not judged (``DIRECTION_RULE``): held at the power cap a sleep gives
    clock back."""
    out = {"ratio": iv.estimate, "ratio_ci_low": iv.low, "ratio_ci_high": iv.high, "ci_level": iv.level,
           "measured_fraction": 1.0 / iv.estimate - 1.0,
           "measured_fraction_ci": [1.0 / iv.high - 1.0, 1.0 / iv.low - 1.0],
           "verdict": stats.decide(iv, margin), "detected": iv.high < 1.0}
    if sized is not None:
        out["delivered"] = delivered(fraction, sized.fraction, sized.se, iv.level)
    if sustained:
        return {**out, "verified": None, "size_rule": DIRECTION_RULE,
                **({"sized_fraction": sized.fraction, "sized_se": sized.se} if sized else {})}
    if sized is None:
        stated = 1.0 / (1.0 + fraction)
        return {**out, "verified": iv.low <= stated <= iv.high, "size_rule": "interval"}

    z = meta.z_critical(iv.level)
    se_measured = meta.standard_error(iv.low, iv.high, iv.level)
    gap = -math.log(iv.estimate) - math.log1p(sized.fraction)
    return {**out, "sized_fraction": sized.fraction, "sized_se": sized.se, "sized_replays": sized.replays,
            "verified": abs(gap) <= z * math.hypot(se_measured, sized.se), "size_rule": SIZE_RULE}


def judge_code_plant(iv: stats.Interval, margin: float = stats.EQUIVALENCE_MARGIN) -> dict:
    """The code plant's comparison: a known change of machine code whose effect is not known (more work in the
    loop, yet a new schedule can come out faster: the H200 measured one 1.3 % faster), so it is reported with its
    direction and certifies nothing."""
    return {"ratio": iv.estimate, "ratio_ci_low": iv.low, "ratio_ci_high": iv.high, "ci_level": iv.level,
            "measured_fraction": 1.0 / iv.estimate - 1.0, "verdict": stats.decide(iv, margin)}


CRITERIA = {"aa_false_positive_rate_max": 0.05, "power_min": {"0.005": 0.95, "0.01": 1.0}}


# a plant of the stated size misses its interval at most 1 - level of the time (level >= 95 %): the sizes fail
# only when the exact lower bound of the share that missed exceeds that
SIZE_MISS_RATE_MAX = 0.05


def _records(groups: list[dict], key: str) -> list[tuple[str, dict]]:
    return [(g.get("group_id", "?"), rec) for g in groups
            if (rec := (g.get("calibration") or {}).get("planted", {}).get(key))]


def _sizes(groups: list[dict]) -> list[str]:
    """The planted fractions the records hold (today's and any earlier run's), smallest first."""
    keys = {f"{x:g}" for x in PLANTED}
    for g in groups:
        keys |= set((g.get("calibration") or {}).get("planted", {})) - {CODE_PLANT}
    return sorted(keys, key=float)


def plant_delivered(rec: dict, key: str) -> bool | None:
    """``delivered`` for a plant record of any age, from its sizing (records before the rule carry none of
    their own, so the rule is applied to what they stored)."""
    return delivered(float(key), rec.get("sized_fraction"), rec.get("sized_se"), rec.get("ci_level", 0.95))


def delivered_counts(calibration: dict) -> dict[str, tuple[int, int]]:
    """Per planted size in a calibration record: (groups where it was delivered, the power's denominator; groups
    where it was planted but not delivered). Records before the delivery rule count every plant delivered."""
    planted = calibration.get("planted_in_groups") or {}
    given = calibration.get("delivered_in_groups") or {}
    return {f: (given.get(f, n), n - given.get(f, n)) for f, n in planted.items()}


@dataclass(frozen=True)
class PlantCounts:
    """Per planted size (its key): in how many groups it was planted, delivered (``delivered``) and found among
    those, the power and its lower bound over the delivered, the median size measured, how many judged plants
    covered their size; what disagreed with its size or was not delivered, said."""

    planted_in: dict
    delivered_in: dict
    detected_in: dict
    power: dict
    power_low: dict
    measured: dict
    covered: dict
    unverified: list
    size_failures: list
    undelivered: list


def plant_counts(groups: list[dict]) -> PlantCounts:
    planted_in, delivered_in, detected_in, power, power_low, measured, covered = {}, {}, {}, {}, {}, {}, {}
    unverified, size_failures, undelivered = [], [], []
    for f in _sizes(groups):
        rows = _records(groups, f)
        if not rows:
            continue
        planted_in[f] = len(rows)
        given = [(gid, r, plant_delivered(r, f) is not False) for gid, r in rows]
        kept = [r for _, r, ok in given if ok]
        undelivered += [f"{gid}: planted {float(f) * 100:g}% sized {r['sized_fraction']:.3%} (se {r['sized_se']:.3%})"
                        f"{', found' if r['detected'] else ''}" for gid, r, ok in given if not ok]
        delivered_in[f] = len(kept)
        detected_in[f] = int(sum(bool(r["detected"]) for r in kept))
        if kept:
            power[f] = detected_in[f] / len(kept)
            power_low[f] = bounds.cp_lower(detected_in[f], len(kept))
        measured[f] = float(np.median([r["measured_fraction"] for _, r in rows]))
        unverified += [f"{gid}: planted {f} measured {r['measured_fraction']:.4f}" for gid, r in rows
                       if r.get("size_rule") not in (*JUDGED_RULES, DIRECTION_RULE) and not r["verified"]]
        judged = [r for _, r in rows if r.get("size_rule") in JUDGED_RULES]
        if judged:
            covered[f] = int(sum(bool(r["verified"]) for r in judged))
            misses = len(judged) - covered[f]
            if misses and bounds.cp_lower(misses, len(judged)) > SIZE_MISS_RATE_MAX:
                what = ("disagreed with its direct sizing" if all(r["size_rule"] == SIZE_RULE for r in judged)
                        else "missed the stated size")
                size_failures.append(f"planted {float(f) * 100:g}%: its interval {what} in {misses} "
                                     f"of {len(judged)} groups (more than {SIZE_MISS_RATE_MAX:.0%} allows)")
    return PlantCounts(planted_in, delivered_in, detected_in, power, power_low, measured, covered, unverified,
                       size_failures, undelivered)


def calibration_failures(fp_rate: float | None, counts: PlantCounts, crit: dict, calibrated: bool) -> list[str]:
    """Why a calibration fails: A/A false positives over the bound, a size planted nowhere or found too seldom, a
    plant not of its stated size."""
    failures = []
    if fp_rate is not None and fp_rate > crit["aa_false_positive_rate_max"]:
        failures.append(f"A/A false-positive rate {fp_rate:.2f} > {crit['aa_false_positive_rate_max']}")
    for f, need in crit["power_min"].items():
        if calibrated and f not in counts.planted_in:
            failures.append(f"planted {float(f) * 100:g}% was planted in no group")
        elif calibrated and f not in counts.power:
            failures.append(f"planted {float(f) * 100:g}% slowed the unit as stated in no group (undelivered)")
        elif f in counts.power and counts.power[f] < need:
            failures.append(f"planted {float(f) * 100:g}% detected in {counts.power[f]:.0%} of groups (< {need:.0%})")
    return failures + [f"plant not of its stated size: {u}" for u in counts.unverified] + counts.size_failures


def code_plant_summary(groups: list[dict]) -> dict | None:
    """The code plant's effect is unknown, so no power: how often it changed the speed, and which way; the groups
    where it could not be planted, and why."""
    out = None
    code = _records(groups, CODE_PLANT)
    if code:
        out = {"planted_in_groups": len(code),
               "slower_in_groups": int(sum(r["ratio_ci_high"] < 1.0 for _, r in code)),
               "faster_in_groups": int(sum(r["ratio_ci_low"] > 1.0 for _, r in code)),
               "measured_fraction_median": float(np.median([r["measured_fraction"] for _, r in code]))}
    skipped = {g.get("group_id", "?"): why for g in groups
               if (why := (g.get("calibration") or {}).get("code_plant_skipped"))}
    if skipped:
        out = {**(out or {"planted_in_groups": 0}), "not_planted": skipped}
    return out


def summarize(groups: list[dict], criteria: dict | None = None) -> dict:
    """calibration.json: A/A false-positive rate, power per planted size, half-widths, pass or fail and why, with
    the exact one-sided 95 % bounds of the false-positive rate (upper) and of each plant's power (lower).

    Records of any age summarize: plants judged by ``judge_plant`` (``size_rule``) fail on their sizes only when
    more disagree with their size than ``SIZE_MISS_RATE_MAX`` allows; earlier records (a calibration block of
    their own, sizes judged within a quarter) keep their recorded ``verified``, one unverified plant failing."""
    crit = {**CRITERIA, **(criteria or {})}
    aa = [g["aa"] for g in groups if g.get("aa")]
    fp = [a["runtime_verdict"] in stats.SIGNIFICANT for a in aa]
    hws = [a["half_width"] for a in aa]
    counts = plant_counts(groups)
    fp_rate = float(np.mean(fp)) if fp else None
    failures = calibration_failures(fp_rate, counts, crit, any(g.get("calibration") for g in groups))
    if counts.covered:  # the rule the sizes were judged by, stated where it applied
        crit = {**crit, "plant_size_miss_rate_max": SIZE_MISS_RATE_MAX}
    out = {
        "groups": len(groups),
        "aa_false_positive_rate": fp_rate,
        "aa_halfwidth_median": float(np.median(hws)) if hws else None,
        "aa_halfwidth_max": float(np.max(hws)) if hws else None,
        "power": counts.power,
        "planted_in_groups": counts.planted_in,
        "delivered_in_groups": counts.delivered_in,
        "undelivered": counts.undelivered,
        "planted_measured_fraction_median": counts.measured,
        "gpu_seconds": float(sum(g.get("gpu_seconds", 0.0) for g in groups)),
        "criteria": crit,
        "passed": not failures,
        "failures": failures,
        # what the counts certify (Clopper-Pearson, one-sided 95 %)
        "aa_false_positives": int(sum(fp)),
        "aa_false_positive_upper_95": bounds.cp_upper(int(sum(fp)), len(fp)),
        "detected_in_groups": counts.detected_in,
        "power_lower_95": counts.power_low,
    }
    if counts.covered:
        out["planted_size_covered_in_groups"] = counts.covered
    code = code_plant_summary(groups)
    if code:
        out["code_plant"] = code
    return out


BOUND_KEYS = ("groups", "aa_false_positives", "aa_false_positive_rate", "aa_false_positive_upper_95", "power",
              "planted_in_groups", "delivered_in_groups", "detected_in_groups", "power_lower_95",
              "planted_size_covered_in_groups", "code_plant")


def pooled(runs: list[list[dict]]) -> dict:
    """Several runs' group records (``RunDir.groups`` of each) counted together: the pooled A/A false-positive
    rate and each plant's power with their Clopper-Pearson bounds (groups are independent: each draws its own
    orders, and runs are separate processes), and the runs' own bounds beside them."""
    every = summarize([g for run in runs for g in run])
    return {"runs": len(runs), **{k: every[k] for k in BOUND_KEYS if k in every},
            "per_run": [{k: s[k] for k in BOUND_KEYS if k in s} for s in (summarize(run) for run in runs)]}
