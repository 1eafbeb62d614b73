"""The verdict rule (stats.paired.decide): significant only when the interval excludes 1 and Benjamini-Hochberg
over the run (or one compare call) rejects at the interval's own level; a significant effect inside the margin is
``negligible``. Each rule pinned with the fault it would let through."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.unit


def test_a_significant_effect_inside_the_margin_is_negligible_not_faster():
    assert stats.decide(stats.Interval(0.99974, 0.99948, 0.99996)) == stats.NEGLIGIBLE  # the audit's -0.026 %
    assert stats.decide(stats.Interval(1.003, 1.002, 1.004)) == stats.NEGLIGIBLE
    # reaches past the margin without being shown beyond it: its own verdict, not faster (the rule before said faster)
    assert stats.decide(stats.Interval(1.004, 1.002, 1.006)) == stats.STRADDLES_MARGIN
    assert stats.decide_significant(stats.Interval(1.004, 1.002, 1.006)) == stats.FASTER
    assert stats.decide(stats.Interval(1.008, 1.006, 1.010)) == stats.FASTER  # the whole interval beyond the margin
    assert stats.decide(stats.Interval(0.99, 0.985, 0.994)) == stats.SLOWER
    assert stats.decide(stats.Interval(1.0, 0.998, 1.003)) == stats.EQUIVALENT
    assert stats.decide(stats.Interval(1.0, 0.99, 1.01)) == stats.INCONCLUSIVE
    assert stats.NEGLIGIBLE in stats.SIGNIFICANT and stats.EQUIVALENT not in stats.SIGNIFICANT
    # the earlier rule, kept for the committed runs only, called it slower
    assert stats.decide_by_interval(stats.Interval(0.99974, 0.99948, 0.99996)) == stats.SLOWER


def test_the_multiplicity_adjusted_test_gates_faster_and_slower_at_the_interval_s_level():
    big = stats.Interval(1.02, 1.01, 1.03, level=0.99)
    assert stats.decide(big, q_value=0.009) == stats.FASTER
    assert stats.decide(big, q_value=0.03) == stats.INCONCLUSIVE  # q 0.03 > 1 - 0.99: not significant at 99 %
    small = stats.Interval(1.001, 1.0005, 1.002, level=0.95)
    assert stats.decide(small, q_value=0.12) == stats.EQUIVALENT  # the audit's q 0.11-0.14 "faster"
    assert stats.decide(small, q_value=0.04) == stats.NEGLIGIBLE


def test_the_signed_rank_p_value_is_the_test_the_interval_inverts():
    rng = np.random.default_rng(5)
    agree = 0
    for _ in range(300):
        x = rng.normal(rng.choice([0.0, 0.0005, 0.001]), 0.001, int(rng.integers(8, 40)))
        for level in (0.95, 0.99):
            lo, hi = stats.signed_rank_bounds(x, level)
            agree += (stats.signed_rank_pvalue(x) <= 1 - level) == (lo > 0 or hi < 0)
    assert agree == 600


def _name_row(i, ratio, low, high, p, rule=True, level=0.95):
    row = {"group_id": f"g{i}", "label": "cutlass_{base}", "name_template": "cutlass_{base}", "is_baseline": False,
           "ratio_vs_baseline": ratio, "ratio_ci_low": low, "ratio_ci_high": high, "ci_level": level, "p_value": p,
           "runtime_verdict": (stats.decide if rule else stats.decide_by_interval)(stats.Interval(ratio, low, high,
                                                                                                   level))}
    return {**row, "verdict_rule": stats.VERDICT_RULE} if rule else row


def test_q_values_over_the_run_judge_new_rows_and_leave_recorded_ones():
    from ptxprobe.gpu.dispatch import with_q_values

    rows = [_name_row(0, 1.02, 1.01, 1.03, 0.001)] + [_name_row(i, 0.99, 0.985, 0.9995, 0.04) for i in (1, 2)]
    rows += [_name_row(i, 1.0, 0.99, 1.01, 0.9) for i in range(3, 12)]
    rows.append(_name_row(12, 0.99, 0.985, 0.9995, 0.04, rule=False))  # an earlier run's row
    out = with_q_values(rows)
    assert out[0]["runtime_verdict"] == stats.FASTER and out[0]["q_value"] <= 0.05
    assert [r["runtime_verdict"] for r in out[1:3]] == [stats.INCONCLUSIVE] * 2  # excludes 1, q 0.13: not slower
    assert out[1]["q_value"] == pytest.approx(0.04 * 13 / 4)
    assert out[12]["runtime_verdict"] == stats.SLOWER  # recorded under the earlier rule: kept


def test_judge_gates_by_bh_over_the_call_and_reports_the_ratio_of_means():
    from ptxprobe.gpu.compare import Timing, judge
    from ptxprobe.gpu.timing import TimingPlan

    rng = np.random.default_rng(2)
    base = rng.lognormal(0.0, 0.002, 40)
    timings = {"base": Timing("base", tuple(base))}
    for i, shift in enumerate((0.97, 1.0, 1.0, 1.0)):
        timings[f"o{i}"] = Timing(f"o{i}", tuple(base * shift * rng.lognormal(0.0, 0.002, 40)))
    comps = judge(timings, "base", TimingPlan(min_rounds=40, max_rounds=40))
    q = stats.bh_qvalues([c.p_value for c in comps])
    assert [c.q_value for c in comps] == q
    assert comps[0].verdict == stats.FASTER
    assert all(c.verdict == stats.decide(stats.Interval(c.ratio, c.low, c.high, c.level), c.margin, c.q_value)
               for c in comps)
    assert comps[0].ratio_of_means == pytest.approx(np.mean(base) / np.mean(timings["o0"].times_ms))


def test_the_ratio_of_means_differs_from_the_pseudo_median_when_rounds_are_skewed():
    base = np.ones(30)
    other = np.array([1.0] * 27 + [1.2] * 3)  # three slow rounds: the mean moves, the pseudo-median does not
    assert stats.ratio_of_means(base, other) == pytest.approx(1 / 1.02)
    assert stats.hodges_lehmann(stats.log_ratios(base, other)) == pytest.approx(0.0)


def test_an_a_a_effect_inside_the_margin_counts_as_a_false_positive():
    from ptxprobe.gpu.calibrate import summarize

    aa = [{"runtime_verdict": v, "half_width": 0.001} for v in
          [stats.NEGLIGIBLE, stats.NEGLIGIBLE] + [stats.EQUIVALENT] * 18]
    out = summarize([{"aa": a} for a in aa])
    assert out["aa_false_positive_rate"] == pytest.approx(0.1)


def test_hodges_lehmann_is_the_median_of_the_walsh_averages_bitwise():
    """The in-place partition (twice as fast for the bootstraps) against the definition, odd and even counts of
    averages, one sample and a batch of resamples along an axis."""
    rng = np.random.default_rng(7)
    for n in range(1, 60):
        for x in (rng.standard_t(3, n) * 0.01, rng.normal(size=(5, n))):
            i, j = np.triu_indices(n)
            assert np.array_equal(stats.hodges_lehmann(x), np.median((x[..., i] + x[..., j]) / 2.0, axis=-1))
    y = rng.normal(size=(4, 9, 3))
    i, j = np.triu_indices(9)
    want = np.median((np.moveaxis(y, 1, -1)[..., i] + np.moveaxis(y, 1, -1)[..., j]) / 2.0, axis=-1)
    assert np.array_equal(stats.hodges_lehmann(y, axis=1), want)
    for bad in ([1.0, 2.0, 3.0, 4.0, np.nan], [], [[1.0, np.nan], [1.0, 2.0]]):  # NaN and nothing: as np.median
        b = np.asarray(bad, dtype=float)
        i, j = np.triu_indices(b.shape[-1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the median of nothing
            want = np.median((b[..., i] + b[..., j]) / 2.0, axis=-1)
        assert np.array_equal(stats.hodges_lehmann(b), want, equal_nan=True), bad


def test_a_log_recorded_under_the_rule_before_is_gated_and_judged_by_that_rule():
    """A run logged under interval+bh holds its rows before Benjamini-Hochberg: repro and the report gate them by q
    and judge them by their own rule (decide_significant), not the margin rule, and not left ungated."""
    from ptxprobe.reports.repro import judged

    def old(i, ratio, low, high, p):
        return {**_name_row(i, ratio, low, high, p), "verdict_rule": stats.SIGNIFICANCE_RULE,
                "runtime_verdict": stats.decide_significant(stats.Interval(ratio, low, high))}

    rows = [old(0, 1.004, 1.002, 1.006, 1e-4), old(1, 0.99, 0.985, 0.9995, 0.04)]
    rows += [old(i, 1.0, 0.99, 1.01, 0.9) for i in range(2, 12)]
    out = judged(rows)
    assert all("q_value" in r for r in out)
    assert out[0]["runtime_verdict"] == stats.FASTER  # the rule before: significant past 1, reaching past the margin
    assert out[1]["runtime_verdict"] == stats.INCONCLUSIVE  # q 0.04 x 12 / 2 > 0.05: gated, as that rule did
