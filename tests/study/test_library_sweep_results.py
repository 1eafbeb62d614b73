"""The committed library sweeps (``experiments/benchmarks/library_sweeps.py``): xformers' and vLLM's FA2 kernels
answered from their wheels with one command each, the counts consistent with the exit code."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

SWEEPS = (Path(__file__).resolve().parents[2] / "experiments" / "results" / "2026-12-05-cpu-library-sweeps"
          / "sweeps.json")


def _sweeps() -> dict[str, dict]:
    return {s["wheel"].split("-")[0]: s for s in json.loads(SWEEPS.read_text())["sweeps"]}


def test_each_library_is_one_command_whose_counts_agree_with_its_exit_code():
    for s in _sweeps().values():
        argv = shlex.split(s["command"])
        assert argv[:2] == ["ptxprobe", "rename-sweep"] and argv.count("--lib") == 1
        (a,) = s["answer"]
        assert a["changed"] + a["same"] + a["not_compared"] == a["kernels"] > 0
        assert s["exit_code"] == (1 if a["changed"] else 0)
        assert all(sum(v.values()) == a["kernels"] for v in a["verdicts"].values())
        assert len(s["wheel_sha256"]) == 64 and all(len(lib["sha256"]) == 64 for lib in s["libraries"])


def test_xformers_kernels_are_answered_and_fa2s_are_changed_by_their_type_names():
    s = _sweeps()
    (xf,) = s["xformers"]["answer"]
    assert xf["kernels"] == 50 and xf["not_compared"] == 0  # answered, not refused
    (fa2,) = s["vllm"]["answer"]
    assert fa2["kernels"] == fa2["changed"] == 32  # cutlass::half_t in the template arguments, spelled out: differs
    assert fa2["verdicts"]["{base}"] == {"differs": 32} and fa2["register_delta_max"] > 0
