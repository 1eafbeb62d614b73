"""Statistics of GPU timings: raw per-launch times, paired per-round log ratios, intervals and verdicts.

Kept apart from the GPU code so it is tested on CPU. The unit of pairing is the round: each compared pair
runs together in every round (interleaved in one CUDA graph, or back to back), so slow drifts of the clock or
the card's temperature hit both alike and cancel in the per-round log ratio.
"""

from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass

import numpy as np

from ptxprobe.stats import serial

FASTER, SLOWER = "faster", "slower"


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    level: float = 0.95


def median_ms(times_ms) -> float:
    return float(np.median(np.asarray(times_ms, dtype=float)))


def spread(times_ms) -> float:
    """Interquartile range over the median: one label's own sample-to-sample noise."""
    q1, q3 = np.percentile(np.asarray(times_ms, dtype=float), [25, 75])
    return float((q3 - q1) / median_ms(times_ms))


def bootstrap_median(times: tuple[float, ...], n_boot: int = 4000, level: float = 0.95, seed: int = 0) -> Interval:
    x = np.asarray(times, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    meds = np.median(x[idx], axis=1)
    a = (1 - level) / 2
    return Interval(float(np.median(x)), float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a)), level)


def throughput_interval(times_ms, amount: float, **kw) -> Interval:
    """``amount`` (FLOPs, bytes) per launch as a rate in units of 1e12 per second, with a bootstrap interval of
    the median launch time (a label's own rate; comparisons of two labels use the paired log ratios below)."""
    t = bootstrap_median(tuple(times_ms), **kw)
    conv = amount / 1e9  # amount / (ms * 1e-3) / 1e12
    return Interval(conv / t.estimate, conv / t.high, conv / t.low, t.level)


# --- the paired design: per-round log ratios, Hodges-Lehmann intervals, TOST, Benjamini-Hochberg --------------

EQUIVALENT, INCONCLUSIVE = "equivalent", "inconclusive"
NEGLIGIBLE = "negligible"  # significant, and the whole interval inside 1 +- margin
STRADDLES_MARGIN = "straddles_margin"  # significant, the interval across 1 + margin (or 1 - margin): size not shown
SIGNIFICANT = (FASTER, SLOWER, STRADDLES_MARGIN, NEGLIGIBLE)  # verdicts that claim an effect (an A/A false positive)
BEYOND_MARGIN = (FASTER, SLOWER)  # the effect shown larger than the margin: what "faster" and "slower" mean
VERDICT_RULE = "margin+bh"  # rows judged by ``decide`` with their q-value record this in ``verdict_rule``
SIGNIFICANCE_RULE = "interval+bh"  # the rule before: faster / slower whenever significant (runs of 2026-12-02..05)
BH_RULES = (VERDICT_RULE, SIGNIFICANCE_RULE)  # rules whose verdicts wait for the run's q-values (logs hold them before)
EQUIVALENCE_MARGIN = 0.005  # the default TOST margin on a throughput ratio (± 0.5 %); docs/gpu-method.md says why
IDENTICAL_CODE = "identical-code"  # not timed: the name's machine code is the baseline's


def log_ratios(base_ms, other_ms) -> np.ndarray:
    """Per-round paired contrasts log(base / other): > 0 means ``other`` is faster in that round."""
    a, b = np.asarray(base_ms, dtype=float), np.asarray(other_ms, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs equal round counts ({a.size} vs {b.size})")
    return np.log(a) - np.log(b)


def hodges_lehmann(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The median of all pairwise (Walsh) averages: a robust location with the efficiency of the mean.

    The pairwise sums are partitioned in place around the middle and halved at the end (a power of two: the
    result is bitwise ``np.median`` of the averages), half the time of the bootstraps that call it per resample."""
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    if x.shape[-1] == 0:
        return np.full(x.shape[:-1], np.nan)[()]
    i, j = np.triu_indices(x.shape[-1])
    sums = x[..., i]
    sums += x[..., j]
    k = sums.shape[-1] // 2
    if sums.shape[-1] % 2:
        out = np.partition(sums, k, axis=-1)[..., k] / 2.0
    else:
        mid = np.partition(sums, (k - 1, k), axis=-1)
        out = (mid[..., k - 1] + mid[..., k]) / 4.0
    return np.where(np.isnan(x).any(axis=-1), np.nan, out)[()]  # a NaN makes the median NaN, as np.median says


SERIAL_SIGNED_RANK = "signed-rank-hac"  # the signed-rank interval widened for serial correlation (stats.serial)
INTERVAL_METHODS = (SERIAL_SIGNED_RANK, "signed-rank", "bca")  # the first is the default; the others as runs recorded


@functools.cache
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T <= t), t = 0 .. n(n+1)/2, of the Wilcoxon signed-rank statistic of n values under symmetry about 0."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):  # each rank k is in the positive set or not
        counts[k:] = counts[k:] + counts[: counts.size - k]
    return np.cumsum(counts) / 2.0**n


def signed_rank_bounds(x: np.ndarray, level: float) -> tuple[float, float]:
    """The exact distribution-free interval of the Hodges-Lehmann estimate: order statistics of the Walsh
    averages at the signed-rank test's critical value. Covers at >= ``level`` for any number of rounds when the
    per-round contrasts are independent and symmetric about the true shift (what a balanced order gives)."""
    i, j = np.triu_indices(x.size)
    return _walsh_bounds(np.sort((x[i] + x[j]) / 2.0), x.size, level)


def _walsh_bounds(walsh: np.ndarray, n: int, level: float) -> tuple[float, float]:
    """``signed_rank_bounds`` from the sorted Walsh averages of ``n`` values (a p-value's bisection sorts once)."""
    k = int(np.searchsorted(_signed_rank_cdf(n), (1.0 - level) / 2.0, side="right"))
    return (float(walsh[0]), float(walsh[-1])) if k == 0 else (float(walsh[k - 1]), float(walsh[walsh.size - k]))


def paired_interval(logs, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                    method: str = SERIAL_SIGNED_RANK) -> Interval:
    """Throughput ratio (exp of the Hodges-Lehmann estimate of the log ratios) with an interval:
    ``signed-rank-hac`` (the default: the exact signed-rank interval widened about the estimate by
    ``serial.widening``, valid where rounds are serially correlated), ``signed-rank`` (exact under independent
    rounds; the runs of 2026-12-03..05) or ``bca`` (scipy's BCa bootstrap; the earlier committed runs). BCa
    covered 92.7 % at 20 rounds in the simulated interleaved design, the signed-rank interval 94.6 %
    (tests/test_design_stats.py); on the committed name comparisons whose rounds are correlated the signed-rank
    interval undercovers and the widened one does not (experiments/analysis/serial_correlation.py)."""
    from scipy.stats import bootstrap

    if method not in INTERVAL_METHODS:
        raise ValueError(f"interval {method!r}: choose one of {', '.join(INTERVAL_METHODS)}")
    x = np.asarray(logs, dtype=float)
    est = float(hodges_lehmann(x))
    if x.size < 3 or np.all(x == x[0]):
        return Interval(float(np.exp(est)), float(np.exp(est)), float(np.exp(est)), level)
    if method in (SERIAL_SIGNED_RANK, "signed-rank"):
        lo, hi = signed_rank_bounds(x, level)
        if method == SERIAL_SIGNED_RANK:
            w = serial.widening(x, level)
            lo, hi = est - (est - lo) * w, est + (hi - est) * w
        return Interval(float(np.exp(est)), float(np.exp(lo)), float(np.exp(hi)), level)
    res = bootstrap((x,), hodges_lehmann, n_resamples=n_boot, confidence_level=level, method="BCa",
                    random_state=np.random.default_rng(seed), vectorized=True, axis=-1)
    lo, hi = res.confidence_interval
    if not (np.isfinite(lo) and np.isfinite(hi)):  # degenerate resamples: fall back to the percentile interval
        res = bootstrap((x,), hodges_lehmann, n_resamples=n_boot, confidence_level=level, method="percentile",
                        random_state=np.random.default_rng(seed), vectorized=True, axis=-1)
        lo, hi = res.confidence_interval
    return Interval(float(np.exp(est)), float(np.exp(lo)), float(np.exp(hi)), level)


def decide(iv: Interval, margin: float = EQUIVALENCE_MARGIN, q_value: float | None = None) -> str:
    """The verdict on one comparison (the rule ``VERDICT_RULE`` names): ``faster`` and ``slower`` only beyond the
    margin.

    *Significant* means the interval excludes 1 and, when the comparison is one of several (``q_value`` given),
    the multiplicity-adjusted test rejects at the interval's own level: Benjamini-Hochberg q <= 1 - level, the
    q over the run's name comparisons (``gpu.dispatch.with_q_values``) or over one ``compare`` call's. A significant
    interval is ``faster`` when its low end is above 1 + margin, ``slower`` when its high end is below 1 - margin,
    ``negligible`` when it lies inside 1 +- margin (an effect found, smaller than the margin: its sign does not
    reproduce across runs), and ``straddles_margin`` otherwise (a difference whose size is not shown either way).
    Not significant: ``equivalent`` when the interval lies inside 1 +- margin (TOST), else ``inconclusive``.
    Without ``q_value`` the test is the interval's own (one comparison: the signed-rank test it inverts)."""
    verdict = decide_significant(iv, margin, q_value)
    if verdict == FASTER and iv.low <= 1.0 + margin or verdict == SLOWER and iv.high >= 1.0 - margin:
        return STRADDLES_MARGIN
    return verdict


def decide_significant(iv: Interval, margin: float = EQUIVALENCE_MARGIN, q_value: float | None = None) -> str:
    """The rule runs recorded as ``SIGNIFICANCE_RULE``: faster / slower whenever significant and not inside the
    margin, however close to it. Kept to recompute committed verdicts as they were judged; ``decide`` judges."""
    inside = iv.low >= 1.0 - margin and iv.high <= 1.0 + margin
    excludes = iv.low > 1.0 or iv.high < 1.0
    if excludes and (q_value is None or q_value <= 1.0 - iv.level + 1e-12):
        if inside:
            return NEGLIGIBLE
        return FASTER if iv.low > 1.0 else SLOWER
    return EQUIVALENT if inside else INCONCLUSIVE


def decide_by_interval(iv: Interval, margin: float = EQUIVALENCE_MARGIN) -> str:
    """The rule the runs recorded before ``VERDICT_RULE`` (rows without ``verdict_rule``): faster / slower when
    the interval excludes 1, whatever its size and q; equivalent inside 1 +- margin; inconclusive otherwise.
    Kept to recompute committed verdicts, never to judge a new run."""
    if iv.low > 1.0:
        return FASTER
    if iv.high < 1.0:
        return SLOWER
    if iv.low >= 1.0 - margin and iv.high <= 1.0 + margin:
        return EQUIVALENT
    return INCONCLUSIVE


def _stored_interval(row: dict) -> Interval:
    return Interval(row["ratio_vs_baseline"], row["ratio_ci_low"], row["ratio_ci_high"], row.get("ci_level", 0.95))


def recorded_decision(row: dict, margin: float = EQUIVALENCE_MARGIN) -> str:
    """A stored row's verdict recomputed from its stored interval under the rule it was recorded with."""
    iv, rule = _stored_interval(row), row.get("verdict_rule")
    if rule == VERDICT_RULE:
        return decide(iv, margin, row.get("q_value"))
    if rule == SIGNIFICANCE_RULE:
        return decide_significant(iv, margin, row.get("q_value"))
    return decide_by_interval(iv, margin)


def recorded_method(rows, absent: str) -> str:
    """The interval method stored records name in ``ci_method`` (the first that names one), else ``absent``: what
    records of that kind used before they named it (sweep rows: ``bca``; program A/Bs: ``signed-rank``)."""
    return next((r["ci_method"] for r in rows if r.get("ci_method")), absent)


def current_decision(row: dict, margin: float = EQUIVALENCE_MARGIN) -> str:
    """A stored row judged again from its stored interval (and q-value, where it has one) under today's rule."""
    return decide(_stored_interval(row), margin, row.get("q_value"))


def decisive_rounds(family: int, level: float = 0.95) -> int:
    """The fewest rounds at which one comparison of ``family`` can come out significant after Benjamini-Hochberg:
    the exact signed-rank test's smallest p is 2 / 2^n (every round of one sign), and the best comparison alone
    among ``family`` gets q = p * family. One comparison needs 6 rounds (5 give p >= 0.0625); five need 8. Fewer
    rounds make every verdict ``inconclusive`` whatever the data, as a program race of 6 rounds over five codes did
    on the H200 (a 4.8 % gain in every round, q 0.052)."""
    if family < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"decisive_rounds: family >= 1 and 0 < level < 1 (got {family}, {level})")
    return max(3, math.ceil(math.log2(2.0 * family / (1.0 - level)) - 1e-12))


def signed_rank_pvalue(logs) -> float:
    """The exact two-sided Wilcoxon signed-rank p-value of 'no difference', counted on the Walsh averages as
    ``signed_rank_bounds`` counts them: p <= 1 - level exactly when that interval excludes 0, so the test the
    q-values adjust and the interval the verdict reads are one procedure."""
    x = np.asarray(logs, dtype=float)
    if x.size == 0 or np.all(x == 0):
        return 1.0
    i, j = np.triu_indices(x.size)
    walsh = (x[i] + x[j]) / 2.0
    below = int(np.sum(walsh < 0)) + int(np.sum(walsh == 0)) // 2
    tail = min(below, walsh.size - below)
    return float(min(1.0, 2.0 * _signed_rank_cdf(x.size)[tail]))


def paired_pvalue(logs, method: str = SERIAL_SIGNED_RANK) -> float:
    """The p-value of 'no difference' that ``paired_interval(logs, method=method)`` inverts: p <= 1 - level exactly
    when that interval excludes 1 (the widened interval's by bisection over the level, to 1e-9, never below the
    2 / 2^n the signed-rank test can reach; the other methods read the signed-rank test, as their runs recorded
    it)."""
    if method != SERIAL_SIGNED_RANK:
        return signed_rank_pvalue(logs)
    x = np.asarray(logs, dtype=float)
    if x.size < 3:
        return 1.0
    if np.all(x == x[0]):  # a deterministic measure: the interval is the point, the test the signed-rank's
        return signed_rank_pvalue(x)

    i, j = np.triu_indices(x.size)
    walsh, est, long_run = np.sort((x[i] + x[j]) / 2.0), float(hodges_lehmann(x)), serial.long_run_ratio(x)

    def excludes(level: float) -> bool:  # paired_interval's widened interval at ``level``, its sort and ratio reused
        lo, hi = _walsh_bounds(walsh, x.size, level)
        w = serial.widening(x, level, long_run=long_run)
        return float(np.exp(est - (est - lo) * w)) > 1.0 or float(np.exp(est + (hi - est) * w)) < 1.0

    # the highest level the exact signed-rank interval reaches: 1 - 2 / 2^n (all rounds of one sign); beyond it
    # the interval stays [min, max] of the Walsh averages and would claim a p below what n rounds can show
    lo, hi = 0.0, 1.0 - min(1.0, 2.0 * float(_signed_rank_cdf(x.size)[0]))
    if excludes(hi):
        return 1.0 - hi
    if not excludes(1e-9):
        return 1.0
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if excludes(mid) else (lo, mid)
    return float(1.0 - lo)


def ratio_of_means(base_ms, other_ms) -> float:
    """Mean time of the baseline over mean time of the other, over the paired rounds (> 1: other faster):
    the ratio of expected times, the estimand a throughput claim is about, reported beside the Hodges-Lehmann
    ratio (the pseudo-median of per-round log ratios; the two differ when the per-round ratios are skewed)."""
    a, b = np.asarray(base_ms, dtype=float), np.asarray(other_ms, dtype=float)
    return float(np.mean(a) / np.mean(b))


def contaminated(iv: Interval, ratio_of_means_: float) -> bool:
    """Whether the ratio of means and the Hodges-Lehmann estimate part by more than the interval's half-width (in
    log terms): the mark of one-sided outliers (a few slow rounds of one arm, as a program's stray runs give) that
    move a mean and not a pseudo-median, so the two answer different questions and neither should be quoted
    alone."""
    if not (iv.estimate > 0 and iv.low > 0 and iv.high > 0 and ratio_of_means_ > 0):
        return False
    return bool(abs(np.log(ratio_of_means_) - np.log(iv.estimate)) > (np.log(iv.high) - np.log(iv.low)) / 2.0)


def half_width(iv: Interval) -> float:
    return (iv.high - iv.low) / 2.0


def bh_qvalues(pvalues) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order."""
    p = np.asarray(pvalues, dtype=float)
    n = p.size
    if n == 0:
        return []
    order = np.argsort(p)
    ranked = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return [float(v) for v in out]


def holm_adjusted(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: rejecting where they are <= alpha keeps the chance of
    any false rejection in the family at alpha (what "the run reproduces" needs: one false divergence fails it)."""
    p = np.asarray(pvalues, dtype=float)
    n = p.size
    if n == 0:
        return []
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (n - np.arange(n)))
    out = np.empty(n)
    out[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in out]


def random_orders(labels: list[str], rounds: int, seed: int = 0) -> list[list[str]]:
    """A fresh random order every round: no label always follows the same one (carry-over averages out)."""
    rng = np.random.default_rng(seed)
    return [[labels[i] for i in rng.permutation(len(labels))] for _ in range(rounds)]


def random_pair_orders(pairs: list[tuple[str, str]], rounds: int, seed: int = 0) -> list[list[tuple[str, str]]]:
    """Per round, every compared pair back to back: the pairs in a fresh random order, each pair's two labels in
    a random order too. Who runs first is *balanced*, not just random: over the ``rounds`` each label of a pair
    goes first in half of them (in a random sequence), so a penalty of running first cancels exactly. On the
    H200 the label first in a graph replay measures slower (the study's gpu_runs.first_in_replay; FINDINGS.md
    gives by how much); a coin per round that happened to put one A/A copy first in 15 of 20 rounds, shared by every
    group of a sweep, failed the calibration (experiments/results/2026-12-03-h200-interleaved-fast-coin-orders)."""
    rng = np.random.default_rng(seed)
    first = []
    for _ in pairs:
        heads = np.array([True] * (rounds // 2) + [False] * (rounds // 2) + [bool(rng.random() < 0.5)] * (rounds % 2))
        first.append(rng.permutation(heads))
    out = []
    for r in range(rounds):
        order = []
        for i in rng.permutation(len(pairs)):
            a, b = pairs[i]
            order.append((a, b) if first[i][r] else (b, a))
        out.append(order)
    return out


def stable_seed(seed: int, key: str) -> int:
    """A seed of its own for ``key`` (a group id), stable across processes and runs: each group of a sweep gets
    its own random orders instead of all sharing one sequence (whose chance imbalance every group would share)."""
    return (seed * 1_000_003 + zlib.crc32(key.encode())) % (1 << 31)


def pair_series(a_label: str, a_times: list, a_partners: dict | None, b_label: str, b_times: list,
                b_partners: dict | None) -> tuple[list, list]:
    """The two series a comparison pairs round by round: the samples taken back to back with each other when the
    block timed this pair (the paired design), else every label's one sample per round (the full-round design)."""
    if a_partners and b_partners and b_label in a_partners and a_label in b_partners:
        return a_partners[b_label], b_partners[a_label]
    return a_times, b_times


def sequential_level(rounds: int, min_rounds: int, batch: int, level: float = 0.95) -> float:
    """The confidence level for an interval looked at after ``rounds`` rounds of an adaptive run: the miss rate
    ``1 - level`` divided by the number of looks taken (first at ``min_rounds``, then every ``batch``).

    A prespecified level, not alpha spending and not an anytime-valid sequence: as a union bound it would not
    hold (the misses allowed at looks 1..k add up to (1 - level) x (1 + 1/2 + ... + 1/k), 15 % for 11 looks).
    Coverage holds because the stopping rule reads half-widths only, never the estimate; the rising level makes
    blocks that look often conservative and costs them rounds. Validated by simulation across heavy tails,
    contamination, drift, the first-in-replay penalty, three pairs per block and overflow
    (experiments/analysis/stopping_simulation.py, with the level left at ``level`` as a counterfactual). The
    signed-rank interval alone fails under it where rounds are serially correlated, as some committed name
    comparisons' are (not their A/A rounds): hence the default interval's widening (``stats.serial``), validated on
    those series (experiments/analysis/serial_correlation.py)."""
    looks = 1 + max(0, -(-(rounds - min_rounds) // max(1, batch)))
    return 1.0 - (1.0 - level) / looks
