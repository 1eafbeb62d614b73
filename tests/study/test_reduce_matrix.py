"""The committed reduce matrix (experiments/results/2026-12-04-cpu-reduce-matrix) says what its own files say: each
minimal kernel has the instructions and the shape its record states, a 1-minimal flag stands only on a finished
reduction and agrees with reduce.json, each re-check from scratch kept the predicate, and the public Blackwell
condition is read from the minimal PTX itself. Faults planted in a copy of the matrix are seen."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from experiments.findings import reduction
from ptxprobe.ptx.text import entry_of
from ptxprobe.reduce import ptxbody

TIER = "study"  # the tier of each test here without its own (conftest)


def _reduced() -> list[dict]:
    return [r for r in reduction.cases() if r["status"] in reduction.REDUCED]


def test_the_committed_matrix_recomputes_from_its_own_files():
    assert reduction.problems() == []
    recs = reduction.cases()
    assert len(_reduced()) >= 8
    for r in _reduced():
        assert r["instructions_after"] < r["instructions_before"], r["case"]
        red = reduction.reduce_record(r["case"])
        if r["status"] == "done":  # the search ended: no single removal it knows keeps the predicate
            assert red["one_minimal"] is True and r["one_minimal"] is True, r["case"]
        else:  # stopped at its limit: the best kernel so far, never called minimal
            assert r["interrupted"] and not red.get("one_minimal") and not r["one_minimal"], r["case"]
    # every cell says what it is: reduced, the name changing nothing, or not run (with why)
    assert {r["status"] for r in recs} <= {*reduction.REDUCED, "name changes nothing", "no difference", "unavailable"}
    assert all(r.get("why") for r in recs if r["status"] == "unavailable")


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(reduction.matrix_dir(), tmp_path / "matrix"))


def _rewrite(where: Path, case: str, **changes) -> None:
    recs = reduction.cases(where)
    for r in recs:
        if r["case"] == case:
            for k, v in changes.items():
                if isinstance(v, dict):
                    r[k] = {**r[k], **v}
                else:
                    r[k] = v
    (where / "matrix.json").write_text(json.dumps(recs))


def test_an_instruction_missing_from_a_minimal_kernel_is_seen(tmp_path):
    where = _copy(tmp_path)
    case = next(r["case"] for r in _reduced() if r["one_minimal"])
    ptx = reduction.minimal_ptx(case, where)
    body = ptxbody.parse(ptx, entry_of(ptx))
    last = body.instructions()[-1]
    (where / case / "minimal.ptx").write_text(ptxbody.without(body, set(range(last.first, last.last + 1))))
    found = reduction.problems(where)
    assert any(case in p and "instructions" in p for p in found), found


def test_a_one_minimal_claim_without_its_evidence_is_seen(tmp_path):
    where = _copy(tmp_path)
    case = next(r["case"] for r in _reduced() if r["one_minimal"])
    path = where / case / "reduce.json.gz"
    red = json.loads(gzip.decompress(path.read_bytes()))
    red["one_minimal"] = False
    path.write_bytes(gzip.compress(json.dumps(red).encode()))
    assert any(case in p and "one_minimal" in p for p in reduction.problems(where))
    where = _copy(tmp_path / "second")
    _rewrite(where, case, interrupted=True)
    assert any(case in p and "did not finish" in p for p in reduction.problems(where))


def test_a_recheck_that_lost_the_predicate_and_a_false_no_change_cell_are_seen(tmp_path):
    where = _copy(tmp_path)
    case = _reduced()[0]["case"]
    _rewrite(where, case, recheck={"keep_holds": False})
    assert any(case in p and "re-check" in p for p in reduction.problems(where))
    nothing = [r["case"] for r in reduction.cases() if r["status"] == "name changes nothing"]
    if nothing:
        where = _copy(tmp_path / "second")
        _rewrite(where, nothing[0], scope={"differs": True, "verdict": "differs"})
        assert any(nothing[0] in p for p in reduction.problems(where))


def test_the_public_condition_is_read_from_the_minimal_kernel():
    public = [r for r in _reduced() if r.get("public")]
    assert public
    ptx = reduction.minimal_ptx(public[0]["case"])
    assert reduction.in_a_loop(ptx, reduction.PUBLIC_MMA)
    # planted: the same kernel with the MMA's kind changed, or the loop's backward branch gone, is not a match
    assert not reduction.in_a_loop(ptx.replace("kind::f8f6f4", "kind::f16"), reduction.PUBLIC_MMA)
    no_loop = re.sub(r"^\s*(@%p\d+\s+)?bra(\.uni)?\s+\S+;\s*$", "", ptx, flags=re.M)
    assert not reduction.in_a_loop(no_loop, reduction.PUBLIC_MMA)
    said = reduction.public_condition()
    assert "rediscovered" in said and "not rediscovered" not in said


@pytest.mark.integration
def test_the_minimal_ffma_kernel_still_changes_under_the_name_checked_from_scratch(tmp_path, installed_ptxas_13):
    from ptxprobe.core.cache import Cache
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep
    from ptxprobe.static.verdicts import DIFFERS

    path = reduction.matrix_dir() / "sgemm_sm90a_13.0" / "minimal.ptx"
    exp = experiment_from_dict({"name": "recheck", "kernels": [], "ptx_files": [str(path)],
                                "ptxas": [installed_ptxas_13.path], "names": ["{base}", "cutlass_{base}"],
                                "repeat": {"default": 2}})
    res = run_sweep(exp, tmp_path / "sweep", jobs=2, cache=Cache(tmp_path / "nocache", enabled=False),
                    progress=False, argv=["test"])
    verdicts = Counter(r["verdict"] for r in res.rows if not r["is_baseline"])
    assert verdicts and verdicts.keys() <= set(DIFFERS), verdicts
