"""The margin rule on data where the truth is known (experiments/analysis/margin_rule.py): the committed simulation
says what its counts say, meets what "faster" must mean, shows the rule before failing it, and is reproduced."""

from __future__ import annotations

import json

import pytest

from experiments.analysis import margin_rule
from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.study

NOW, BEFORE = stats.VERDICT_RULE, stats.SIGNIFICANCE_RULE


def _doc() -> dict:
    return json.loads(margin_rule.OUT.read_text())


def _cell(doc: dict, noise: str, ratio: float) -> dict:
    return next(c for c in doc["cells"] if c["noise"] == noise and c["true_ratio"] == ratio)


def rule_failures(doc: dict, rule: str) -> list[str]:
    """What a rule gets wrong of the issue's goals: a true +0.3 % or +0.4 % called faster more than 2.5 % of the
    time (any noise), A/A significant more than 5 %, a true +1 % faster less than 95 % at typical noise."""
    bad = []
    for c in doc["cells"]:
        r = c[rule]
        if c["true_ratio"] in (1.003, 1.004) and r["faster_rate"] > 0.025:
            bad.append(f"{c['noise']} +{c['true_ratio'] - 1:.1%} faster {r['faster_rate']:.3f}")
        if c["true_ratio"] == 1.0 and r["significant_rate"] > 0.05:
            bad.append(f"{c['noise']} A/A significant {r['significant_rate']:.3f}")
        if c["true_ratio"] == 1.01 and c["noise"] == "typical" and r["faster_rate"] < 0.95:
            bad.append(f"typical +1 % faster only {r['faster_rate']:.3f}")
    return bad


def test_the_counts_are_the_rates():
    doc = _doc()
    assert len(doc["cells"]) == len(margin_rule.NOISE) * len(margin_rule.TRUE_RATIOS)
    for c in doc["cells"]:
        for rule in (NOW, BEFORE):
            r = c[rule]
            assert sum(r["counts"].values()) == c["blocks"] == doc["prespecified"]["sims_per_cell"]
            assert r["faster_rate"] == r["counts"].get(stats.FASTER, 0) / c["blocks"]
            assert r["significant_rate"] == sum(r["counts"].get(v, 0) for v in stats.SIGNIFICANT) / c["blocks"]


def test_faster_means_beyond_the_margin_and_the_rule_before_did_not():
    doc = _doc()
    assert rule_failures(doc, NOW) == []
    before = rule_failures(doc, BEFORE)
    assert any("+0.4% faster" in b for b in before), before  # the audit's finding, reproduced on known truth
    assert _cell(doc, "noisiest", 1.003)[BEFORE]["faster_rate"] > 0.5


def test_a_cell_is_reproduced_by_the_committed_code():
    doc = _doc()
    c = _cell(doc, "typical", 1.004)
    again = margin_rule.run_cell(c["sd"], c["true_ratio"], margin_rule.sim.study_plan(), c["blocks"], c["seed"])
    assert again[NOW]["counts"] == c[NOW]["counts"] and again[BEFORE]["counts"] == c[BEFORE]["counts"]
