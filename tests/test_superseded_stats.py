"""The first GPU design's statistics (kept with the study to re-read the runs it judged), on synthetic times, and
the package's own rate helpers."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.analysis import superseded
from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.unit


def synth(median, noise, n=30, seed=0, drift=0.0) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    t = median * (1 + noise * rng.standard_normal(n)) + drift * np.arange(n)
    return tuple(float(x) for x in t)


def test_two_percent_slower_is_detected_with_half_percent_noise():
    r = superseded.paired_ratio(synth(1.0, 0.005, seed=1), synth(1.02, 0.005, seed=2))
    assert r.high < 1.0 and superseded.runtime_verdict(r) == stats.SLOWER
    assert 0.97 < r.estimate < 0.99


def test_same_distribution_is_no_difference():
    r = superseded.paired_ratio(synth(1.0, 0.005, seed=3), synth(1.0, 0.005, seed=4))
    assert r.low < 1.0 < r.high and superseded.runtime_verdict(r) == superseded.NO_DIFFERENCE


def test_faster_and_the_noise_floor():
    r = superseded.paired_ratio(synth(1.0, 0.002, seed=5), synth(0.9, 0.002, seed=6))
    assert superseded.runtime_verdict(r) == stats.FASTER
    assert superseded.runtime_verdict(r, floor=0.5) == superseded.NO_DIFFERENCE
    aa = superseded.paired_ratio(synth(1.0, 0.002, seed=7), synth(1.0, 0.002, seed=8))
    assert superseded.noise_floor(aa) == pytest.approx(abs(aa.estimate - 1) + (aa.high - aa.low) / 2)


def test_unpaired_lengths_rejected_and_rotation():
    with pytest.raises(ValueError):
        superseded.paired_ratio(synth(1, 0.01, n=5), synth(1, 0.01, n=6))
    orders = superseded.rotated_orders(["a", "b", "c"], 3)
    assert [o[0] for o in orders] == ["a", "b", "c"]
    assert all(sorted(o) == ["a", "b", "c"] for o in orders)


def test_a_labels_rate_and_spread():
    t = synth(1.0, 0.002, seed=5)
    tf = stats.throughput_interval(t, 1e12)
    assert tf.low <= tf.estimate <= tf.high and abs(tf.estimate - 1000) < 5
    assert stats.spread((1.0, 1.0, 1.0, 1.0)) == 0.0 and stats.median_ms((1.0, 3.0, 2.0)) == 2.0
