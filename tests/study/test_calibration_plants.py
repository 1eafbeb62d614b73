"""Calibration read back from the committed GPU runs: a run stored before the plants moved into the names block
summarizes as it was stored, two runs pool into one certified A/A false-positive rate, and a replay reads the pairs
and planted samples a group recorded (experiments/analysis/gpu_runs.py). How plants are chosen, judged and bounded
is tested on the tool alone in tests/test_calibration_plants.py."""

from __future__ import annotations

import json

import pytest

from experiments.analysis import gpu_runs
from experiments.analysis.gpu_runs import block_pairs, compared_series, planted_rows
from experiments.analysis.static_runs import results_dir
from ptxprobe.gpu.calibrate import AA_LABELS, names_compared, summarize
from ptxprobe.runs.rundir import RunDir
from ptxprobe.stats import bounds

TIER = "study"  # the tier of each test here without its own (conftest)


def test_a_committed_calibration_block_run_still_summarizes_as_it_was_stored():
    """Group records from before the plants moved into the names block (a block of their own, sizes within a
    quarter) summarize to their stored calibration.json, with the new bounds beside it."""
    d = results_dir("2026-12-03-h200-defaults")
    c = summarize(RunDir(d).groups)
    stored = json.loads((d / "calibration.json").read_text())
    assert {k: c[k] for k in stored if k != "note"} == {k: v for k, v in stored.items() if k != "note"}
    assert c["aa_false_positive_upper_95"] == pytest.approx(bounds.cp_upper(c["aa_false_positives"], 48))
    assert "planted_size_covered_in_groups" not in c and "plant_size_miss_rate_max" not in c["criteria"]


def test_committed_runs_pool_into_one_certified_false_positive_rate():
    runs = [results_dir(r) for r in ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro")]
    p = gpu_runs.pooled_calibration(runs)
    each = [summarize(gpu_runs.RunDir(r).groups) for r in runs]
    assert p["groups"] == 96 and p["aa_false_positives"] == sum(s["aa_false_positives"] for s in each)
    assert p["aa_false_positive_upper_95"] == pytest.approx(bounds.cp_upper(p["aa_false_positives"], 96))
    assert p["aa_false_positive_upper_95"] < min(s["aa_false_positive_upper_95"] for s in each)  # pooling narrows


@pytest.mark.unit
def test_a_replay_reads_the_pairs_a_group_recorded_and_its_planted_samples():
    templates = ["{base}", "cutlass_{base}"]
    label = "{base}#planted0.2%"
    rec = {"compared": [["{base}", "cutlass_{base}"], list(AA_LABELS), ["{base}", label]],
           "calibration": {"in_names_block": True},
           "calibration_samples": {label: {"times_ms": [1.002, 1.003], "partners": {"{base}": [1.002, 1.003]}}}}
    assert block_pairs(rec, templates)[-1] == ("{base}", label)
    assert block_pairs({"identical_code": []}, templates) == names_compared(templates, [])  # an earlier record
    base = {"label": "{base}", "samples": {"times_ms": [9.0], "partners": {label: [1.0, 1.0]}}}
    assert compared_series(base, planted_rows(rec)[label]) == ([1.0, 1.0], [1.002, 1.003])
    assert planted_rows({"calibration": {"planted": {}}, "calibration_samples": {label: {}}}) == {}
