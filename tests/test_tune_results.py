"""The committed ``ptxprobe tune``/``apply`` run on the H200 (experiments/results/2026-12-04-h200-tune): its claims
recomputed from its own files with the tool's functions (experiments/findings/tuning.py), and the faults such a
record could hide planted in a copy and seen caught."""

from __future__ import annotations

import json
import shutil

import pytest

from experiments.findings import tuning
from ptxprobe.stats.paired import EQUIVALENCE_MARGIN

pytestmark = pytest.mark.study


def test_the_committed_tune_run_agrees_with_itself():
    assert tuning.problems() == []


def test_each_kernel_was_tuned_over_the_goal_space_within_the_goal_gpu_time_and_precision():
    for step in tuning.STEPS:
        doc = tuning.tuned(step)
        assert doc["gpu"]["gpu"] == "NVIDIA H200"
        assert len(doc["space"]["ptxas"]) >= 4 and len(doc["space"]["option_sets"]) == 2
        for k in doc["kernels"]:
            names = {c["name"] for c in [*k["distinct"], *k["pruned"]]}
            assert len(names) >= 2 and len(k["distinct"]) + len(k["pruned"]) >= 16
            assert k["gpu_seconds"] <= tuning.GOAL_GPU_SECONDS
            if k["gain"]:
                assert k["gain"]["half_width"] <= tuning.GOAL_HALF_WIDTH and k["gain"]["low"] > 1.0


def test_the_program_ran_the_recommended_code_and_its_ab_is_what_its_runs_say():
    for step in ("ffma", "ffma-proof", "ffma-trigger-names"):
        rec = tuning.applied(step)
        c = {x["arm"]: x for x in rec["comparisons"]}
        assert c["tuned"]["verdict"] == "faster" and c["aa"]["verdict"] == "equivalent"
        assert all(r["ok"] and r["swapped"] >= 1 for r in rec["runs"])
        assert len(rec["runs"]) == 3 * rec["rounds"]
        pred = tuning.prediction_check(rec)
        assert pred["overlap"] and abs(pred["difference"]) < EQUIVALENCE_MARGIN  # less than the verdicts' margin


@pytest.mark.parametrize("fault", ["arms swapped", "best relabelled", "other code ran", "gain dropped",
                                   "apply's gain edited"])
def test_a_planted_fault_in_a_copy_is_caught(tmp_path, fault):
    copy = tmp_path / "run"
    shutil.copytree(tuning.run_dir(), copy)
    t_path, a_path = copy / "ffma" / "tuned.json", copy / "ffma" / "apply" / "apply.json"
    doc, rec = json.loads(t_path.read_text()), json.loads(a_path.read_text())
    k = doc["kernels"][0]
    if fault == "arms swapped":  # the program's yours and tuned values exchanged: the A/B recomputes as slower
        for r in rec["runs"]:
            r["arm"] = {"yours": "tuned", "tuned": "yours"}.get(r["arm"], r["arm"])
    elif fault == "best relabelled":  # the runner-up recorded as the recommendation
        k["best"] = {**k["best"], "label": k["runner_up"]["label"]}
    elif fault == "other code ran":
        rec["kernels"][0]["machine_code_sha256"] = "0" * 64
    elif fault == "gain dropped":  # a recommendation without its gain
        k["gain"] = None
    else:  # the program compared with another prediction than tune's
        rec["kernels"][0]["gain"] = {**rec["kernels"][0]["gain"], "ratio": 1.10}
    t_path.write_text(json.dumps(doc))
    a_path.write_text(json.dumps(rec))
    assert tuning.problems(copy)
