"""The stopping rule's simulation (experiments/analysis/stopping_simulation.py): the committed result says what its
counts say, its inputs are what the committed H200 runs measured, and a small run of it through the tool's own
stopping code catches a rule that stops on significance."""

from __future__ import annotations

import json

import pytest

from experiments.analysis import stopping_simulation as sim
from ptxprobe.stats import paired as stats
from ptxprobe.stats.bounds import cp_lower, cp_upper

pytestmark = pytest.mark.study

RESULT = sim.ROOT / "experiments" / "results" / "2026-12-04-cpu-stopping-simulation" / "simulation.json"


def _result() -> dict:
    return json.loads(RESULT.read_text())


def test_the_committed_simulation_says_what_its_counts_say():
    r = _result()
    assert {row["scenario"] for row in r["rows"]} == set(sim.SCENARIOS)
    for row in r["rows"]:
        assert row["coverage"] == row["covered"] / row["intervals"]
        assert row["coverage_cp95"] == [cp_lower(row["covered"], row["intervals"]),
                                        cp_upper(row["covered"], row["intervals"])]
        assert sum(row["stopped_by"].values()) == row["blocks"] == r["sims_per_cell"]
    holds = {row["scenario"] for row in r["rows"] if row["coverage_cp95"][1] >= 0.95}
    assert holds == set(sim.SCENARIOS) - {"drift-stress"}  # 95 % holds, except far beyond the measured drift


def test_the_simulation_reads_its_noise_from_the_committed_runs():
    r = _result()
    assert r["round_sd"] == pytest.approx(sim.measured_round_sd())
    assert r["first_penalty"] == pytest.approx(sim.measured_first_penalty())
    assert r["lag1"] == pytest.approx(sim.measured_lag1())
    assert abs(r["lag1"]) < 0.1  # the rounds of the committed runs are not serially correlated
    assert r["plan"]["min_rounds"] == sim.study_plan().min_rounds


def test_a_rule_that_stops_on_significance_is_caught(monkeypatch):
    """Stopping on half-widths only keeps the A/A false positives at the level; a rule that also stops as soon
    as an interval excludes 1 (planted here through the half-width it reads) inflates them past it."""
    plan = sim.study_plan()
    noisy = sim.Scenario("several-looks", 2.5 * 0.0013)
    honest = sim.run_scenario(noisy, 1.0, plan, 200, 3)
    assert honest["significant_rate"] <= 0.05 and honest["coverage"] >= 0.95
    normal = sim.run_scenario(sim.Scenario("normal", 0.0013), 0.995, plan, 200, 4)
    assert 0.91 <= normal["coverage"] <= 0.99
    width = stats.half_width
    monkeypatch.setattr(sim.stats, "half_width", lambda iv: 0.0 if iv.low > 1 or iv.high < 1 else width(iv))
    peeking = sim.run_scenario(noisy, 1.0, plan, 200, 3)
    assert peeking["significant_rate"] > 0.05, peeking
