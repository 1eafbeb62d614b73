"""The committed benchmark of a library's many-entry module (experiments/benchmarks/bench_module.py on vLLM's
Marlin sm_90 module): the sweep within 1.3x the bare whole-module ptxas calls making the same assemblies, one ptxas
run per name template and repeat, every instantiation its own kernel. Recomputed from the committed record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

BENCH = Path(__file__).resolve().parents[2] / "experiments" / "results" / "2026-12-05-cpu-module-bench" / "bench.json"


def test_the_module_sweep_meets_its_goal_against_bare_ptxas():
    b = json.loads(BENCH.read_text())
    assert b["ratio"] == pytest.approx(b["sweep_wall_s"] / b["bare_ptxas_wall_s"], abs=1e-3)
    assert b["ratio"] <= b["goal_ratio"] == 1.3
    assert b["renamed_with_module"] and b["ptxas_runs"] == len(b["assemblies"])
    templates = {t for t, _ in b["assemblies"]}
    assert b["ptxas_runs"] < b["kernels"] * len(templates)  # not one whole-module run per entry
    assert b["variants"] >= b["kernels"] * len(templates)
    assert b["kernels"] == b["entries"] == 30
    assert 0 < b["kernels_whose_registers_change_with_cutlass"] <= b["kernels_whose_code_differs_with_cutlass"]
