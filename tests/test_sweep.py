"""Sweeps: real assembly, baseline comparisons, verdicts, resume without loss, cache hits, CLI."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from ptxprobe import sweep
from ptxprobe.cache import Cache
from ptxprobe.cli import main
from tests.conftest import make_experiment

REQUIRED = [
    "kernel",
    "config",
    "dtype",
    "arch",
    "ptxas_version",
    "ptxas_sha256",
    "ptxas_flags",
    "name",
    "baseline_name",
    "status",
    "text_sha256",
    "text_bytes",
    "capmerc_bytes",
    "registers",
    "spill_store_bytes",
    "spill_load_bytes",
    "stack_bytes",
    "n_instructions",
    "same_text_as_baseline",
    "ptxas_seconds",
    "verdict",
]


def small_experiment(**kw):
    return make_experiment(**{"name": "small", "repeat": {"default": 2, "sm_100a": 3}, **kw})


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    exp = small_experiment()
    outcome = sweep.run_sweep(exp, out, jobs=2, progress=False, argv=["test"])
    return exp, out, outcome


def test_rows_have_the_promised_columns(small_run):
    exp, out, outcome = small_run
    assert outcome.ran == 3 * 2 + 3 * 3  # sm_90a: 3 names x 2 repeats; sm_100a: 3 names x 3 repeats
    df = pd.read_parquet(out / "results.parquet")
    assert not set(REQUIRED) - set(df.columns)
    assert len(df) == outcome.ran
    assert (df.status == "ok").all()
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(df)
    man = json.loads((out / "manifest.json").read_text())
    assert man["triton"] and any(t["kind"] == "ptxas" for t in man["tools"])
    assert "kernels/triton_attention.py" in man["kernel_sources"]


def test_control_name_is_identical_and_baseline_marked(small_run):
    _, _, outcome = small_run
    df = pd.DataFrame(outcome.rows)
    base = df[df.is_baseline]
    assert (base.verdict == "baseline").all()
    ctrl = df[(df.name == "xutlass_attention") & (df.arch == "sm_90a")]
    assert (ctrl.verdict == "identical").all() and ctrl.same_text_as_baseline.all()
    assert (df.rename_equivalent).all()


def test_cutlass_name_changes_blackwell_code(small_run):
    """Discovered, not assumed: on sm_100a the cutlass name gives other code than the baseline's runs."""
    _, _, outcome = small_run
    df = pd.DataFrame(outcome.rows)
    cut = df[(df.name == "cutlass_attention") & (df.arch == "sm_100a")]
    base = df[(df.name == "attention") & (df.arch == "sm_100a")]
    assert cut.verdict.iloc[0] in ("differs_deterministic", "differs_beyond_noise")
    assert not set(cut.code_sha256) & set(base.code_sha256)
    assert cut.capmerc_bytes.min() > base.capmerc_bytes.max()


def test_static_verdict_rules():
    v = sweep.static_verdict
    assert v(Counter(a=3), Counter(a=3))[0] == "identical"
    assert v(Counter(a=2, b=1), Counter(a=1, b=2))[0] == "differs_within_noise"
    assert v(Counter(a=2, b=1), Counter(b=3))[0] == "differs_within_noise"
    verdict, conf = v(Counter(a=5), Counter(c=5))
    assert verdict == "differs_deterministic" and conf > 0.99
    verdict, conf = v(Counter(a=1, b=1), Counter(c=1, d=1))
    assert verdict == "differs_beyond_noise" and conf < 0.9  # few runs of a noisy baseline: weak evidence
    assert v(Counter(), Counter(a=1)) == ("", None)
    assert v(Counter(a=1), Counter(c=1))[0] == "differs_unrepeated"  # one run each proves no determinism


def test_resume_after_interruption_loses_and_redoes_nothing(tmp_path):
    exp = small_experiment(archs=["sm_90a"], repeat={"default": 2})
    out = tmp_path / "run"
    first = sweep.run_sweep(exp, out, jobs=2, progress=False, max_variants=3, cache=Cache(tmp_path / "c"))
    assert first.ran == 3
    # simulate a crash mid-write: a torn last line in the log
    with open(out / sweep.LOG, "a") as f:
        f.write('{"variant_id": "torn')
    second = sweep.run_sweep(exp, out, jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert second.skipped == 3 and second.ran == 3
    ids = [r["variant_id"] for r in second.rows]
    assert len(ids) == len(set(ids)) == 6
    third = sweep.run_sweep(exp, out, jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert third.ran == 0 and third.skipped == 6


def test_cache_hits_on_a_fresh_output_dir(tmp_path):
    exp = small_experiment(archs=["sm_90a"], names=["{base}", "cutlass_{base}"], repeat={"default": 1})
    cache = Cache(tmp_path / "c")
    a = sweep.run_sweep(exp, tmp_path / "a", jobs=2, progress=False, cache=cache)
    b = sweep.run_sweep(exp, tmp_path / "b", jobs=2, progress=False, cache=cache)
    assert not any(r["cached"] for r in a.rows)
    assert all(r["cached"] for r in b.rows)
    assert {r["variant_id"]: r["code_sha256"] for r in a.rows} == {r["variant_id"]: r["code_sha256"] for r in b.rows}


def test_crashing_ptxas_row_in_sweep(tmp_path, fake_ptxas):
    exp = small_experiment(
        archs=["sm_90a"], names=["{base}", "cutlass_{base}"], repeat={"default": 1}, ptxas=[str(fake_ptxas("crash"))]
    )
    out = sweep.run_sweep(exp, tmp_path / "r", jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert {r["status"] for r in out.rows} == {"crashed"}
    assert all("starting" in r["error"] for r in out.rows)


def test_experiment_errors(tmp_path):
    from ptxprobe.errors import SpecError

    with pytest.raises(SpecError, match="unknown sweep keys"):
        sweep.experiment_from_dict({"name": "x", "colours": ["red"]})
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\nnames=")
    with pytest.raises(SpecError, match="not valid TOML"):
        sweep.load_experiment(bad)
    with pytest.raises(SpecError, match="not found"):
        sweep.load_experiment(tmp_path / "missing.toml")
    exp = sweep.override(sweep.load_experiment(sweep.DEFAULT_EXPERIMENT), ["archs=sm_100a", "repeat=2", "causal=true"])
    assert exp.archs == ("sm_100a",) and exp.repeats("sm_100a") == 2 and exp.causal == (True,)


def test_cli_on_user_ptx_and_bad_name(tmp_path, capsys):
    from tests.test_rename import NVCC_STYLE

    ptx = tmp_path / "user.ptx"
    ptx.write_text(NVCC_STYLE)
    rc = main(
        [
            "rename-sweep",
            "--ptx",
            str(ptx),
            "-o",
            str(tmp_path / "out"),
            "-q",
            "--json",
            "-s",
            "names={base},cutlass_{base}",
            "-s",
            "repeat=1",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert {s["name"] for s in summary} == {"_Z9my_kernelPf", "_Z17cutlass_my_kernelPf"}
    rc = main(["rename-sweep", "--ptx", str(ptx), "-o", str(tmp_path / "out2"), "-q", "-s", "names={base},bad-name"])
    assert rc == 2
    assert "not a valid PTX identifier" in capsys.readouterr().err


def test_default_experiment_is_valid():
    exp = sweep.load_experiment(sweep.DEFAULT_EXPERIMENT)
    assert set(exp.archs) == {"sm_90a", "sm_100a", "sm_120a"}
    assert exp.names[0] == "{base}" and "cutlass_{base}" in exp.names
    assert any(len(n) == len("cutlass_{base}") and "cutlass" not in n for n in exp.names)  # a same-length control
    jobs = sweep.emit_jobs(exp)
    kinds = {(j[0], j[5]) for j in jobs}
    assert ("attention_gluon", "sm_100a") in kinds and ("attention_gluon", "sm_90a") not in kinds
    assert ("attention_cuda", "sm_90a") in kinds and not any(j[0] == "attention_cuda" and j[1] == "fp8e5" for j in jobs)
    assert sum(j[0] == "attention" for j in jobs) == 12
