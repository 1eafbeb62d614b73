"""Runtime statistics on synthetic times (the GPU side is tested with committed H200 data)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxprobe.stats import paired as stats


def synth(label, median, noise, n=30, seed=0, drift=0.0):
    rng = np.random.default_rng(seed)
    t = median * (1 + noise * rng.standard_normal(n)) + drift * np.arange(n)
    return stats.Measurement(label, tuple(float(x) for x in t))


def test_two_percent_slower_is_detected_with_half_percent_noise():
    a = synth("a", 1.0, 0.005, seed=1)
    b = synth("b", 1.02, 0.005, seed=2)
    r = stats.paired_ratio(a, b)
    assert r.high < 1.0 and stats.runtime_verdict(r) == stats.SLOWER
    assert 0.97 < r.estimate < 0.99


def test_same_distribution_is_no_difference():
    a = synth("a", 1.0, 0.005, seed=3)
    b = synth("b", 1.0, 0.005, seed=4)
    r = stats.paired_ratio(a, b)
    assert r.low < 1.0 < r.high and stats.runtime_verdict(r) == stats.NO_DIFFERENCE


def test_faster_and_throughput_interval():
    a = synth("a", 1.0, 0.002, seed=5)
    b = synth("b", 0.9, 0.002, seed=6)
    assert stats.runtime_verdict(stats.paired_ratio(a, b)) == stats.FASTER
    tf = stats.throughput_interval(a, flops=1e12)
    assert tf.low <= tf.estimate <= tf.high and abs(tf.estimate - 1000) < 5


def test_unpaired_lengths_rejected_and_rotation():
    with pytest.raises(ValueError):
        stats.paired_ratio(synth("a", 1, 0.01, n=5), synth("b", 1, 0.01, n=6))
    orders = stats.rotated_orders(["a", "b", "c"], 3)
    assert [o[0] for o in orders] == ["a", "b", "c"]
    assert all(sorted(o) == ["a", "b", "c"] for o in orders)


def test_spread():
    m = stats.Measurement("x", (1.0, 1.0, 1.0, 1.0))
    assert m.spread == 0.0 and m.median_ms == 1.0
