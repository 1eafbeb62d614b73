"""Every committed run directory reads through ``RunDir``, and ``report``, ``repro`` and ``explain --analyze-only``
work on it (CPU only).

``report`` runs on every directory with static rows (an empty cache: no SASS listings). ``repro`` runs on every
one up to its plan (the recorded variants, the environment check against the tools here, the recorded
experiment rebuilt); the full re-assembly, with its runtime part declined on a CPU machine, runs on one small
GPU run. ``explain --analyze-only`` runs wherever profiles are committed.
"""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import pytest

from experiments import RESULTS
from ptxprobe.core.cache import Cache
from ptxprobe.runs.rundir import RunDir, run_dirs
from tests.recorded_env import needs_recorded_triton

pytestmark = pytest.mark.study

RUNS = run_dirs(RESULTS)
SWEEPS = [rd for rd in RUNS if rd.has_static]
FULL_REPRO = "2026-12-02-h200-aa-rounds"  # a small timed run: static part re-checked, runtime declined


def _id(rd: RunDir) -> str:
    return str(rd.path.relative_to(RESULTS))


@cache
def _tools():
    from ptxprobe.toolchain.tools import discover

    return discover()


def test_every_committed_directory_is_found():
    assert len(SWEEPS) >= 30 and any(rd.has_runtime for rd in RUNS)
    names = {p.name for p in RESULTS.iterdir()}
    not_runs = {"2026-12-04-cpu-bench", "2026-12-05-cpu-module-bench", "2026-12-05-cpu-library-sweeps",
                "2026-12-02-cpu-ray-bench", "2026-12-02-h200-gpu-tests", "2026-12-04-h200-gpu-tests"}
    assert names <= {rd.path.relative_to(RESULTS).parts[0] for rd in RUNS} | not_runs


@pytest.mark.parametrize("rd", RUNS, ids=_id)
def test_the_adapter_reads_it(rd):
    assert rd.manifest or rd.has_static
    if rd.has_static:
        rows = rd.static_rows()
        assert rows and all(r.get("verdict") is not None for r in rows)
        assert len(rd.static_table()) == len(rows)
        if rd.has("variants.jsonl"):
            assert len(rows) == len(rd.variants)
    if rd.has_runtime:
        rows = rd.runtime_rows()
        assert rows and len(rd.runtime_table()) == len(rows)
        assert "times_ms" not in rd.runtime_table().columns


@pytest.mark.parametrize("rd", SWEEPS, ids=_id)
def test_report(rd, tmp_path):
    from ptxprobe.reports import html

    out = html.build_report(rd.path, tmp_path / "report", cache=Cache(tmp_path / "cache"))
    assert (tmp_path / "report" / "index.html").exists() and out["records"]
    assert bool(out["runtime"]) == rd.has_runtime


@pytest.mark.parametrize("rd", SWEEPS, ids=_id)
def test_repro_plan(rd):
    from ptxprobe.reports import repro
    from ptxprobe.static.experiment import experiment_from_dict, recorded_axes

    manifest, recorded = repro._load(rd.path)
    assert {"ptxas_sha256", "code_sha256", "status"} <= set(recorded[0])
    problems, _found = repro.check_environment(manifest, recorded, _tools())
    assert all(isinstance(p, str) for p in problems)
    assert experiment_from_dict(recorded_axes(manifest)).archs


def test_repro_rechecks_the_static_part_and_declines_the_runtime(tmp_path):
    from ptxprobe.reports import repro

    needs_recorded_triton(RESULTS / FULL_REPRO)
    out = repro.repro(RESULTS / FULL_REPRO, tmp_path / "repro", jobs=2)
    assert out.rows and not out.problems, out.problems
    assert all(r.status in (repro.MATCH, repro.WITHIN_SET) for r in out.rows), [r for r in out.rows if not r.status]
    assert "not re-checked" in out.runtime_note


@pytest.mark.parametrize("rd", [rd for rd in RUNS if rd.has("explain/index.json")], ids=_id)
def test_explain_analyze_only(rd, tmp_path):
    from ptxprobe.explain.run import EXPLAIN_JSON, analyze

    run = tmp_path / rd.path.name
    shutil.copytree(rd.path, run)
    assert analyze(run) == json.loads((rd.path / EXPLAIN_JSON).read_text())


def test_a_compacted_run_resumes_and_compacts_again(tmp_path):
    """Lines appended after compaction are read after the compressed part, and join it on the next compaction."""
    run = tmp_path / "run"
    shutil.copytree(RESULTS / FULL_REPRO, run)
    rd = RunDir(run)
    before = rd.variants
    extra = {**before[0], "variant_id": "appended"}
    (run / "variants.jsonl").write_text(json.dumps(extra) + "\n")
    assert [r["variant_id"] for r in rd.variants] == [r["variant_id"] for r in before] + ["appended"]
    rd.compact()
    assert not (run / "variants.jsonl").exists() and len(RunDir(run).variants) == len(before) + 1
    assert {p.name for p in rd.rebuild()} == {"results.parquet", "runtime.parquet"}
    assert Path(run / "results.parquet").exists()
