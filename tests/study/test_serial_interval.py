"""The committed validation of the serially-correlated interval on the H200 name series
(experiments/analysis/serial_correlation.py) says what its counts say, meets the coverage goal where the interval
before did not, and is reproduced; every committed CPU analysis was made by the code there is now; the GPU cost of the
widening and the recomputed intervals FINDINGS reads are what their runs give. (The interval itself, on simulated
rounds: tests/test_serial_interval.py.)"""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from experiments.analysis import recomputed_intervals as recomputed
from experiments.analysis import serial_correlation as validation
from experiments.findings import stopping
from ptxprobe.stats import paired as stats


def _doc() -> dict:
    return json.loads((validation.OUT / "serial.json").read_text())


@pytest.mark.study
def test_the_committed_validation_meets_the_goal_where_the_interval_before_did_not():
    doc = _doc()
    cells = doc["cells"]
    assert len(cells) == len(validation.POOLS) * len(validation.RESAMPLINGS) * len(validation.METHODS)
    for c in cells:
        assert c["coverage"] == c["covered"] / c["blocks"] and c["blocks"] == doc["prespecified"]["sims_per_cell"]
        assert c["coverage_ci"] == pytest.approx(validation.sim.exact_interval(c["covered"], c["blocks"]))
    tool = [c for c in cells if c["method"] == stats.SERIAL_SIGNED_RANK]
    before = [c for c in cells if c["method"] == "signed-rank" and c["pool"] == "correlated"]
    assert all(c["coverage"] >= validation.GOAL for c in tool), tool
    assert all(c["coverage_ci"][1] < 0.95 for c in before), before  # the audit's finding, reproduced
    assert doc["lag1"]["correlated"] == len([s for s in validation.name_series(validation.RUNS) if
                                             validation.positively_correlated(s["logs"])])


@pytest.mark.study
def test_a_cell_of_the_committed_validation_is_reproduced():
    doc = _doc()
    cell = next(c for c in doc["cells"] if c["pool"] == "correlated" and c["resampling"] == "blocks-5"
                and c["method"] == stats.SERIAL_SIGNED_RANK)
    series = [s["logs"] for s in validation.name_series(validation.RUNS)]
    pool = [x for x in series if validation.positively_correlated(x)]
    again = validation.run_cell(pool, "blocks-5", cell["method"], validation.sim.study_plan(), 200, cell["seed"])
    assert abs(again["coverage"] - cell["coverage"]) <= 0.04


@pytest.mark.study
@pytest.mark.parametrize("result", ["2026-12-05-cpu-serial-correlation", "2026-12-05-cpu-margin-rule",
                                    "2026-12-05-cpu-tune-proof", "2026-12-05-cpu-clock-slope",
                                    "2026-12-05-cpu-recomputed-intervals"])
def test_a_committed_analysis_was_made_by_the_code_there_is_now(result):
    """Each CPU analysis's manifest names the sha256 of the code that made it: a change to that code without a
    rerun leaves a result nobody can reproduce, and fails here."""
    manifest = json.loads((validation.sim.ROOT / "experiments" / "results" / result / "manifest.json").read_text())
    assert manifest["code_sha256"], manifest
    for path, digest in manifest["code_sha256"].items():
        assert hashlib.sha256((validation.sim.ROOT / path).read_bytes()).hexdigest() == digest, path


@pytest.mark.study
def test_the_gpu_cost_of_the_widening_is_read_from_two_runs_on_one_card(monkeypatch):
    """The two every-default runs that measure the widening's GPU cost: the same card, the same study, each timed
    under the interval its key names, and every row's interval recomputes from its raw samples under that interval
    (test_results_design does it for all runs); a pair timed under swapped intervals is refused, not rendered."""
    runs = {m: stopping._defaults_run(r) for m, r in stopping.GPU_COST.items()}
    assert {m: r["interval"] for m, r in runs.items()} == {m: m for m in runs}
    assert len({r["uuid"] for r in runs.values()}) == 1 and all(r["groups"] == 48 for r in runs.values())
    text = "\n".join(stopping.gpu_cost_section())
    assert f"{runs['signed-rank-hac']['seconds']:.1f}" in text and f"{runs['signed-rank']['seconds']:.1f}" in text
    swapped = dict(zip(stopping.GPU_COST, reversed(stopping.GPU_COST.values()), strict=True))
    monkeypatch.setattr(stopping, "GPU_COST", swapped)
    with pytest.raises(ValueError, match="another interval"):
        stopping.gpu_cost_section()


@pytest.mark.study
def test_the_committed_recomputed_intervals_are_what_the_raw_rounds_give():
    """FINDINGS reads the superseded runs' recomputed intervals from a committed table: one run's A/A half-widths
    under every interval method recomputed from its raw rounds equal the committed rows (planted: a committed value
    nudged by 1e-12 fails), and a table FINDINGS asks for that was never computed is named, not drawn."""
    run = "2026-12-03-h200-defaults"
    again, stored = recomputed.recompute("aa_halfwidth_by_interval", run), recomputed.committed(
        "aa_halfwidth_by_interval", run)
    pd.testing.assert_frame_equal(again, stored, check_exact=True)
    nudged = stored.copy()
    nudged.loc[0, "half_width_bca"] += 1e-12
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(again, nudged, check_exact=True)
    with pytest.raises(KeyError, match="rerun python -m experiments.analysis.recomputed_intervals"):
        recomputed.committed("resequenced", run)
