"""Exact (Clopper-Pearson) one-sided bounds of a rate from k events in n trials: what a calibration certifies.

A calibration that saw k A/A false positives in n groups certifies the false-positive rate only up to the upper
bound (0 of 48 certifies <= 6.1 %, not 0 %); a plant detected in k of n groups certifies power only down to the
lower bound. The bounds are the beta quantiles of the exact binomial test (scipy's), one-sided at ``confidence``.
"""

from __future__ import annotations

from scipy.stats import beta

CONFIDENCE = 0.95


def cp_upper(k: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided upper ``confidence`` bound of a rate seen k times in n (None without trials)."""
    if n <= 0:
        return None
    if k >= n:
        return 1.0
    return float(beta.ppf(confidence, k + 1, n - k))


def cp_lower(k: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided lower ``confidence`` bound of a rate seen k times in n (None without trials)."""
    if n <= 0:
        return None
    if k <= 0:
        return 0.0
    return float(beta.ppf(1.0 - confidence, k, n - k + 1))


def rate_with_bounds(k: int, n: int, confidence: float = CONFIDENCE) -> dict:
    """k of n as a record: the count, the trials, the rate and both one-sided bounds."""
    return {"k": int(k), "n": int(n), "rate": k / n if n else None, "lower": cp_lower(k, n, confidence),
            "upper": cp_upper(k, n, confidence), "confidence": confidence}
