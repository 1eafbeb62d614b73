"""A kernel whose own name already holds the trigger (``cutlass_gluon_attention``, every CuTe DSL kernel): the
sweep compares the name without it, the name as given and a control, instead of two triggered names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ptxprobe.ptx.rename import TRIGGER_FREE_NAMES, apply_template

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
    assert "every kernel's own name contains 'cutlass'" in r.stderr
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
    assert "own name contains" not in r.stderr
    assert {x["name"] for x in _rows(tmp_path / "asked")} == {"cutlass_attention", "cutlass_cutlass_attention"}


def test_mixed_inputs_keep_the_names_and_say_which_kernels_hold_the_trigger(tmp_path):
    a, b = tmp_path / "cutlass_attention.ptx", tmp_path / "attention.ptx"
    for path, name in ((a, "cutlass_attention"), (b, "plain_attention")):
        r = ptxprobe("emit", "--kernel", "attention", "--dtype", "fp16", "--arch", "sm_90a", "--name", name,
                     "-o", str(path))
        assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    r = ptxprobe("rename-sweep", "--ptx", str(a), "--ptx", str(b), "-s", "repeat=1", "--no-run", "-o", str(out))
    assert "already contain 'cutlass'" in r.stderr and "cutlass_attention" in r.stderr
    assert {x["name_template"] for x in _rows(out)} == {"{base}", "cutlass_{base}", "xutlass_{base}"}
