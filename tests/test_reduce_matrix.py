"""The committed reduce matrix (experiments/results/*-cpu-reduce-matrix) says what its files say: each minimal
kernel has the instructions its record counts, the documented Blackwell condition is read from the minimal PTX
itself, and a minimal kernel still satisfies its predicate when the sweep checks it from scratch."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from experiments.findings import reduction
from ptxprobe.ptx.text import entry_of
from ptxprobe.reduce import ptxbody

pytestmark = pytest.mark.study


def test_every_minimal_kernel_has_the_instructions_its_record_counts():
    seen = 0
    for matrix, rec in reduction.cases():
        if not rec.get("instructions_after"):
            continue
        ptx = reduction.minimal_ptx(matrix, rec["case"])
        assert len(ptxbody.parse(ptx, entry_of(ptx)).instructions()) == rec["instructions_after"], rec["case"]
        assert rec["one_minimal"] and rec["instructions_after"] < rec["instructions_before"]
        seen += 1
    assert seen >= 3


def test_the_public_condition_is_read_from_the_minimal_kernel():
    matrix = next(m for m, r in reduction.cases() if r["case"] == reduction.PUBLIC_CASE)
    ptx = reduction.minimal_ptx(matrix, reduction.PUBLIC_CASE)
    assert reduction.in_a_loop(ptx, reduction.PUBLIC_MMA)
    assert "rediscovered" in reduction.public_condition()
    # planted: the same kernel with the MMA's kind changed, or the loop's backward branch gone, is not a match
    assert not reduction.in_a_loop(ptx.replace("kind::f8f6f4", "kind::f16"), reduction.PUBLIC_MMA)
    no_loop = re.sub(r"^\s*bra(\.uni)?\s+\S+;\s*$", "", ptx, flags=re.M)
    assert not reduction.in_a_loop(no_loop, reduction.PUBLIC_MMA)


@pytest.mark.integration
def test_the_minimal_ffma_kernel_still_changes_under_the_name_checked_from_scratch(tmp_path, installed_ptxas_13):
    from ptxprobe.core.cache import Cache
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep
    from ptxprobe.static.verdicts import DIFFERS

    matrix = next(m for m, r in reduction.cases() if r["case"] == "sgemm")
    path = reduction.analysis.results_dir(matrix) / "sgemm" / "minimal.ptx"
    exp = experiment_from_dict({"name": "recheck", "kernels": [], "ptx_files": [str(path)],
                                "ptxas": [installed_ptxas_13.path], "names": ["{base}", "cutlass_{base}"],
                                "repeat": {"default": 2}})
    res = run_sweep(exp, tmp_path / "sweep", jobs=2, cache=Cache(tmp_path / "nocache", enabled=False),
                    progress=False, argv=["test"])
    verdicts = Counter(r["verdict"] for r in res.rows if not r["is_baseline"])
    assert verdicts and verdicts.keys() <= set(DIFFERS), verdicts
