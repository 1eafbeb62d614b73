"""The between-run model (stats.meta) and repro's rule on it, validated on simulated runs with known tau.

Simulated comparison k, run r: y = theta_k + u + e, u ~ N(0, tau0^2 + (slope theta_k)^2), e ~ N(0, s^2), each run
reporting its interval at its own look-adjusted level (0.95 ... 0.99), as the committed runs do. Fixed seeds,
modest sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptxprobe.reports import repro
from ptxprobe.stats import meta
from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.unit

LEVELS = (0.95, 0.975, 0.9833333333333333, 0.9875, 0.99)


def _runs(rng, k: int, n_runs: int, tau0: float, slope: float, theta=None):
    theta = rng.uniform(-0.03, 0.03, k) if theta is None else theta
    tau = np.sqrt(tau0**2 + (slope * theta) ** 2)
    out = []
    for _ in range(n_runs):
        s = rng.uniform(0.0002, 0.0007, k)
        y = theta + rng.normal(0, tau) + rng.normal(0, s)
        lv = rng.choice(LEVELS, k)
        out.append([(float(y[i]), float(s[i]), float(lv[i])) for i in range(k)])
    return theta, out


def _rows(run) -> list[dict]:
    rows = []
    for i, (y, s, lv) in enumerate(run):
        z = meta.z_critical(lv)
        lo, hi = math.exp(y - z * s), math.exp(y + z * s)
        verdict = stats.decide_by_interval(stats.Interval(math.exp(y), lo, hi, lv))
        rows.append({"group_id": f"g{i}", "label": "cutlass_{base}", "name_template": "cutlass_{base}",
                     "is_baseline": False, "kernel": "k", "arch": "sm_90a", "name": "cutlass_k", "block": "names",
                     "ratio_vs_baseline": math.exp(y), "ratio_ci_low": lo, "ratio_ci_high": hi, "ci_level": lv,
                     "runtime_verdict": verdict, "sizes": "n=1"})
    return rows


def test_the_standard_error_is_read_at_the_interval_s_own_level():
    for level in LEVELS:
        z = meta.z_critical(level)
        assert meta.standard_error(math.exp(-z * 0.001), math.exp(z * 0.001), level) == pytest.approx(0.001)
    row = _rows([(0.0, 0.001, 0.99)])[0]
    assert repro.log_ratio_and_se(row)[1] == pytest.approx(0.001)  # not width / 3.92 (1.31x too large at 99 %)


def test_reml_recovers_tau_and_its_growth_with_the_effect():
    """Bias of the estimator: 30 data sets of 40 comparisons x 3 runs per scenario."""
    rng = np.random.default_rng(29)
    for tau0, slope in ((0.0005, 0.0), (0.0003, 0.04)):
        fits = []
        for _ in range(30):
            _, runs = _runs(rng, 40, 3, tau0, slope)
            fits.append(meta.estimate_between_run([{i: (y, s) for i, (y, s, _) in enumerate(r)} for r in runs]))
        tau_at = np.array([f.tau(0.02) for f in fits])
        truth = math.hypot(tau0, slope * 0.02)
        assert abs(tau_at.mean() / truth - 1) < 0.1, (tau0, slope, tau_at.mean(), truth)
        kept = np.mean([f.slope > 0 for f in fits])
        assert kept <= 0.15 if slope == 0 else kept >= 0.9  # the slope only when the data want it


def test_the_pooled_interval_covers_at_its_level():
    """Three runs per comparison, 400 comparisons: with tau from the other comparisons (normal interval) and
    with DerSimonian-Laird on the three runs alone (HKSJ t interval)."""
    rng = np.random.default_rng(3)
    theta, runs = _runs(rng, 400, 3, 0.0005, 0.03)
    model = meta.estimate_between_run([{i: (y, s) for i, (y, s, _) in enumerate(r)} for r in runs])
    known, alone = 0, 0
    for i in range(theta.size):
        y, s = [r[i][0] for r in runs], [r[i][1] for r in runs]
        p = meta.pool(y, s, model)
        known += p.low <= theta[i] <= p.high
        q = meta.pool(y, s)
        alone += q.low <= theta[i] <= q.high
    assert 0.93 <= known / theta.size <= 0.97
    assert alone / theta.size >= 0.93


def test_the_false_diverged_rate_is_the_stated_level():
    """Two runs of 600 comparisons that share their true effects, each comparison judged alone (``family=None``):
    about 5 % are called diverged under the model re-fitted from the pair; adding tau^2 once (one run effect, not
    two) would call far more."""
    rng = np.random.default_rng(11)
    theta, (a, b) = _runs(rng, 600, 2, 0.0005, 0.03)
    rec, new = _rows(a), _rows(b)
    model = repro.estimate_from_runs([rec, new])
    rate = np.mean([r.status == repro.DIVERGED for r in repro.compare_runtime(rec, new, model, family=None)])
    assert 0.03 <= rate <= 0.07, rate
    once = meta.BetweenRun(model.tau0 / math.sqrt(2), model.slope / math.sqrt(2))  # 2 (tau^2 / 2) = tau^2 once
    assert np.mean([r.status == repro.DIVERGED
                    for r in repro.compare_runtime(rec, new, once, family=None)]) > 0.08


def test_a_repro_of_many_comparisons_that_all_reproduce_passes_at_the_stated_level():
    """The audit's case: a repro of 36 comparisons that all reproduce (the true model known). Judged one by one
    at 95 % it calls at least one diverged most of the time (1 - 0.95^36 = 84 %); Holm over the 36 (the default)
    keeps that at most about 5 %. 400 simulated repros; a planted fault, the default back to one by one, fails."""
    rng = np.random.default_rng(13)
    model = meta.BetweenRun(0.0005, 0.03)
    holm = alone = 0
    for _ in range(400):
        _, (a, b) = _runs(rng, 36, 2, model.tau0, model.slope)
        rec, new = _rows(a), _rows(b)
        holm += any(r.status == repro.DIVERGED for r in repro.compare_runtime(rec, new, model))
        alone += any(r.status == repro.DIVERGED for r in repro.compare_runtime(rec, new, model, family=None))
    assert holm / 400 <= 0.07 and alone / 400 >= 0.6, (holm, alone)


def test_significant_effects_of_opposite_sign_never_reproduce():
    """The audit's case: 1.003 [1.002, 1.004] faster against 0.997 [0.996, 0.998] slower (and at +-0.45 %), with a
    between-run SD loose enough that the gap alone would pass; the same intervals called negligible both times
    (effects shown inside the margin, whose sign does not reproduce) are judged by the gap, and reproduce."""
    base = {"group_id": "g", "label": "x", "name_template": "x", "is_baseline": False, "kernel": "k",
            "arch": "sm_90a", "name": "x", "block": "names", "sizes": "n=1"}
    for up, down in (((1.003, 1.002, 1.004), (0.997, 0.996, 0.998)), ((1.0045, 1.004, 1.005), (0.9955, 0.995, 0.996))):
        for vu, vd in ((stats.FASTER, stats.SLOWER), (stats.NEGLIGIBLE, stats.NEGLIGIBLE)):
            rec = [{**base, "ratio_vs_baseline": up[0], "ratio_ci_low": up[1], "ratio_ci_high": up[2],
                    "runtime_verdict": vu}]
            new = [{**base, "ratio_vs_baseline": down[0], "ratio_ci_low": down[1], "ratio_ci_high": down[2],
                    "runtime_verdict": vd}]
            row = repro.compare_runtime(rec, new, 0.05)[0]
            want = repro.REPRODUCED if vu == stats.NEGLIGIBLE else repro.DIVERGED
            assert row.gap < row.tolerance and row.status == want, row


def test_a_gap_judged_against_a_fitted_tau_pays_for_its_estimation():
    """tau fitted over 36 comparisons is an estimate: the gap is read on t(34), not the normal; a stated tau is known.
    A gap of 2.0 standard errors diverges under the normal (p 0.046) and not under t(34) (p 0.054)."""
    fitted = meta.BetweenRun(0.0, 0.0288, "REML", comparisons=36, runs=5)
    stated = meta.BetweenRun(0.001, 0.0, "stated")
    assert fitted.degrees_of_freedom == 34 and stated.degrees_of_freedom is None
    assert fitted.p_value(2.0) == pytest.approx(0.0536, abs=5e-4) and stated.p_value(2.0) == pytest.approx(0.0455,
                                                                                                           abs=5e-4)
    assert fitted.critical(0.95) > stated.critical(0.95) == pytest.approx(1.96, abs=1e-3)
    se, y = 0.001, math.log(1.02)
    gap = 2.0 * math.sqrt(2 * se**2 + 2 * fitted.tau(y - 0.5 * 2.0 * math.sqrt(2 * se**2 + 2 * fitted.tau(y) ** 2))
                          ** 2)
    rec, new = _rows([(y, se, 0.95)]), _rows([(y - gap, se, 0.95)])
    z = gap / math.sqrt(2 * se**2 + 2 * fitted.tau(y - gap / 2) ** 2)
    assert 1.96 < z < 2.03  # between the normal's and t(34)'s critical values
    assert [r.status for r in repro.compare_runtime(rec, new, fitted)] == [repro.REPRODUCED]
    flat = meta.BetweenRun(fitted.tau(y - gap / 2), 0.0, "stated")  # the same tau, taken as known
    assert [r.status for r in repro.compare_runtime(rec, new, flat)] == [repro.DIVERGED]
