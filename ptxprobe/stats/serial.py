"""Serial correlation of per-round contrasts: the lag-1 diagnostic and the factor that keeps an interval valid.

A comparison's rounds are not always independent: some of the committed H200 name comparisons have a lag-1
autocorrelation well above 0 (power-capped persistent fp8 kernels whose clock wanders over seconds), and an interval
that assumes independence then covers less than it says (experiments/analysis/serial_correlation.py measures how
much, on those series resampled through the stopping rule; FINDINGS.md gives its numbers). The remedy here is the
long-run variance: the Bartlett (Newey-West) estimate with a bandwidth that grows with the rounds, read against
*fixed-b* critical values (the studentized mean's own distribution at this many rounds and this bandwidth, so the
noise of the variance estimate at 20-60 rounds is paid for, where the normal quantile would undercover). It is
applied to every comparison, never switched on by a pretest, and only ever widens: a series whose estimated
long-run variance is below its plain variance keeps the plain width times the fixed-b critical value's ratio.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np

FIXED_B_DRAWS = 40_000  # independent normal series per (rounds, bandwidth): the critical value's Monte Carlo
FIXED_B_SEED = 20261205


def lag1(x) -> float:
    """The lag-1 autocorrelation of a series about its mean (0 for fewer than 3 values or a constant series)."""
    c = np.asarray(x, dtype=float)
    c = c - c.mean() if c.size else c
    den = float(np.dot(c, c))
    return float(np.dot(c[1:], c[:-1]) / den) if c.size >= 3 and den > 0 else 0.0


def bandwidth(n: int) -> int:
    """The Bartlett bandwidth at ``n`` rounds: ceil(sqrt(n)), 5 lags at 20 rounds, 8 at 60. Wider than the
    textbook n^(1/3) because the runs' correlated series wander over several rounds, and the fixed-b critical
    value pays for the width (experiments/analysis/serial_correlation.py compares the two)."""
    return max(1, math.isqrt(max(0, n - 1)) + 1) if n > 1 else 1


def _bartlett_sums(c: np.ndarray, lags: int) -> np.ndarray:
    """sum_t c_t^2 + 2 sum_k (1 - k/(lags+1)) sum_t c_t c_{t-k} over the last axis (c already centred)."""
    n = c.shape[-1]
    s = np.einsum("...i,...i->...", c, c)
    for k in range(1, min(lags, n - 1) + 1):
        s = s + 2.0 * (1.0 - k / (lags + 1.0)) * np.einsum("...i,...i->...", c[..., k:], c[..., : n - k])
    return s


def long_run_ratio(x, lags: int | None = None) -> float:
    """The Bartlett long-run variance over the plain variance (1 for independent rounds; (1+r)/(1-r) for an AR(1)
    of lag-1 r as the rounds grow): how much wider than an independence interval an honest one must be, squared."""
    c = np.asarray(x, dtype=float)
    if c.size < 3:
        return 1.0
    c = c - c.mean()
    g0 = float(np.dot(c, c))
    return float(_bartlett_sums(c, bandwidth(c.size) if lags is None else lags) / g0) if g0 > 0 else 1.0


@functools.cache
def _studentized_abs(n: int, lags: int) -> np.ndarray:
    """Sorted |mean / Bartlett standard error| of ``FIXED_B_DRAWS`` independent standard-normal series of ``n``."""
    z = np.random.default_rng(FIXED_B_SEED + 1000 * n + lags).standard_normal((FIXED_B_DRAWS, n))
    c = z - z.mean(axis=1, keepdims=True)
    s = np.maximum(_bartlett_sums(c, lags), 1e-300)
    return np.sort(np.abs(z.mean(axis=1)) / np.sqrt(s / n / n))


def fixed_b_critical(n: int, level: float, lags: int | None = None) -> float:
    """The two-sided critical value of the Bartlett-studentized mean of ``n`` independent normal rounds at
    ``level``: larger than the normal quantile by what estimating the long-run variance from so few rounds
    costs (the fixed-b view: the bandwidth a fixed share of the rounds)."""
    lags = bandwidth(n) if lags is None else lags
    a = _studentized_abs(n, lags)
    # np.quantile's linear interpolation, read off the sorted draws directly (a p-value's bisection asks ~30 levels)
    h = level * (a.size - 1)
    i = min(int(math.floor(h)), a.size - 1)
    g, lo, hi = h - i, float(a[i]), float(a[min(i + 1, a.size - 1)])
    return lo + (hi - lo) * g if g < 0.5 else hi - (hi - lo) * (1.0 - g)


def widening(x, level: float, lags: int | None = None, long_run: float | None = None) -> float:
    """The factor an independence interval of ``x`` at ``level`` is widened by: sqrt(max(1, long-run ratio)) times
    the fixed-b critical value over the normal quantile, both at ``lags`` (default ``bandwidth``). >= 1 always
    (1 below 3 rounds, where nothing is judged). Below a level of 50 % the quantiles' ratio is read at 50 % (both
    quantiles go to 0 and their ratio to noise; such levels only serve to invert the interval into a p-value above
    0.5)."""
    n = np.asarray(x).size
    if n < 3:
        return 1.0
    level = min(max(level, 0.5), 1.0 - 1e-12)
    ratio = fixed_b_critical(n, level, lags) / NormalDist().inv_cdf((1.0 + level) / 2.0)
    long_run = long_run_ratio(x, lags) if long_run is None else long_run
    return math.sqrt(max(1.0, long_run)) * max(1.0, ratio)
