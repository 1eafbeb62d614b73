"""The regime a comparison was measured in: the card's clock, throttling and power over its rounds, and whether the
gain moves with the clock.

A gain is a property of a kernel *and* of the state of the card that ran it. On a power-capped card the same FFMA
kernel gained +4.9 % in bursts of 40 launches and +3.4 % held for seconds at the power cap (experiments/results
2026-12-04-h200-burst-length); one comparison of the defaults study read +2.24 % or +2.76 % by the run's median
clock. So every verdict and gain carries a ``Regime``: which regime (``burst``: short interleaved units, both codes
under one clock; ``sustained``: each arm held alone for seconds), the SM clock (median and interquartile range)
over the compared rounds, the share of rounds throttled, the power against the card's limit, the median per-round
clock difference between the arms (0 where they share the clock), and ``ClockSlope``: the per-round log ratio
regressed on the per-round clock.

The slope's interval uses the long-run variance of ``stats.serial`` (Bartlett weights read against fixed-b
critical values) on the regression's score, with the bandwidth at the whole run (b = 1), because the clock and the
ratio both wander over rounds: an ordinary least-squares interval, or the comparison's own sqrt(n) bandwidth, flags
two independent walks of lag-1 0.6-0.8 as dependent in 10-20 % of series (tests/test_regime.py simulates both). The
long-run variance is never taken below the heteroscedasticity-robust one, and the critical value is the fixed-b one
of the estimate without that floor, so the interval is *conservative*: simulated, it flags 0-1 % of independent or
moderately persistent series with no dependence and 4-6 % where both wander with lag-1 0.8 (a nominal 5 %), and it
finds a planted slope less often than an exact interval would. A gain is ``clock_dependent`` when the slope's
interval excludes 0: a conservative diagnostic, never a verdict. That flag's false-alarm
rate is measured on committed A/A series with their own recorded clocks (truth: no dependence) and its power on
planted slopes (experiments/analysis/clock_slope.py; FINDINGS.md gives the numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ptxprobe.stats import serial

BURST = "burst"  # short interleaved units, both codes under the one clock of the moment (the default)
SUSTAINED = "sustained"  # each arm held alone for seconds at the card's power limit, after its clock settles
REGIMES = (BURST, SUSTAINED)  # what a command can be asked to measure in (--regime)
PROGRAM = "program"  # a program A/B: each arm a whole run of the program, the card read in the background
RECORDED = (*REGIMES, PROGRAM)
SLOPE_LEVEL = 0.95
MIN_SLOPE_ROUNDS = 8  # fewer paired rounds with a clock reading: no regression
CLOCK_UNIT_MHZ = 100.0  # the slope is the log ratio's change per this many MHz


@dataclass(frozen=True)
class Reading:
    """What NVML said with one sample: SM clock, board power, whether a power or thermal limit held the clock."""

    sm_clock_mhz: float | None
    power_w: float | None
    throttled: bool


@dataclass(frozen=True)
class ClockSlope:
    """The per-round log ratio regressed on the per-round SM clock: its change per 100 MHz with a ``level``
    interval (a HAC sandwich on fixed-b critical values), over ``rounds`` rounds and a clock range of
    ``clock_range_mhz`` (10th to 90th percentile)."""

    per_100mhz: float
    low: float
    high: float
    level: float
    rounds: int
    clock_range_mhz: float

    @property
    def dependent(self) -> bool:
        """The interval excludes 0: the gain moved with the clock over these rounds."""
        return self.low > 0 or self.high < 0


def clock_slope(logs: Sequence[float], clocks: Sequence[float | None], level: float = SLOPE_LEVEL) -> ClockSlope | None:
    """The log ratio's slope on the clock (per 100 MHz) with its interval, or None where it cannot be estimated:
    fewer than ``MIN_SLOPE_ROUNDS`` rounds with a reading, or fewer than three distinct clocks."""
    pairs = [(float(y), float(x)) for y, x in zip(logs, clocks, strict=True) if x is not None and math.isfinite(x)]
    if len(pairs) < MIN_SLOPE_ROUNDS:
        return None
    y, x = (np.array(v) for v in zip(*pairs, strict=True))
    if np.unique(x).size < 3:
        return None
    xc = (x - x.mean()) / CLOCK_UNIT_MHZ
    sxx = float(np.dot(xc, xc))
    b = float(np.dot(xc, y - y.mean()) / sxx)
    score = xc * (y - y.mean() - b * xc)
    lags = score.size - 1  # b = 1: the clock and the ratio can both wander for the whole run
    lrv = float(serial._bartlett_sums(score - score.mean(), lags))
    lrv = max(lrv, float(np.dot(score, score)))  # never narrower than the heteroscedasticity-robust sandwich
    se = math.sqrt(lrv) / sxx
    crit = serial.fixed_b_critical(score.size, level, lags)
    p10, p90 = np.percentile(x, [10, 90])
    return ClockSlope(b, b - crit * se, b + crit * se, level, int(score.size), float(p90 - p10))


def median_of(values) -> float | None:
    """The median of the values that were read (None where none was): a clock or a power over readings."""
    vals = [float(v) for v in values if v is not None]
    return float(np.median(vals)) if vals else None


@dataclass(frozen=True)
class Regime:
    """The regime of one comparison's paired rounds (both arms' readings) and its clock slope."""

    regime: str
    rounds: int
    sm_clock_mhz: float | None  # median over both arms' readings
    sm_clock_iqr_mhz: float | None
    clock_delta_mhz: float | None  # median per-round clock of the other arm minus the baseline's (0: one clock)
    throttled_share: float | None  # share of readings with a power or thermal limit holding the clock
    power_w: float | None  # median board power
    power_limit_w: float | None  # the limit the card enforced (None: not recorded)
    slope: ClockSlope | None

    @property
    def power_share(self) -> float | None:
        return self.power_w / self.power_limit_w if self.power_w and self.power_limit_w else None

    @property
    def clock_dependent(self) -> bool | None:
        return None if self.slope is None else self.slope.dependent

    def fields(self) -> dict:
        """The flat columns a row carries (``ROW_FIELDS``)."""
        s = self.slope
        return {"regime": self.regime, "clock_mhz": self.sm_clock_mhz, "clock_iqr_mhz": self.sm_clock_iqr_mhz,
                "clock_delta_mhz": self.clock_delta_mhz, "throttled_share": self.throttled_share,
                "power_w": self.power_w, "power_limit_w": self.power_limit_w,
                "clock_slope_per_100mhz": s.per_100mhz if s else None, "clock_slope_low": s.low if s else None,
                "clock_slope_high": s.high if s else None, "clock_dependent": self.clock_dependent}

    @classmethod
    def from_fields(cls, row: dict) -> Regime | None:
        """A row's regime back from its columns (None for rows recorded before regimes were)."""
        if row.get("regime") is None:
            return None
        slope = None
        if row.get("clock_slope_per_100mhz") is not None:
            slope = ClockSlope(row["clock_slope_per_100mhz"], row["clock_slope_low"], row["clock_slope_high"],
                               SLOPE_LEVEL, int(row.get("rounds") or 0), float("nan"))
        return cls(row["regime"], int(row.get("rounds") or 0), row.get("clock_mhz"), row.get("clock_iqr_mhz"),
                   row.get("clock_delta_mhz"), row.get("throttled_share"), row.get("power_w"),
                   row.get("power_limit_w"), slope)


ROW_FIELDS = tuple(Regime(BURST, 0, None, None, None, None, None, None, None).fields())


def regime_of(regime: str, logs: Sequence[float], base: Sequence[Reading], other: Sequence[Reading],
              power_limit_w: float | None) -> Regime:
    """The regime of paired rounds: ``logs[i]`` the round's log ratio, ``base[i]``/``other[i]`` each arm's
    reading in that round (the same reading twice where both ran in one graph)."""
    if regime not in RECORDED:
        raise ValueError(f"regime {regime!r}: choose one of {', '.join(RECORDED)}")
    both = [*base, *other]
    clocks = [r.sm_clock_mhz for r in both if r.sm_clock_mhz is not None]
    iqr = float(np.subtract(*np.percentile(clocks, [75, 25]))) if clocks else None
    deltas = [o.sm_clock_mhz - b.sm_clock_mhz for b, o in zip(base, other, strict=True)
              if o.sm_clock_mhz is not None and b.sm_clock_mhz is not None]
    per_round = [None if b.sm_clock_mhz is None or o.sm_clock_mhz is None else (b.sm_clock_mhz + o.sm_clock_mhz) / 2
                 for b, o in zip(base, other, strict=True)]
    read = [r for r in both if r.sm_clock_mhz is not None or r.power_w is not None]
    return Regime(regime, len(logs), median_of(clocks), iqr, median_of(deltas),
                  sum(r.throttled for r in read) / len(read) if read else None, median_of(r.power_w for r in both),
                  power_limit_w, clock_slope(logs, per_round) if len(per_round) == len(logs) else None)
