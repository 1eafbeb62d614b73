"""Every record the study committed loads through ``ptxprobe.records.load`` and says, in today's layout, what its
file says (the upgrades drop only what they document: tuned.json's ``format``, reduce.json's nested ``last``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptxprobe.records import RECORDS, RunManifest, load
from ptxprobe.records.manifest import is_run_manifest

pytestmark = pytest.mark.study

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"
UPGRADED_AWAY = {"format", "last"}


def _said(value):
    if isinstance(value, dict):
        return {k: _said(v) for k, v in value.items() if v is not None}
    return [_said(v) for v in value] if isinstance(value, list) else value


def _committed() -> list[Path]:
    found = []
    for cls in RECORDS:
        for p in sorted(RESULTS.rglob(cls.FILE)):
            if cls is RunManifest and not is_run_manifest(json.loads(p.read_text())):
                continue  # a study step's own manifest (GPU, driver, tool hashes), not a run's
            found.append(p)
    return found


def test_every_committed_record_loads_and_keeps_what_its_file_says():
    paths = _committed()
    kinds = {p.name for p in paths}
    assert len(paths) > 100 and kinds == {cls.FILE for cls in RECORDS}, kinds
    for p in paths:
        doc = json.loads(p.read_text())
        rec = load(p)
        written = _said(rec.to_json())
        kept = {k: v for k, v in _said(doc).items() if k not in UPGRADED_AWAY}
        if p.name == RunManifest.FILE:  # the first GPU design's keys are read in today's words
            kept.pop("experiment"), written.pop("experiment")
        kept.setdefault("schema_version", 1)
        assert {k: written.get(k) for k in kept if k != "schema_version"} == {
            k: v for k, v in kept.items() if k != "schema_version"}, p


def test_every_committed_run_directory_reads_its_documents_through_the_records():
    """A run directory's manifest, calibration, GPU facts and program A/B are read through their records (RunDir):
    every committed run of every age reads."""
    from ptxprobe.runs.rundir import PROGRAM_AB, run_dirs

    runs = run_dirs(RESULTS)
    assert len(runs) > 90
    gpu_runs = 0
    for rd in runs:
        assert isinstance(rd.manifest, dict)
        gpu_runs += rd.calibration is not None and rd.gpu is not None
        if rd.has(PROGRAM_AB):
            assert rd.program_ab()["runs"]
    assert gpu_runs > 20


def test_every_committed_group_record_reads_through_its_record():
    """Every line of every committed groups.jsonl is a GroupRecord (RunDir.groups reads them through it)."""
    from ptxprobe.runs.rundir import run_dirs

    lines = [g for rd in run_dirs(RESULTS) if rd.has_runtime for g in rd.groups]
    assert len(lines) > 500 and all(g["group_id"] for g in lines)
    assert not any({"reps", "warmup", "flush_bytes"} & set(g.get("timing_plan") or {}) for g in lines)
