"""Sweeps: real assembly, baseline comparisons, verdicts, resume without loss, cache hits, CLI."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from ptxprobe.cli import main
from ptxprobe.core.cache import Cache
from ptxprobe.core.store import LOG
from ptxprobe.records.rows import STATIC, check_rows
from ptxprobe.sources import registered_sources
from ptxprobe.static.experiment import experiment_from_dict, load_experiment, override
from ptxprobe.static.sweep import run_sweep
from ptxprobe.static.verdicts import static_verdict
from tests.conftest import make_experiment

pytestmark = pytest.mark.integration


def small_experiment(**kw):
    return make_experiment(**{"name": "small", "repeat": {"default": 2, "sm_100a": 3}, **kw})


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    exp = small_experiment()
    outcome = run_sweep(exp, out, jobs=2, progress=False, argv=["test"])
    return exp, out, outcome


def test_rows_have_the_promised_columns(small_run):
    exp, out, outcome = small_run
    assert outcome.ran == 3 * 2 + 3 * 3  # sm_90a: 3 names x 2 repeats; sm_100a: 3 names x 3 repeats
    df = pd.read_parquet(out / "results.parquet")
    assert set(df.columns) == {c.name for c in STATIC}
    assert len(df) == outcome.ran
    assert (df.status == "ok").all()
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(df)
    assert check_rows(rows, STATIC) == []
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
    assert cut.verdict.iloc[0] == "differs"
    assert not set(cut.code_sha256) & set(base.code_sha256)
    assert cut.capmerc_bytes.min() > base.capmerc_bytes.max()


def test_static_verdict_rules():
    v = static_verdict
    assert v(Counter(a=3), Counter(a=3))[0] == "identical"
    assert v(Counter(a=2, b=1), Counter(a=1, b=2))[0] == "differs_within_noise"
    assert v(Counter(a=2, b=1), Counter(b=3))[0] == "differs_within_noise"
    verdict, conf = v(Counter(a=5), Counter(c=5))
    assert verdict == "differs" and conf > 0.99
    verdict, conf = v(Counter(a=1, b=1), Counter(c=1, d=1))
    assert verdict == "differs" and conf < 0.9  # few runs of a noisy baseline: weak evidence
    # the verdict's name does not flip when a rare second baseline cubin shows up in more runs
    assert v(Counter(a=5), Counter(c=5))[0] == v(Counter(a=9, b=1), Counter(c=10))[0] == "differs"
    assert v(Counter(), Counter(a=1)) == ("", None)
    assert v(Counter(a=1), Counter(c=1))[0] == "differs_unrepeated"  # one run each proves no determinism


def test_resume_after_interruption_loses_and_redoes_nothing(tmp_path):
    exp = small_experiment(archs=["sm_90a"], repeat={"default": 2})
    out = tmp_path / "run"
    first = run_sweep(exp, out, jobs=2, progress=False, max_variants=3, cache=Cache(tmp_path / "c"))
    assert first.ran == 3
    # simulate a crash mid-write: a torn last line in the log
    with open(out / LOG, "a") as f:
        f.write('{"variant_id": "torn')
    second = run_sweep(exp, out, jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert second.skipped == 3 and second.ran == 3
    ids = [r["variant_id"] for r in second.rows]
    assert len(ids) == len(set(ids)) == 6
    third = run_sweep(exp, out, jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert third.ran == 0 and third.skipped == 6


def test_cache_hits_on_a_fresh_output_dir(tmp_path):
    exp = small_experiment(archs=["sm_90a"], names=["{base}", "cutlass_{base}"], repeat={"default": 1})
    cache = Cache(tmp_path / "c")
    a = run_sweep(exp, tmp_path / "a", jobs=2, progress=False, cache=cache)
    b = run_sweep(exp, tmp_path / "b", jobs=2, progress=False, cache=cache)
    assert not any(r["cached"] for r in a.rows)
    assert all(r["cached"] for r in b.rows)
    assert {r["variant_id"]: r["code_sha256"] for r in a.rows} == {r["variant_id"]: r["code_sha256"] for r in b.rows}


def test_crashing_ptxas_row_in_sweep(tmp_path, fake_ptxas):
    exp = small_experiment(
        archs=["sm_90a"], names=["{base}", "cutlass_{base}"], repeat={"default": 1}, ptxas=[str(fake_ptxas("crash"))]
    )
    out = run_sweep(exp, tmp_path / "r", jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    assert {r["status"] for r in out.rows} == {"crashed"}
    assert all("starting" in r["error"] for r in out.rows)


def test_experiment_errors(tmp_path):
    from ptxprobe.core.errors import SpecError

    with pytest.raises(SpecError, match="unknown sweep keys"):
        experiment_from_dict({"name": "x", "colours": ["red"]})
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\nnames=")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_experiment(bad)
    with pytest.raises(SpecError, match="not found"):
        load_experiment(tmp_path / "missing.toml")
    exp = override(load_experiment(None), {"archs": ["sm_100a"], "repeat": 2, "causal": [True]})
    assert exp.archs == ("sm_100a",) and exp.repeats("sm_100a") == 2 and exp.families.causal == (True,)


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
    doc = json.loads(capsys.readouterr().out)  # exactly one JSON document on stdout
    assert {s["name"] for s in doc["summary"]} == {"_Z9my_kernelPf", "_Z17cutlass_my_kernelPf"}
    assert rc == (1 if doc["pivot"][0]["name_matters"] else 0)
    rc = main(["rename-sweep", "--ptx", str(ptx), "-o", str(tmp_path / "out2"), "-q", "-s", "names={base},bad-name"])
    assert rc == 2
    assert "not a valid PTX identifier" in capsys.readouterr().err


def test_default_experiment_is_valid():
    exp = load_experiment(None)
    assert set(exp.archs) == {"sm_90a", "sm_100a", "sm_120a"}
    assert exp.names[0] == "{base}" and "cutlass_{base}" in exp.names
    assert any(len(n) == len("cutlass_{base}") and "cutlass" not in n for n in exp.names)  # a same-length control
    jobs = [(s.family_name, s.dtype, a) for s in registered_sources(exp) for a in s.build_archs(exp.archs)]
    kinds = {(j[0], j[2]) for j in jobs}
    assert ("attention_gluon", "sm_100a") in kinds and ("attention_gluon", "sm_90a") not in kinds
    assert ("attention_cuda", "sm_90a") in kinds and not any(j[0] == "attention_cuda" and j[1] == "fp8e5" for j in jobs)
    assert sum(j[0] == "attention" for j in jobs) == 12


def test_adaptive_repeats_assemble_a_difference_until_its_confidence_and_nothing_else(tmp_path):
    from ptxprobe.static.adaptive import more_runs, runs_for

    exp = small_experiment(archs=["sm_90a"], repeat={"default": 2}, max_repeat=6, confidence=0.98)
    out = run_sweep(exp, tmp_path / "r", jobs=2, progress=False, cache=Cache(tmp_path / "c"))
    runs = {r["name"]: r["n_runs"] for r in out.rows}
    need = runs_for(0.98, 6)  # a deterministic difference needs this many runs a side
    assert need == 3
    assert runs["cutlass_attention"] == need and runs["attention"] == need  # fp8 on sm_90a: the code differs
    assert runs["xutlass_attention"] == 2  # identical to the baseline: more runs cannot make it differ
    cut = next(r for r in out.rows if r["name"] == "cutlass_attention")
    assert cut["verdict"] == "differs" and cut["verdict_confidence"] >= 0.98
    # a noisy baseline needs more: with two baseline outputs the same variant evidence is not enough
    noisy = more_runs(Counter(a=2, b=1), {"t": Counter(c=3)}, {"{base}": 3, "t": 3}, "{base}", 0.98, 8)
    assert noisy == {"{base}", "t"}
    assert more_runs(Counter(a=3), {"t": Counter(a=3)}, {"{base}": 3, "t": 3}, "{base}", 0.98, 8) == set()
    assert more_runs(Counter(a=2), {"t": Counter(c=2)}, {"{base}": 2, "t": 2}, "{base}", 0.98, 2) == set()  # the cap


def test_a_row_is_fsynced_only_where_its_assembly_cost_more_than_the_sync(tmp_path, monkeypatch):
    """Every row is written and flushed; only one whose ptxas run took at least CHEAP_ASSEMBLY_S (or whose cost is
    unknown) is fsynced: a Triton library's hundreds of small kernels spent a tenth of their sweep in fsync. Counted
    on a real sweep of a small kernel from an empty cache (syncing every uncached row planted back: fails)."""
    from ptxprobe.core.store import CHEAP_ASSEMBLY_S, append_records, worth_syncing
    from ptxprobe.static import sweep

    assert not worth_syncing({"cached": True, "ptxas_seconds": 5.0})
    assert worth_syncing({"cached": False, "ptxas_seconds": None})
    assert worth_syncing({"cached": False, "ptxas_seconds": CHEAP_ASSEMBLY_S})
    assert not worth_syncing({"cached": False, "ptxas_seconds": CHEAP_ASSEMBLY_S / 2})
    synced = []

    def counted(f, records, durable=True):
        synced.extend(records if durable else [])
        append_records(f, records, durable)

    monkeypatch.setattr(sweep, "append_records", counted)
    src = "tests/inputs/triton39_row_softmax.ptx"
    out = tmp_path / "run"
    monkeypatch.setenv("PTXPROBE_CACHE", str(tmp_path / "cache"))
    assert main(["rename-sweep", "--ptx", src, "-s", "archs=sm_90a", "-s", "ptxas=triton", "-s", "repeat=3",
                 "-s", "max_repeat=0", "--no-run", "-q", "-o", str(out)]) in (0, 1)
    rows = [json.loads(x) for x in (out / LOG).read_text().splitlines()]
    costly = [r for r in rows if worth_syncing(r)]
    assert len(rows) == 9 and len(synced) == len(costly), (len(synced), [r["ptxas_seconds"] for r in rows])
