"""The package's own rate helpers, on synthetic times. (The first GPU design's statistics, kept with the study to
re-read the runs it judged, on the same times: tests/study/test_superseded_stats.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.unit


def synth(median, noise, n=30, seed=0, drift=0.0) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    t = median * (1 + noise * rng.standard_normal(n)) + drift * np.arange(n)
    return tuple(float(x) for x in t)


def test_a_labels_rate_and_spread():
    t = synth(1.0, 0.002, seed=5)
    tf = stats.throughput_interval(t, 1e12)
    assert tf.low <= tf.estimate <= tf.high and abs(tf.estimate - 1000) < 5
    assert stats.spread((1.0, 1.0, 1.0, 1.0)) == 0.0 and stats.median_ms((1.0, 3.0, 2.0)) == 2.0
