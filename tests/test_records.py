"""The records a run directory holds: typed, versioned, one loader for every layout, refusing what they do not say."""

from __future__ import annotations

import json

import pytest

from ptxprobe.cli import main
from ptxprobe.records import (
    RECORDS,
    ApplyRecord,
    Calibration,
    DamagedRecord,
    GpuFacts,
    ProgramAB,
    ReduceRecord,
    RunManifest,
    TunedDocument,
    TunedKernel,
    load,
)

pytestmark = pytest.mark.unit

KERNEL = {"kernel": "k.ptx", "arch": "sm_90a", "status": "tuned", "entry": "k", "user": {"label": "k"},
          "best": {"label": "cutlass_k"}, "best_is_yours": False, "gain": {"ratio": 1.02, "low": 1.01, "high": 1.03},
          "pruned": [{"reason": "same code as", "name": "x"}], "distinct": [], "gpu_seconds": 3.5, "seq_len": 4096}
TUNED = {"command": ["ptxprobe", "tune"], "space": {"names": ["{base}"]}, "ptxas": {}, "static_sweep": "t/static",
         "kernels": [KERNEL], "gpu_seconds": 3.5, "numerics": "bitwise"}
EXAMPLES = {
    TunedDocument: TUNED,
    ApplyRecord: {"command": ["prog"], "rounds": 8, "metric": "ms", "kernels": [
        {"entry": "k", "name": "cutlass_k", "cubin": "a.cubin", "ptx_sha256": "p", "ptxas_version": "12.8.93",
         "options": ["-O2"], "machine_code_sha256": "m", "same_ptx_as_tuned": True, "verified": True}],
        "comparisons": [{"arm": "aa", "verdict": "equivalent"}], "calibration_failed": False},
    ProgramAB: {"command": ["prog"], "arms": [{"label": "aa"}], "runs": [], "comparisons": [],
                "calibration_failed": True},
    ReduceRecord: {"ptxprobe_version": "0.1.0", "identity": {}, "input": "k.ptx", "entry": "k", "arch": "sm_90a",
                   "ptxas": {"version": "13.0.88"}, "baseline_name": "k", "renamed_name": "cutlass_k",
                   "status": "done", "steps": [{"cut": 3}]},
    RunManifest: {"command": ["ptxprobe", "rename-sweep"], "experiment": {"names": ["{base}"]}, "tools": []},
    Calibration: {"groups": 48, "passed": False, "failures": ["power 5/6 at 0.005 < 0.95"], "aa_false_positives": 0,
                  "power": {"0.005": 0.833}, "gpu_seconds": 195.3},
    GpuFacts: {"gpu": "NVIDIA H200", "arch": "sm_90a", "sms": 132, "uuid": "GPU-0b6a794f", "power_limit_w": "700.00"},
}


def test_every_record_file_has_an_example_here():
    assert set(EXAMPLES) == set(RECORDS)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_a_record_written_reads_back_the_same_and_says_its_layout(cls, tmp_path):
    rec = cls.from_json(EXAMPLES[cls])
    path = rec.write(tmp_path)
    assert path.name == cls.FILE and json.loads(path.read_text())["schema_version"] == cls.SCHEMA_VERSION
    assert load(path) == rec == load(tmp_path)
    written = said(rec.to_json())
    assert all(written[k] == said(v) for k, v in EXAMPLES[cls].items()), "a value changed on the way to its file"


def said(value):
    """A JSON value with its nulls left out, at every depth (absent and null mean the same)."""
    if isinstance(value, dict):
        return {k: said(v) for k, v in value.items() if v is not None}
    return [said(v) for v in value] if isinstance(value, list) else value


@pytest.mark.parametrize(("edit", "said"), [
    (lambda d: d.update(surprise=1), "'surprise' not a field of TunedDocument"),
    (lambda d: d["kernels"][0].update(registers="many"), "'registers' not a field of TunedKernel"),
    (lambda d: d.update(gpu_seconds="3.5"), '"gpu_seconds" is a string, expected a number'),
    (lambda d: d["kernels"][0].update(best_is_yours=1), '"best_is_yours" is an integer, expected true/false'),
    (lambda d: d["kernels"][0].update(seq_len=True), '"seq_len" is true/false, expected an integer'),
    (lambda d: d.update(kernels={"k": KERNEL}), '"kernels" is an object, expected a list'),
    (lambda d: d.pop("static_sweep"), 'no "static_sweep" (TunedDocument always has it)'),
    (lambda d: d.update(schema_version=3), "schema_version 3 was written by a newer ptxprobe"),
    (lambda d: d.update(schema_version="2"), "schema_version '2' is not a layout number"),
])
def test_a_document_is_refused_naming_the_key_and_the_fault(edit, said, tmp_path):
    doc = json.loads(json.dumps(TUNED))
    edit(doc)
    (tmp_path / "tuned.json").write_text(json.dumps(doc))
    with pytest.raises(DamagedRecord, match="tuned.json") as exc:
        load(tmp_path / "tuned.json")
    assert said in str(exc.value)


def test_older_layouts_load_in_todays_words(tmp_path):
    """tuned.json layout 1 said ``format``; reduce.json layout 1 nested every earlier step under ``last``; a layout-1
    manifest's first GPU design had one slowed control and timing keys it never used."""
    (tmp_path / "tuned.json").write_text(json.dumps({**TUNED, "format": 1}))
    assert load(tmp_path / "tuned.json") == TunedDocument.from_json(TUNED)
    old = {**EXAMPLES[ReduceRecord], "last": {**EXAMPLES[ReduceRecord], "last": {"status": "running"}}}
    (tmp_path / "reduce.json").write_text(json.dumps(old))
    assert load(tmp_path / "reduce.json") == ReduceRecord.from_json(EXAMPLES[ReduceRecord])
    (tmp_path / "reduce.json").write_text(json.dumps({**old, "schema_version": 2}))
    with pytest.raises(DamagedRecord, match="'last' not a field of ReduceRecord"):
        load(tmp_path / "reduce.json")
    first = {"command": "ptxprobe rename-sweep --run", "experiment": {"run": {
        "slow_control": True, "slow_fraction": 0.02, "timing": {"reps": 5, "warmup": 2, "target_ms": 5}}}}
    (tmp_path / "manifest.json").write_text(json.dumps(first))
    run = load(tmp_path / "manifest.json").experiment["run"]
    assert run == {"calibrate": True, "timing": {"target_ms": 5}}


def test_what_is_no_record_is_refused_in_one_line(tmp_path):
    (tmp_path / "notes.json").write_text("{}")
    (tmp_path / "manifest.json").write_text(json.dumps({"what": "a benchmark's own manifest"}))
    (tmp_path / "tuned.json").write_text("{not json")
    for path, said in ((tmp_path / "notes.json", "not a record file"), (tmp_path / "manifest.json", "no run's"),
                       (tmp_path / "tuned.json", "not a tuned.json ptxprobe can read"),
                       (tmp_path, "holds 2 record files")):
        with pytest.raises(DamagedRecord, match=said):
            load(path)


def test_tune_writes_its_answer_through_the_record_and_apply_refuses_a_damaged_one(tmp_path, capsys):
    """The answer a stage builds is checked against its record where it is written: a kernel record with a key
    TunedKernel does not name fails there, not in a reader later; apply reads tuned.json through the record."""
    from ptxprobe.tune.answer import document

    with pytest.raises(DamagedRecord, match="'registers' not a field of TunedKernel"):
        document([{**KERNEL, "registers": 90}], space={}, ptxas={}, gpu=None, static_dir="s", note="",
                 race_plan=None, argv=["tune"], numerics="bitwise")
    (tmp_path / "tuned.json").write_text(json.dumps({**TUNED, "kernels": [{**KERNEL, "best_is_yours": "no"}]}))
    assert main(["apply", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and '"best_is_yours" is a string, expected true/false' in err
    assert TunedKernel.from_json(KERNEL).best["label"] == "cutlass_k"


def test_a_group_line_is_checked_before_either_log_is_written(tmp_path):
    """A GPU group's record with a key GroupRecord does not name is refused before its rows or its line are
    appended (the two logs stay in step); a right one lands in groups.jsonl as it was."""
    from types import SimpleNamespace

    from ptxprobe.gpu.dispatch import append_group
    from ptxprobe.runs.rundir import RunDir

    log, group = tmp_path / "runtime.jsonl", SimpleNamespace(group_id="g1")
    record = {"aa": {"ratio_vs_baseline": 1.0}, "calibration": None, "identical_code": [], "order_seed": 7,
              "compared": [["{base}", "cutlass_{base}"]], "timing_plan": {"rounds": 8, "stopping": "each"},
                  "gpu_seconds": 2.5}
    with pytest.raises(DamagedRecord, match="'clock' not a field of GroupRecord"):
        append_group(str(log), group, [{"label": "{base}"}], {**record, "clock": 1980})
    assert not log.exists() and not (tmp_path / "groups.jsonl").exists()
    append_group(str(log), group, [{"label": "{base}"}], record)
    assert RunDir(tmp_path).groups == [{**record, "group_id": "g1"}]
    # a plan recorded before comparisons stopped each on its own ran every pair until all could stop
    old_plan = {**record, "timing_plan": {"rounds": 8}}
    append_group(str(log), SimpleNamespace(group_id="g2"), [{"label": "{base}"}], old_plan)
    assert RunDir(tmp_path).groups[1]["timing_plan"] == {"stopping": "together", "rounds": 8}


def test_a_run_manifest_read_as_a_mapping_keeps_its_absent_keys_absent(tmp_path):
    """RunDir.manifest is the recorded manifest checked and upgraded, not the record with every field set: a key
    an older run never wrote stays absent, so a reader's ``manifest.get("kernel_sources", {})`` gets its default
    (the record's null would reach ``.items()`` as None)."""
    from ptxprobe.runs.rundir import RunDir

    (tmp_path / "manifest.json").write_text(json.dumps({"command": "ptxprobe rename-sweep", "experiment": {
        "names": ["{base}", "cutlass_{base}"], "run": {"slow_control": True, "timing": {"reps": 5}}}}))
    manifest = RunDir(tmp_path).manifest
    assert "kernel_sources" not in manifest and manifest.get("kernel_sources", {}) == {}
    assert manifest["schema_version"] == 1 and manifest["experiment"]["run"] == {"calibrate": True, "timing": {}}
