"""The committed regime runs and the clock-slope validation, recomputed from their records (the study tier)."""

from __future__ import annotations

import json

import pytest

from experiments.analysis import clock_slope
from experiments.analysis.static_runs import results_dir
from experiments.findings import regime as findings
from ptxprobe.gpu.calibrate import summarize
from ptxprobe.runs.rundir import RunDir

pytestmark = pytest.mark.study


@pytest.mark.parametrize("run", findings.RUNS)
def test_held_alone_the_ffma_gain_is_smaller_and_its_code_runs_at_a_lower_clock(run):
    g = findings.gains(run)
    burst, held = g["burst"]["tune"], g["sustained"]["tune"]
    assert burst["outcome"] == held["outcome"] == "confirmed"
    assert burst["regime"]["regime"] == "burst" and held["regime"]["regime"] == "sustained"
    assert held["gain"]["high"] < burst["gain"]["low"]  # the intervals apart: the regime changes the answer
    assert burst["regime"]["clock_delta_mhz"] == 0 and held["regime"]["clock_delta_mhz"] < 0
    for regime in findings.REGIMES:  # the sweep agrees with the tune in each regime
        s, t = g[regime]["sweep"], g[regime]["tune"]["gain"]
        assert s["regime"] == regime and s["runtime_verdict"] == "faster"
        assert s["ratio_ci_low"] <= t["high"] and t["low"] <= s["ratio_ci_high"]


def test_sustained_sleep_plants_read_smaller_and_are_judged_by_direction_alone():
    h200 = RunDir(results_dir(findings.RUNS[0]) / "sweep-ffma-sustained")
    groups = h200.log("groups.jsonl")
    recorded = json.loads((results_dir(findings.RUNS[0]) / "sweep-ffma-sustained" / "calibration.json").read_text())
    assert not recorded["passed"]  # judged by size when it ran: the finding behind the direction rule
    for f in ("0.01", "0.02"):
        plant = groups[0]["calibration"]["planted"][f]
        assert plant["measured_fraction_ci"][1] < plant["sized_fraction"] and plant["detected"]
    h100 = RunDir(results_dir(findings.RUNS[1]) / "sweep-ffma-sustained").log("groups.jsonl")
    rules = {p["size_rule"] for p in h100[0]["calibration"]["planted"].values() if "size_rule" in p}
    assert rules == {"direction"} and summarize(h100)["passed"]


def test_the_clock_slope_validation_recomputes_and_meets_its_goals():
    committed = json.loads((results_dir(clock_slope.OUT.name) / "clock_slope.json").read_text())
    again = clock_slope.analyse()
    assert again == committed
    aa = committed["aa"]
    assert aa["of"] >= 200 and aa["ci"][1] <= 0.05  # false alarms: the exact upper bound under 5 %
    assert committed["planted"]["0.01"]["rate"] >= 0.9
    text = "\n".join(findings.section())
    assert f"flagged {aa['hits']} of the {aa['of']}" in text and str(committed["names"]["hits"]) in text


def test_the_report_shows_each_rows_regime_and_none_for_rows_recorded_before_regimes(tmp_path):
    from ptxprobe.reports import html

    out = html.build_report(results_dir(findings.RUNS[0]) / "sweep-ffma-sustained", tmp_path / "rep")
    named = next(r for r in out["runtime"] if r["name"].startswith("xutlass"))
    assert named["regime_text"].startswith("sustained, 1905±") and "(Δ-22)" in named["regime_text"]
    index = (tmp_path / "rep" / "index.html").read_text()
    assert named["regime_text"] in index and "<th>regime</th>" in index
    old = html.build_report(results_dir("2026-12-03-h200-interleaved-fast"), tmp_path / "old")
    assert {r["regime_text"] for r in old["runtime"]} <= {"", "-"}


def test_repro_says_both_runs_regimes_beside_a_timed_comparison():
    from ptxprobe.reports import repro

    rows = RunDir(results_dir(findings.RUNS[0]) / "sweep-ffma-burst").runtime_rows()
    held = RunDir(results_dir(findings.RUNS[0]) / "sweep-ffma-sustained").runtime_rows()
    out = {r.name: r.reason for r in repro.compare_runtime(rows, held) if r.gap is not None}
    named = next(why for name, why in out.items() if "untriggered" in name or name.startswith("xutlass"))
    assert "regime now sustained, 1905" in named and "recorded burst, 1912" in named, out


def test_the_findings_judge_the_clock_prediction_from_the_numbers():
    text = "\n".join(findings.section())
    for run in findings.RUNS:
        g = findings.gains(run)
        sus = g["sustained"]["tune"]
        predicted = findings.predicted_sustained(g["burst"]["tune"]["gain"]["ratio"], sus["regime"])
        inside = sus["gain"]["low"] <= predicted <= sus["gain"]["high"]
        said = text.split(f"= {predicted:.4f} against", 1)[1].split(";")[0]
        assert ("inside: the clock accounts for the drop" in said) == inside, said
