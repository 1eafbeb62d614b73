"""The first GPU design's statistics, kept only to re-read the committed runs it judged (the findings' appendix).

That design ran every label once per round in rotated order and compared medians: a paired bootstrap of the
ratio of median times, "faster/slower" when the interval excludes 1 (``no_difference`` otherwise), and later
the same against an A/A noise floor. The tool now judges per-round log ratios (``ptxprobe.stats.paired``).
"""

from __future__ import annotations

import numpy as np

from ptxprobe.api import FASTER, SLOWER, Interval

NO_DIFFERENCE = "no_difference"


def paired_ratio(base_ms, other_ms, n_boot: int = 4000, level: float = 0.95, seed: int = 0) -> Interval:
    """Throughput of ``other`` relative to ``base`` (> 1: other is faster), resampling whole rounds."""
    a, b = np.asarray(base_ms, dtype=float), np.asarray(other_ms, dtype=float)
    if a.size != b.size:
        raise ValueError(f"paired comparison needs equal round counts ({a.size} vs {b.size})")
    idx = np.random.default_rng(seed).integers(0, len(a), size=(n_boot, len(a)))
    ratios = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    q = (1 - level) / 2
    return Interval(float(np.median(a) / np.median(b)), float(np.quantile(ratios, q)),
                    float(np.quantile(ratios, 1 - q)), level)


def runtime_verdict(ratio: Interval, floor: float = 0.0) -> str:
    """faster / slower when the whole interval clears 1 (and the A/A floor around it), else no_difference."""
    if ratio.low > 1.0 + floor:
        return FASTER
    if ratio.high < 1.0 - floor:
        return SLOWER
    return NO_DIFFERENCE


def noise_floor(aa: Interval) -> float:
    """How far from 1 a ratio can be with identical code: the A/A control's offset plus its half-width."""
    return abs(aa.estimate - 1.0) + (aa.high - aa.low) / 2


def rotated_orders(labels: list[str], rounds: int) -> list[list[str]]:
    """Round r runs the labels rotated by r, so no label always goes first."""
    n = len(labels)
    return [[labels[(i + r) % n] for i in range(n)] for r in range(rounds)]
