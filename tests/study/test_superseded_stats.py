"""The first GPU design's statistics (experiments/analysis/superseded.py, kept with the study to re-read the runs it
judged), on synthetic times."""

from __future__ import annotations

import pytest

from experiments.analysis import superseded
from ptxprobe.stats import paired as stats
from tests.test_superseded_stats import synth

pytestmark = pytest.mark.unit


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
