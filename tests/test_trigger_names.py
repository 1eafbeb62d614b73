"""A kernel whose own name already holds the trigger (``cutlass_gluon_attention``, every CuTe DSL kernel): the
sweep compares the name without it, the name as given and a control, instead of two triggered names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptxprobe.ptx.rename import MIXED_TRIGGER_NAMES, TRIGGER_FREE_NAMES, apply_template
from tests.ptx_text import AXPY_PTX

pytestmark = pytest.mark.integration


def ptxprobe(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ptxprobe", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd)


def test_templates_without_the_trigger():
    e = "cutlass_gluon_attention"
    assert [apply_template(t, e) for t in TRIGGER_FREE_NAMES] == [
        "xutlass_gluon_attention", "cutlass_gluon_attention", "zutlass_gluon_attention"]
    assert apply_template("{base_untriggered}", "plain_kernel") == "plain_kernel"


def _rows(out):
    return [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]


def test_a_triggered_baseline_is_compared_with_its_trigger_free_name(tmp_path):
    ptx = tmp_path / "cutlass_attention.ptx"
    r = ptxprobe("emit", "--kernel", "attention", "--dtype", "fp8e5", "--arch", "sm_90a", "--name",
                 "cutlass_attention", "-o", str(ptx))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    r = ptxprobe("rename-sweep", "--ptx", str(ptx), "-s", "repeat=2", "--no-run", "-o", str(out))
    assert "every kernel's symbol contains 'cutlass' (cutlass_attention: its own name)" in r.stderr
    assert r.returncode == 1, r.stderr  # the trigger in the given name changes the code
    rows = _rows(out)
    by = {r["name_template"]: r for r in rows if r["repeat"] == 0}
    assert set(by) == set(TRIGGER_FREE_NAMES)
    assert by["{base}"]["baseline_name"] == "xutlass_attention"
    assert by["{base}"]["name"] == "cutlass_attention" and by["{base}"]["verdict"] == "differs"
    assert by["{base_control}"]["name"] == "zutlass_attention" and by["{base_control}"]["verdict"] == "identical"
    # asked for names explicitly: they are used as given
    r = ptxprobe("rename-sweep", "--ptx", str(ptx), "-s", "repeat=1", "-s", "names={base},cutlass_{base}",
                 "--no-run", "-o", str(tmp_path / "asked"))
    assert "symbol contains" not in r.stderr
    assert {x["name"] for x in _rows(tmp_path / "asked")} == {"cutlass_attention", "cutlass_cutlass_attention"}


def test_mixed_templates_give_each_kernel_the_names_it_gets_alone():
    assert [apply_template(t, "cutlass_gluon_attention") for t in MIXED_TRIGGER_NAMES] == [
        apply_template(t, "cutlass_gluon_attention") for t in TRIGGER_FREE_NAMES]
    assert [apply_template(t, "plain") for t in MIXED_TRIGGER_NAMES] == ["plain", "cutlass_plain", "xutlass_plain"]


def test_a_triggered_kernel_in_a_file_with_others_is_compared_as_it_is_alone(tmp_path):
    """One PTX file with cutlass_attention and a plain axpy: cutlass_attention is compared with xutlass_attention
    (its code differs: "YES", as when it is alone), axpy with cutlass_axpy; never cutlass_ twice."""
    ptx = tmp_path / "cutlass_attention.ptx"
    r = ptxprobe("emit", "--kernel", "attention", "--dtype", "fp8e5", "--arch", "sm_90a", "--name",
                 "cutlass_attention", "-o", str(ptx))
    assert r.returncode == 0, r.stderr
    mixed = tmp_path / "mixed.ptx"
    mixed.write_text(ptx.read_text() + "\n" + AXPY_PTX.split(".address_size 64")[1])
    out = tmp_path / "out"
    r = ptxprobe("rename-sweep", "--ptx", str(mixed), "-s", "repeat=2", "--no-run", "--json", "-o", str(out))
    assert "already contain 'cutlass'" in r.stderr and "cutlass_attention" in r.stderr
    assert r.returncode == 1, r.stderr
    names = {(x["kernel"].split(":")[-1], x["name"]) for x in _rows(out) if x["repeat"] == 0}
    assert names == {("cutlass_attention", n) for n in ("xutlass_attention", "cutlass_attention", "zutlass_attention")
                     } | {("axpy", n) for n in ("axpy", "cutlass_axpy", "xutlass_axpy")}
    by = {p["kernel"].split(":")[-1]: p for p in json.loads(r.stdout)["pivot"]}
    assert by["cutlass_attention"]["answer"] == "YES" and by["axpy"]["answer"] == "no"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_cuda_kernel_named_with_the_trigger_is_compared_with_its_trigger_free_name(tmp_path):
    """The FFMA sgemm of experiments/user as cutlass_sgemm in a .cu: compared with xutlass_sgemm, its code differs
    ("YES", as its PTX does); before, --cu compared cutlass_sgemm with cutlass_cutlass_sgemm and answered "no"."""
    cu = tmp_path / "cutlass_sgemm.cu"
    text = (Path(__file__).resolve().parents[1] / "experiments" / "user" / "sgemm.cu").read_text()
    cu.write_text(re.sub(r"\bsgemm\b", "cutlass_sgemm", text))
    out = tmp_path / "out"
    r = ptxprobe("rename-sweep", "--cu", str(cu), "-s", "archs=sm_90a", "-s", "repeat=1", "--no-run", "--json",
                 "-o", str(out))
    assert r.returncode == 1, r.stderr
    assert {x["name"] for x in _rows(out)} == {"xutlass_sgemm", "cutlass_sgemm", "zutlass_sgemm"}
    (pivot,) = json.loads(r.stdout)["pivot"]
    assert pivot["answer"] == "YES"
