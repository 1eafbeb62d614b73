"""The study's side of the design's validation (tests/test_design_stats.py simulates the rounds): the cyclic order of
the first GPU design (experiments/analysis/superseded.py) is biased by the carry-over the randomised order removes,
and the trace analysis (experiments/analysis/gpu_runs.py) sees which design a planted clock wander favours."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.analysis import superseded
from experiments.analysis.gpu_runs import trace_design_spread, window_log_ratios
from tests.test_design_stats import coverage

pytestmark = pytest.mark.unit


def test_the_cyclic_order_of_the_old_design_is_biased_by_the_same_carry_over():
    cov, mean = coverage(superseded.rotated_orders, sims=200)
    assert cov < 0.5 and abs(mean - 1.0) > 0.005  # the planted bias the randomised design removes


def test_trace_analysis_sees_which_design_a_planted_wander_favours():
    """On a synthetic launch series: a clock wandering from launch to launch is cancelled by interleaving (a
    smaller spread than back-to-back samples); pure per-launch white noise is not (the designs tie)."""
    rng = np.random.default_rng(0)
    w, wander = 0.0, []
    for _ in range(20000):
        w = 0.9 * w + rng.normal(0, 0.004)
        wander.append(w)
    white = rng.normal(0, 0.004, 20000)
    for series, favoured in ((np.exp(wander), True), (np.exp(white), False)):
        t = trace_design_spread(pd.DataFrame({"group": "g", "index": range(20000), "ms": series}), sample_ms=10.0)
        sd = dict(zip(t.unit_launches.fillna(0), t.sd_log_ratio, strict=True))  # 0: back to back
        assert (sd[1] < 0.4 * sd[0]) is favoured and (abs(sd[1] / sd[0] - 1) < 0.15) is not favoured, sd
    assert window_log_ratios(np.arange(1.0, 9.0), 4, 1)[0] == 0.0  # A B B A cancels a linear drift exactly
    assert window_log_ratios(np.arange(1.0, 9.0), 4, None)[0] < 0  # back to back does not
