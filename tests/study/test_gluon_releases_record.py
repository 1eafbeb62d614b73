"""The committed GPU check of the Gluon Hopper attention as every Triton release with its Gluon API builds it
(``experiments/benchmarks/gluon_releases.py``): each release the registry admits for the Gluon kernels was run,
every config agrees with float64, and the check's two controls held."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
from packaging.version import Version

from ptxprobe.sources import registry

pytestmark = pytest.mark.study

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "experiments/results/2026-12-05-h100-gluon-releases/releases.json"


def _script():
    spec = importlib.util.spec_from_file_location("gluon_releases", ROOT / "experiments/benchmarks/gluon_releases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def releases_not_shown_right(doc: dict, configs: int) -> list[str]:
    """Every admitted Gluon release whose record is missing, short of configs, or has a config that did not run
    or fell outside its dtype's bound; and the controls that did not hold."""
    lo, hi = registry.GLUON_TRITON
    admitted = {v for v in doc["builds"] if lo <= Version(v).release[:2] < hi}
    wrong = [f"{v}: not admitted" for v in doc["builds"] if v not in admitted]
    for v in sorted(admitted):
        rows = [r for r in doc["checks"] if r["release"] == v]
        if len(rows) != configs:
            wrong.append(f"{v}: {len(rows)} of {configs} configs")
        for r in rows:
            bound = doc["bound"][r["config"].split("-")[0]]
            if not (r["ran"] and r["within_bound"] and r["rel_err_vs_reference"] < bound):
                wrong.append(f"{v} {r['config']}: {r.get('why_not') or r['rel_err_vs_reference']}")
    own = [r for r in doc["checks"] if r["release"] == doc["machine_triton"]]
    if not own or not all(r["same_machine_code_as_this_machines_jit"] for r in own):
        wrong.append("the machine's own release, built offline, is not the code its JIT compiles")
    if doc["plant"].get("caught") is not True:
        wrong.append("the planted wrong kernel was not caught")
    return wrong


def test_every_release_with_the_gluon_api_computes_attention_on_the_gpu():
    doc = json.loads(RECORD.read_text())
    mod = _script()
    assert releases_not_shown_right(doc, len(mod.configs())) == []
    lo, hi = registry.GLUON_TRITON
    assert {Version(v).release[:2] for v in doc["builds"]} == {(3, m) for m in range(lo[1], hi[1])}
    assert doc["gpu"]["arch"] == "sm_90a"


def test_a_wrong_record_is_caught():
    """Plants: a release outside its bound, a missing release, a failed control, each read as wrong."""
    doc = json.loads(RECORD.read_text())
    n = len(_script().configs())
    bad = copy.deepcopy(doc)
    row = next(r for r in bad["checks"] if r["release"] == "3.9.0" and r["config"].startswith("fp16"))
    row["rel_err_vs_reference"] = 0.5
    assert any(w.startswith("3.9.0 fp16") for w in releases_not_shown_right(bad, n))
    short = copy.deepcopy(doc)
    short["checks"] = [r for r in short["checks"] if r["release"] != "3.8.0"]
    assert "3.8.0: 0 of 12 configs" in releases_not_shown_right(short, n)
    plant = copy.deepcopy(doc)
    plant["plant"]["caught"] = False
    assert "the planted wrong kernel was not caught" in releases_not_shown_right(plant, n)


def test_the_summary_lines_are_the_records():
    lines = _script().release_lines(json.loads(RECORD.read_text()))
    assert len(lines) == 5 and all(" 12/12 within bound" in ln for ln in lines)
