"""The atlas's first step, recomputed from its committed records: the census agrees with itself and with the
library sweeps committed before it, and the pilot's cells with what the sweeps found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"


def _json(run: str, name: str) -> dict:
    return json.loads((RESULTS / run / name).read_text())


def test_the_census_counts_hold_together_and_meet_the_numbers_known_before():
    census = _json("2026-12-05-cpu-atlas-pilot", "census.json")["libraries"]
    for lib in census.values():
        for r in lib["libraries"]:
            assert 0 < r["kernels"] <= r["entries"] and r["source_functions"] <= r["kernels"]
            assert r["trigger_in_identifier"] + r["trigger_elsewhere"] <= r["entries"]
    fa2 = next(r for r in census["vllm"]["libraries"] if r["member"].endswith("_vllm_fa2_C.abi3.so"))
    assert fa2["entries"] == 2904 == fa2["trigger_elsewhere"] and fa2["sass_archs"] == ["sm_80"]  # the count
    sweeps = {s["wheel"]: s for s in _json("2026-12-05-cpu-library-sweeps", "sweeps.json")["sweeps"]}
    xformers = sweeps[census["xformers"]["file"]]
    assert xformers["wheel_sha256"] == census["xformers"]["sha256"]
    assert xformers["libraries"][0]["ptx_modules"] == census["xformers"]["libraries"][0]["modules"]


def test_the_pilot_found_what_the_library_sweeps_found():
    """The FA2 sparse forward kernels change code on sm_90a with ptxas 13.0 (32 of 32 before, and here), xformers'
    50 do not; each cell's per-kernel time is its wall time over its kernels."""
    cells = _json("2026-12-05-cpu-atlas-pilot", "pilot.json")["cells"]
    sweeps = {s["label"]: s for s in _json("2026-12-05-cpu-library-sweeps", "sweeps.json")["sweeps"]}
    fa2 = next(c for c in cells if c["library"] == "vllm")
    before = sweeps["vLLM FlashAttention-2 (sparse forward)"]["answer"][0]
    assert (fa2["kernels"], fa2["changed"]) == (before["kernels"], before["changed"]) == (32, 32)
    assert all(c["changed"] == 0 for c in cells if c["library"] == "xformers")
    for c in cells:
        assert c["wall_seconds_per_kernel"] == pytest.approx(c["wall_seconds"] / c["kernels"], abs=0.01)
        assert c["failed"] == 0 and c["ptxas_runs"] <= c["assemblies"]
