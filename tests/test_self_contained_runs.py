"""A run directory keeps the user's inputs it used (by content): repro and report work from any directory and from a
copy of the run directory alone. Narrowing the default experiment runs what supports the narrowing and says
what was left out."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptxprobe.cli import main
from tests.ptx_text import AXPY_PTX

pytestmark = pytest.mark.integration

HEADER = "#pragma once\n#define SCALE 2.0f\n"
CUDA = ('#include "scale.h"\n'
        "__global__ void axpy(float *x, float *y, float a) { int i = threadIdx.x; y[i] = SCALE * a * x[i] + y[i]; }\n")
SWEEP = ["-s", "archs=sm_90a", "-s", "names={base},cutlass_{base}", "-s", "repeat=1", "-s", "max_repeat=0", "-q"]


def _sweep(tmp_path: Path, monkeypatch) -> Path:
    """A user's PTX (and the same bytes under another name) and a .cu with a header of its own, swept from a working
    directory beside them by relative paths, as a user does: the run directory, as an absolute path."""
    mine, work = tmp_path / "mine", tmp_path / "work"
    mine.mkdir()
    work.mkdir()
    (mine / "axpy.ptx").write_text(AXPY_PTX)
    (mine / "same.ptx").write_text(AXPY_PTX)
    (mine / "scale.h").write_text(HEADER)
    (mine / "k.cu").write_text(CUDA)
    monkeypatch.chdir(work)
    rc = main(["rename-sweep", "--ptx", "../mine/axpy.ptx", "--ptx", "../mine/same.ptx", "--cu", "../mine/k.cu",
               *SWEEP, "-o", "run"])
    assert rc in (0, 1)
    return work / "run"


def test_the_run_keeps_its_inputs_by_content(tmp_path, monkeypatch):
    run = _sweep(tmp_path, monkeypatch)
    inputs = json.loads((run / "manifest.json").read_text())["inputs"]
    files = {Path(f["path"]).name: f for rec in inputs.values() for f in rec.get("files", [])}
    assert set(files) == {"axpy.ptx", "same.ptx", "k.cu", "scale.h"}  # the header of its own; none of CUDA's
    assert files["scale.h"]["role"] == "include" and files["k.cu"]["role"] == "source"
    for name, f in files.items():
        assert Path(f["path"]) == (tmp_path / "mine" / name)  # where it was, whatever the working directory
        kept = run / f["kept"]
        assert kept.parent.name == f["sha256"] == hashlib.sha256(kept.read_bytes()).hexdigest()
    assert files["axpy.ptx"]["kept"] == files["same.ptx"]["kept"]  # one copy per content
    assert len([p for p in (run / "inputs").rglob("*") if p.is_file()]) == 3


def test_repro_and_report_from_another_directory_use_the_kept_inputs(tmp_path, monkeypatch, capsys):
    run = _sweep(tmp_path, monkeypatch)
    shutil.move(tmp_path / "mine", tmp_path / "moved")
    (tmp_path / "mine").mkdir()  # the header's path now holds other content; the other files are gone
    (tmp_path / "mine" / "scale.h").write_text("#pragma once\n#define SCALE 3.0f\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["repro", str(run), "-q"]) == 0
    cap = capsys.readouterr()
    err = " ".join(cap.err.split())
    assert f"{tmp_path / 'mine' / 'scale.h'} now has other content than the run used" in err
    assert f"{tmp_path / 'mine' / 'axpy.ptx'} is no longer there" in err
    assert "reproduced: 6 variant groups" in " ".join(cap.out.split())
    assert main(["report", str(run), "-o", "page"]) == 0
    assert (elsewhere / "page" / "index.html").is_file()


def test_a_copy_of_the_run_directory_alone_reproduces(tmp_path, monkeypatch):
    run = _sweep(tmp_path, monkeypatch)
    machine = tmp_path / "other-machine"
    shutil.copytree(run, machine / "run")
    shutil.rmtree(tmp_path / "mine")
    shutil.rmtree(tmp_path / "work")
    res = subprocess.run([sys.executable, "-m", "ptxprobe", "repro", "run", "--json"], cwd=machine,
                         capture_output=True, text=True, timeout=300)
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["ok"], res.stderr
    assert {r["kernel"] for r in doc["rows"]} == {"axpy.ptx", "same.ptx", "k.cu"}
    assert all(r["status"] == "match" for r in doc["rows"])


def test_a_run_made_before_inputs_were_kept_reruns_from_its_recorded_paths(tmp_path, monkeypatch, capsys):
    run = _sweep(tmp_path, monkeypatch)
    manifest = json.loads((run / "manifest.json").read_text())
    for rec in manifest["inputs"].values():
        for key in ("files", "entry"):
            rec.pop(key, None)
    (run / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(run / "inputs")
    assert main(["repro", "run", "-q"]) == 0  # from where it was made: its relative paths still hold
    (tmp_path / "mine" / "k.cu").unlink()
    assert main(["repro", "run", "-q"]) == 2  # as before: the recorded path is all it has
    assert "k.cu: no such file" in capsys.readouterr().err


def test_a_triton_module_is_kept_with_what_it_imports_from_its_folder(tmp_path):
    from ptxprobe.core.cache import Cache
    from ptxprobe.sources import TritonFunctionSource

    (tmp_path / "kern.py").write_text("import triton\nimport helper\nfrom . import tiles\n\n@triton.jit\ndef k(x):\n"
                                      "    pass\n")
    (tmp_path / "helper.py").write_text("import os\nfrom consts import N\n")
    (tmp_path / "consts.py").write_text("N = 4\n")
    (tmp_path / "tiles.py").write_text("")
    (tmp_path / "unused.py").write_text("")
    (tmp_path / "ref.py").write_text("def fn(x):\n    return x\n")
    (tmp_path / "k.toml").write_text('signature = {x = "*fp32"}\n[launch]\nreference = "ref.py:fn"\n')
    src = TritonFunctionSource(f"{tmp_path / 'kern.py'}:k", None, str(tmp_path / "k.toml"))
    names = [p.name for p in src.input_files(("sm_90a",), Cache())]
    assert names == ["kern.py", "helper.py", "tiles.py", "consts.py", "k.toml", "ref.py"]


SIBLING = """import triton
import triton.language as tl


@triton.jit
def act(x):
    return tl.maximum(x, 0.0)
"""
KERNEL = """import triton
import triton.language as tl
from mylib import act


@triton.jit
def relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, act(tl.load(x_ptr + offs, mask=m)), mask=m)
"""


def test_a_kernel_importing_a_module_beside_it_sweeps_and_its_run_reproduces_alone(tmp_path, monkeypatch):
    """``from mylib import act`` with mylib.py beside the kernel imports as ``python kern.py`` would (its folder
    first on sys.path, then forgotten); the run keeps mylib.py, so repro works with the sources gone."""
    mine, work = tmp_path / "mine", tmp_path / "work"
    mine.mkdir()
    work.mkdir()
    (mine / "mylib.py").write_text(SIBLING)
    (mine / "kern.py").write_text(KERNEL)
    (mine / "k.toml").write_text('signature = {x_ptr = "*fp32", out_ptr = "*fp32", n = "i32", BLOCK = "constexpr"}\n'
                                 "constexprs = {BLOCK = 128}\n")
    monkeypatch.chdir(work)
    path_before = list(sys.path)
    rc = main(["rename-sweep", "--triton", "../mine/kern.py:relu", "--spec", "../mine/k.toml", *SWEEP, "-o", "run"])
    assert rc in (0, 1)
    assert sys.path == path_before and "mylib" not in sys.modules  # the folder was first only while importing
    inputs = json.loads((work / "run" / "manifest.json").read_text())["inputs"]
    assert sorted(Path(f["path"]).name for rec in inputs.values() for f in rec.get("files", [])) == [
        "k.toml", "kern.py", "mylib.py"]
    shutil.copytree(work / "run", tmp_path / "other-machine" / "run")
    shutil.rmtree(mine)
    shutil.rmtree(work)
    res = subprocess.run([sys.executable, "-m", "ptxprobe", "repro", "run", "--json"], cwd=tmp_path / "other-machine",
                         capture_output=True, text=True, timeout=300)
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["ok"], res.stderr
    assert doc["rows"] and all(r["status"] == "match" for r in doc["rows"])


# --- narrowing the default experiment ---------------------------------------------------------


def test_narrowing_leaves_out_what_does_not_support_it_and_says_why():
    from ptxprobe.sources import left_out_text, narrowed
    from ptxprobe.static.experiment import load_experiment, override

    sources, left = narrowed(override(load_experiment("default"), {"archs": ["sm_90a"]}))
    assert {s.family_name for s in sources} == {"attention", "attention_cuda"}
    assert {s.dtype for s in sources if s.family_name == "attention_cuda"} == {"fp16"}
    assert {(r["kernel"], r["axis"], tuple(r["values"])) for r in left} == {
        ("attention_gluon", None, ()), ("attention_gluon_ws", None, ()), ("attention_cuda", "dtypes", ("fp8e5",))}
    assert left_out_text(left) == ("attention_cuda on fp8e5 (dtypes fp16, bf16), attention_gluon (targets sm_100a), "
                                   "attention_gluon_ws (targets sm_100a)")


def test_the_default_experiment_narrowed_to_sm_90a_runs_and_names_what_it_left_out(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["rename-sweep", "-s", "archs=sm_90a", "-s", "dtypes=fp16", "-s", "causal=false", *SWEEP[2:],
               "-o", str(out), "--json"])
    cap = capsys.readouterr()
    assert rc in (0, 1), cap.err
    line = ("left out (not supported by the kernel): attention_gluon (targets sm_100a), "
            "attention_gluon_ws (targets sm_100a)")
    assert [ln for ln in cap.err.splitlines() if "left out" in ln] == [f"ptxprobe: {line}"]
    doc = json.loads(cap.out)
    assert {p["kernel"].split("/")[0] for p in doc["pivot"]} == {"attention", "attention_cuda"}
    expected = [{"kernel": k, "axis": None, "values": [], "why": "targets sm_100a"}
                for k in ("attention_gluon", "attention_gluon_ws")]
    assert doc["left_out"] == expected
    assert json.loads((out / "manifest.json").read_text())["left_out"] == expected


@pytest.mark.parametrize("narrowing, why", [
    ("head_dims=96", "nothing left to sweep: attention (head dims 64, 128), attention_cuda (head dims 64, 128)"),
    ("archs=sm_42", "arch 'sm_42' is not a target ptxprobe knows"),
])
def test_narrowing_to_nothing_is_bad_input(tmp_path, capsys, narrowing, why):
    assert main(["rename-sweep", "-s", narrowing, "-o", str(tmp_path / "run"), "-q"]) == 2
    assert why in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_cu_file_built_with_the_specs_include_folders_and_defines_reproduces_alone(tmp_path, capsys):
    """A project laid out as people lay them out (src/k.cu, include/scale.h, a spec beside them): the spec's
    [nvcc] table gives nvcc the include folder and a macro; the run keeps the header in its tree, and a copy of
    the run directory alone reproduces after the project is gone. Without the table nvcc's own words say what is
    missing; a bad table is refused by key."""
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "include").mkdir()
    (proj / "include" / "scale.h").write_text("#pragma once\n__device__ inline float scaled(float x) "
                                              "{ return FACTOR * x; }\n")
    (proj / "src" / "k.cu").write_text('#include "scale.h"\n__global__ void k(float* x) { x[0] = scaled(x[0]); }\n')
    spec = proj / "k.toml"
    spec.write_text('[nvcc]\ninclude_dirs = ["include"]\ndefines = {FACTOR = 3}\n')
    out = tmp_path / "run"
    argv = ["rename-sweep", "-q", "--no-run", "--cu", str(proj / "src" / "k.cu"), "-s", "archs=sm_90a",
            "-s", "repeat=1"]
    assert main([*argv, "--spec", str(spec), "-o", str(out)]) in (0, 1)
    kept = json.loads((out / "manifest.json").read_text())["inputs"]["k.cu"]["files"]
    assert {f["tree"] for f in kept} == {"src/k.cu", "include/scale.h", "k.toml"}
    ptx = next((out / "inputs").rglob("*.ptx"), None)
    assert ptx is None  # only the inputs are kept, not what nvcc made of them
    assert main([*argv, "-o", str(tmp_path / "bare")]) == 2
    assert "scale.h: No such file or directory" in capsys.readouterr().err
    spec.write_text('[nvcc]\ninclude_dirs = ["nowhere"]\n')
    assert main([*argv, "--spec", str(spec), "-o", str(tmp_path / "bad")]) == 2
    assert "include_dirs: 'nowhere' is not a folder" in capsys.readouterr().err
    machine = tmp_path / "other-machine"
    shutil.copytree(out, machine / "run")
    shutil.rmtree(proj)
    res = subprocess.run([sys.executable, "-m", "ptxprobe", "repro", "run", "--json"], cwd=machine,
                         capture_output=True, text=True, timeout=300)
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["ok"], res.stderr
    assert doc["rows"] and all(r["status"] == "match" for r in doc["rows"])


def test_a_header_shadowing_another_in_an_earlier_include_folder_is_seen(tmp_path):
    """include_dirs = [a, b]: scale.h first found in b; a scale.h then put in a is what nvcc includes, so the PTX
    must change, though no header seen before changed (a remembered include list would serve the old PTX)."""
    import shutil as sh

    from ptxprobe.core.cache import Cache
    from ptxprobe.sources.cuda import NvccOptions, emit_cuda

    if sh.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    (tmp_path / "b" / "scale.h").write_text("__device__ inline float scaled(float x) { return 3.0f * x; }\n")
    cu = tmp_path / "k.cu"
    cu.write_text('#include "scale.h"\n__global__ void k(float* x) { x[0] = scaled(x[0]); }\n')
    opts = NvccOptions.of(None, (str(tmp_path / "a"), str(tmp_path / "b")))
    cache = Cache(tmp_path / "cache")
    first = emit_cuda(cu, "sm_90a", options=opts, cache=cache).ptx
    (tmp_path / "a" / "scale.h").write_text("__device__ inline float scaled(float x) { return 5.0f * x; }\n")
    second = emit_cuda(cu, "sm_90a", options=opts, cache=cache).ptx
    assert "0f40400000" in first and "0f40A00000" in second  # 3.0f, then 5.0f
