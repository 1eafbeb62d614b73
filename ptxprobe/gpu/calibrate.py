"""Calibration that can fail, in every GPU group: planted slowdowns of verified size, judged like the names.

A planted slowdown is the baseline's own unit (k launches) with a spin kernel (``torch.cuda._sleep``)
appended whose length is set from a measured cycles-to-milliseconds rate so that it adds
``fraction`` of the baseline unit's time; it is timed exactly like a name (same design, same unit).
Its *measured* ratio is reported; a plant whose
measured size is off by more than a quarter (or its own interval) fails verification, and a
calibration with a failed plant, a missed 1 % plant or too many A/A "differences" fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.graphs import GraphSample, Unit
from ptxprobe.gpu.plan import PLANTED
from ptxprobe.gpu.timing import Nvml, TimingPlan, paired_estimate, time_block
from ptxprobe.stats import paired as stats

AA_LABELS = ("{base}#AA1", "{base}#AA2")


def names_compared(templates: list[str], identical: list[str]) -> list[tuple[str, str]]:
    """The names block's compared pairs, in the order its run orders are drawn: each timed name against the
    baseline, then the two A/A copies (names with the baseline's machine code are not timed)."""
    return [(templates[0], t) for t in templates[1:] if t not in identical] + [AA_LABELS]


def planted_label(fraction: float) -> str:
    return f"{{base}}#planted{fraction * 100:g}%"


@dataclass(frozen=True)
class SleepRate:
    """What a ``torch.cuda._sleep`` launch in a graph costs: ``ms_per_cycle * cycles + overhead_ms``."""

    ms_per_cycle: float
    overhead_ms: float


def sleep_rate() -> SleepRate:
    """Fit the cost of a sleep launch from graphs of short and long sleeps (slope and intercept): the intercept
    is the launch's own cost, which a plant in a 1 ms unit cannot ignore."""
    torch = require_gpu()
    n, short, long = 20, 20_000, 400_000
    per = []
    for cycles in (short, long):
        g = GraphSample(lambda c=cycles: torch.cuda._sleep(c), n)
        per.append(float(np.median([g.replay_ms() for _ in range(5)])) / n)
    slope = (per[1] - per[0]) / (long - short)
    return SleepRate(slope, max(0.0, per[0] - slope * short))


@dataclass(frozen=True)
class Plant:
    fraction: float
    cycles: int


def plants(base_unit_ms: float, rate: SleepRate, fractions=PLANTED) -> list[Plant]:
    """Sleep lengths that add ``fraction`` of the unit's time, the launch's own cost included."""
    return [Plant(f, max(1, int(round((f * base_unit_ms - rate.overhead_ms) / rate.ms_per_cycle)))) for f in fractions]


def calibration_block(base: Unit, plan: TimingPlan, seed: int, nvml: Nvml | None = None,
                      fractions: tuple[float, ...] = PLANTED, order_seed: int | None = None) -> dict:
    """Time the baseline's unit against its planted slowdowns (a block of its own) and judge each like a name
    (``order_seed`` draws the run orders, ``seed`` the bootstraps)."""
    torch = require_gpu()
    g = GraphSample(base.fn, base.k)
    sample_ms = float(np.median([g.replay_ms() for _ in range(3)]))  # the unit's time, measured
    del g
    rate = sleep_rate()
    units = {"{base}": base}
    chosen = plants(sample_ms, rate, fractions)
    for p in chosen:
        units[planted_label(p.fraction)] = Unit(base.fn, base.k, sample_ms * (1 + p.fraction),
                                                tail=lambda c=p.cycles: torch.cuda._sleep(c))
    samples, seconds = time_block(units, plan, [("{base}", planted_label(p.fraction)) for p in chosen],
                                  seed if order_seed is None else order_seed, nvml)
    out = {"gpu_seconds": seconds, "sample_ms": sample_ms, "ms_per_sleep_cycle": rate.ms_per_cycle,
           "sleep_overhead_ms": rate.overhead_ms, "unit_launches": base.k, "planted": {}}
    for p in chosen:
        label = planted_label(p.fraction)
        logs, iv = paired_estimate(samples["{base}"], samples[label], plan, seed)
        measured = 1.0 / iv.estimate - 1.0
        tolerance = max(0.25 * p.fraction, 2 * stats.half_width(iv))
        out["planted"][f"{p.fraction:g}"] = {
            "label": label, "cycles": p.cycles, "ratio": iv.estimate, "ratio_ci_low": iv.low,
            "ratio_ci_high": iv.high, "measured_fraction": measured, "verdict": stats.decide(iv, plan.margin),
            "detected": iv.high < 1.0,  # found slower, whatever its size (slower or negligible)
            "verified": abs(measured - p.fraction) <= tolerance, "rounds": len(logs), "ci_method": plan.interval,
        }
    out["samples"] = {label: s.to_json() for label, s in samples.items()}
    return out


CRITERIA = {"aa_false_positive_rate_max": 0.05, "power_min": {"0.005": 0.95, "0.01": 1.0}}


def summarize(groups: list[dict], criteria: dict | None = None) -> dict:
    """calibration.json: A/A false-positive rate, power per planted size, half-widths, pass or fail and why."""
    crit = {**CRITERIA, **(criteria or {})}
    aa = [g["aa"] for g in groups if g.get("aa")]
    fp = [a["runtime_verdict"] in stats.SIGNIFICANT for a in aa]
    hws = [a["half_width"] for a in aa]
    power, measured, unverified = {}, {}, []
    planted_in = {}
    for f in (f"{x:g}" for x in PLANTED):
        rows = [rec for g in groups if (rec := (g.get("calibration") or {}).get("planted", {}).get(f))]
        planted_in[f] = len(rows)
        if rows:
            power[f] = float(np.mean([r["detected"] for r in rows]))
            measured[f] = float(np.median([r["measured_fraction"] for r in rows]))
            for g in groups:
                rec = (g.get("calibration") or {}).get("planted", {}).get(f)
                if rec and not rec["verified"]:
                    unverified.append(f"{g['group_id']}: planted {f} measured {rec['measured_fraction']:.4f}")
    fp_rate = float(np.mean(fp)) if fp else None
    failures = []
    if fp_rate is not None and fp_rate > crit["aa_false_positive_rate_max"]:
        failures.append(f"A/A false-positive rate {fp_rate:.2f} > {crit['aa_false_positive_rate_max']}")
    calibrated = any(g.get("calibration") for g in groups)
    for f, need in crit["power_min"].items():
        if calibrated and f not in power:
            failures.append(f"planted {float(f) * 100:g}% was planted in no group")
        elif f in power and power[f] < need:
            failures.append(f"planted {float(f) * 100:g}% detected in {power[f]:.0%} of groups (< {need:.0%})")
    failures += [f"plant not of its stated size: {u}" for u in unverified]
    return {
        "groups": len(groups),
        "aa_false_positive_rate": fp_rate,
        "aa_halfwidth_median": float(np.median(hws)) if hws else None,
        "aa_halfwidth_max": float(np.max(hws)) if hws else None,
        "power": power,
        "planted_in_groups": planted_in,
        "planted_measured_fraction_median": measured,
        "gpu_seconds": float(sum(g.get("gpu_seconds", 0.0) for g in groups)),
        "criteria": crit,
        "passed": not failures,
        "failures": failures,
    }
