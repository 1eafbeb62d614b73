"""``ptxprobe spec init``: a spec a person can start from, written from the kernel's own parameters; what it could
not infer is "TODO" (refused by key until filled); filled in the way a user would, it sweeps."""

from __future__ import annotations

import shutil

import pytest
import tomllib

from ptxprobe.cli import main
from ptxprobe.cli.parser import build_parser
from ptxprobe.sources.usage import usage_of

pytestmark = pytest.mark.integration

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n_elements, alpha, mystery, BLOCK_SIZE: tl.constexpr, ACT: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, (x * alpha + y + mystery).to(tl.float16), mask=mask)
'''

# what a user does with the TODOs spec init leaves: a string replace each
FILLS = {'mystery = "TODO"': 'mystery = "fp32"', 'ACT = "TODO"': "ACT = 1",
         '{name = "mystery", value = "TODO"}': '{name = "mystery", value = 0.5}'}


def fill(text: str) -> str:
    for todo, value in FILLS.items():
        assert todo in text, todo
        text = text.replace(todo, value)
    return text


def test_the_written_spec_infers_what_it_can_marks_the_rest_and_sweeps_once_filled(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(KERNEL)
    assert main(["spec", "init", "k.py:scaled_add"]) == 0
    text = capsys.readouterr().out
    spec = tomllib.loads(text)
    assert spec["signature"] == {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16", "n_elements": "i32",
                                 "alpha": "fp32", "mystery": "TODO", "BLOCK_SIZE": "constexpr", "ACT": "constexpr"}
    assert spec["constexprs"] == {"BLOCK_SIZE": 64, "ACT": "TODO"}
    assert spec["divisible_by_16"] == ["x_ptr", "y_ptr", "out_ptr"]
    launch = spec["launch"]
    assert [a["name"] for a in launch["args"]] == ["x_ptr", "y_ptr", "out_ptr", "n_elements", "alpha", "mystery"]
    assert [a["name"] for a in launch["args"] if a.get("output")] == ["out_ptr"]  # the one tl.store writes
    assert launch["grid"] == ["cdiv(n_elements, 64)"] and launch["sizes"] == [{"n_elements": 1048576}]
    assert "# TODO: type" in text and "docs/spec.md" in text and "guess" in text
    # written with -o, it is refused until filled, naming every key still TODO
    assert main(["spec", "init", "k.py:scaled_add", "-o", "k.toml"]) == 0
    assert "fill in its 3 \"TODO\"" in capsys.readouterr().out
    assert main(["rename-sweep", "--triton", "k.py:scaled_add", "--spec", "k.toml", "-s", "archs=sm_90a"]) == 2
    err = capsys.readouterr().err
    assert 'still "TODO"' in err and "signature.mystery, constexprs.ACT, launch.args[mystery].value" in err
    (tmp_path / "k.toml").write_text(fill((tmp_path / "k.toml").read_text()))
    assert main(["rename-sweep", "--triton", "k.py:scaled_add", "--spec", "k.toml", "-s", "archs=sm_90a",
                 "-o", "run", "-q"]) == 0
    assert "scaled_add" in capsys.readouterr().out and (tmp_path / "run" / "results.parquet").is_file()


def test_spec_init_does_not_overwrite_without_force(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "k.toml").write_text("# mine\n")
    assert main(["spec", "init", "k.py:scaled_add", "-o", "k.toml"]) == 2
    assert "exists" in capsys.readouterr().err and (tmp_path / "k.toml").read_text() == "# mine\n"
    assert main(["spec", "init", "k.py:scaled_add", "-o", "k.toml", "--force"]) == 0
    assert "[signature]" in (tmp_path / "k.toml").read_text()
    assert main(["spec", "init", "k.py:no_such_fn"]) == 2
    assert "no_such_fn" in capsys.readouterr().err
    assert main(["spec", "init", "missing.py:f"]) == 2
    # the command in the written spec's header names the file written, wherever it went
    (tmp_path / "specs").mkdir()
    assert main(["spec", "init", "k.py:scaled_add", "-o", "specs/mine.toml"]) == 0
    assert "--spec specs/mine.toml\n" in (tmp_path / "specs" / "mine.toml").read_text()


def test_the_body_says_which_parameters_are_pointers_outputs_and_integers():
    u = usage_of('''
def k(A, B, C, M, N, K, BLOCK_K: tl.constexpr):
    pid = tl.program_id(1)
    a_ptrs = A + tl.arange(0, 16)
    a = tl.load(a_ptrs)
    b = tl.load(B + tl.arange(0, 16)[:, None] * N)
    for k0 in range(0, K, BLOCK_K):
        pass
    tl.store(C + pid * N, (a + b).to(tl.bfloat16))
''')
    assert u.loaded == {"A", "B"} and u.stored == {"C": "bf16"} and u.grid_dims == 2
    assert {"N", "K"} <= u.integers and not {"A", "B", "C"} & u.integers


CU = r"""
extern "C" __global__ void __launch_bounds__(128) axpy(float a, const float* __restrict__ x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void other(int* p) { p[threadIdx.x] = 1; }
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_cu_entry_gets_its_launch_from_the_ptx_and_the_source_signature(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "axpy.cu").write_text(CU)
    assert main(["spec", "init", "axpy.cu"]) == 2  # two kernels: a spec is for one
    assert "axpy.cu:axpy" in capsys.readouterr().err
    assert main(["spec", "init", "axpy.cu:axpy", "-o", "axpy.toml"]) == 0
    launch = tomllib.loads((tmp_path / "axpy.toml").read_text())["launch"]
    assert launch["block"] == [128] and launch["grid"] == ["cdiv(n, 128)"]  # __launch_bounds__
    assert launch["args"] == [{"name": "a", "value": 1.0}, {"name": "x", "dtype": "float32", "shape": ["n"]},
                              {"name": "y", "dtype": "float32", "shape": ["n"], "output": True},
                              {"name": "n", "value": "n"}]
    capsys.readouterr()
    assert main(["rename-sweep", "--cu", "axpy.cu", "--entry", "axpy", "--spec", "axpy.toml", "-s", "archs=sm_90a",
                 "-o", "run", "-q", "--no-run"]) == 0  # the sweep checks the spec against the entry's PTX


def test_help_says_where_the_spec_format_is_and_that_triton_takes_a_path(capsys):
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command").choices["rename-sweep"]
    helps = {a.dest: a.help for a in sub._actions}
    assert "file.py:function" in helps["triton"] and "docs/spec.md" in helps["spec"]
    assert "spec init" in helps["spec"] and "relative to the spec file" in helps["spec"]
    assert "spec init" in sub.epilog and "docs/spec.md" in sub.epilog


def test_no_switch_claims_a_default_its_absence_does_not_have():
    """``--no-run  static analysis only (default: True)`` beside ``--run ... (default: when a GPU is visible)``
    contradicted itself: a switch's store default is argparse's bookkeeping, never shown."""
    p = build_parser()
    subs = next(a for a in p._actions if a.dest == "command").choices
    for name, sub in subs.items():
        text = " ".join(sub.format_help().split())
        assert "(default: True)" not in text and "(default: False)" not in text, name
    sweep = " ".join(subs["rename-sweep"].format_help().split())
    assert "--run also time every name on the GPU (default: when a GPU is visible; exit 3 without one)" in sweep
    assert "--no-run static analysis only, even where a GPU is visible --explain" in sweep
    assert subs["rename-sweep"].parse_args([]).run is None  # neither switch: time when a GPU is visible


WRAPPED = '''
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2, num_stages=2),
                          triton.Config({"BLOCK": 256}, num_warps=8)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
'''


def test_an_autotuned_kernel_is_its_jit_function_with_the_first_config_and_says_what_is_not_swept(tmp_path):
    """@triton.autotune and @triton.heuristics keep the JIT function as .fn: spec init and the sweep take it, spec init
    fills in the first config (marked), and stderr says once that the configs are not swept."""
    import subprocess
    import sys

    (tmp_path / "k.py").write_text(WRAPPED)

    def ptxprobe(*args):
        return subprocess.run([sys.executable, "-m", "ptxprobe", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)

    r = ptxprobe("spec", "init", "k.py:vadd", "-o", "k.toml")
    assert r.returncode == 0, r.stderr
    assert "k.py:vadd: @triton.autotune's 2 configs are not swept" in r.stderr
    text = (tmp_path / "k.toml").read_text()
    spec = tomllib.loads(text)
    assert spec["constexprs"] == {"BLOCK": 128, "EVEN": "TODO"} and (spec["num_warps"], spec["num_stages"]) == (2, 2)
    assert "BLOCK = 128" in text and "@triton.autotune's config 1 of 2: the one compiled" in text
    assert "@triton.heuristics computes it at launch" in text
    (tmp_path / "k.toml").write_text(text.replace('EVEN = "TODO"', "EVEN = true"))
    r = ptxprobe("rename-sweep", "--triton", "k.py:vadd", "--spec", "k.toml", "-s", "archs=sm_90a,sm_100a", "-s",
                 "repeat=1", "--no-run", "-o", "run")  # the second arch is built in a pool worker: said once still
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if "not swept" in ln]
    assert notes == ["k.py:vadd: @triton.autotune's 2 configs are not swept; @triton.heuristics' values of EVEN are "
                     "not computed (nothing is launched): the spec's constexprs, num_warps and num_stages are what "
                     "is compiled"], r.stderr


def test_a_missing_file_is_one_line_naming_the_command_typed(tmp_path, capsys):
    """``spec init nope.py:f``: the error is spec init's own, said once (it was nested inside a second SpecError
    and named --triton, an option the user never typed)."""
    assert main(["spec", "init", str(tmp_path / "nope.py") + ":f"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ptxprobe: SpecError: spec init: no such file {tmp_path / 'nope.py'}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_cu_whose_header_lives_elsewhere_is_told_where_and_takes_i(tmp_path, monkeypatch, capsys):
    """nvcc's "No such file" names the header: the error says how to give its folder (and which folder holds
    one of that name); ``spec init -I`` compiles with it and writes it into the spec, which the sweep then uses."""
    (tmp_path / "include" / "ops").mkdir(parents=True)
    (tmp_path / "include" / "ops" / "twice.cuh").write_text("#pragma once\n__device__ inline float twice(float x) "
                                                           "{ return 2.f * x; }\n")
    (tmp_path / "k.cu").write_text('#include "ops/twice.cuh"\nextern "C" __global__ void k(float* y, int n) '
                                   "{ int i = threadIdx.x; if (i < n) y[i] = twice(y[i]); }\n")
    monkeypatch.chdir(tmp_path)
    assert main(["spec", "init", "k.cu"]) == 2
    err = capsys.readouterr().err  # the header's own path kept (the source's folder only is cut)
    assert "ops/twice.cuh: No such file" in err and 'include_dirs = ["include"]' in err and "-I include" in err
    assert main(["spec", "init", "k.cu", "-I", "include", "-o", "specs/k.toml"]) == 0
    spec = tomllib.loads((tmp_path / "specs" / "k.toml").read_text())
    assert spec["nvcc"]["include_dirs"] == ["../include"]
    assert main(["rename-sweep", "-q", "--cu", "k.cu", "--spec", "specs/k.toml", "-s", "archs=sm_90a",
                 "-o", "out"]) in (0, 1)
    assert main(["spec", "init", "k.cu", "-I", "nowhere"]) == 2
    assert "-I nowhere: no such folder" in capsys.readouterr().err


MATMUL = """import triton
import triton.language as tl


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + offs[:, None] * K + k + offs[None, :])
        b = tl.load(b_ptr + (k + offs[:, None]) * N + offs[None, :])
        acc += tl.dot(a, b)
    c = acc.to(tl.float16)
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], c)
"""
LAYER_NORM = """import triton
import triton.language as tl


@triton.jit
def layer_norm(X, Y, W, Mean, Rstd, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    var = tl.sum((x - mean) * (x - mean), axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=cols < N)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    tl.store(Y + row * N + cols, ((x - mean) * rstd * w).to(tl.float16), mask=cols < N)
"""


@pytest.mark.parametrize("source, function, types", [
    (MATMUL, "matmul", {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}),
    (LAYER_NORM, "layer_norm", {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "Mean": "*fp32", "Rstd": "*fp32"}),
])
def test_pointer_types_follow_what_the_code_stores(tmp_path, monkeypatch, capsys, source, function, types):
    """An fp16 matmul stores ``acc.to(tl.float16)`` through a local (its pointers were guessed fp32); a layer norm
    stores fp32 statistics beside an fp16 output (they were guessed fp16, the output's type)."""
    (tmp_path / "k.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    assert main(["spec", "init", f"k.py:{function}", "-o", "k.toml"]) == 0
    spec = tomllib.loads((tmp_path / "k.toml").read_text())
    assert {k: v for k, v in spec["signature"].items() if k in types} == types
    launch = {a["name"]: a["dtype"] for a in spec["launch"]["args"] if "dtype" in a}
    assert all(launch[k] == {"*fp16": "float16", "*fp32": "float32"}[t] for k, t in types.items())


def test_a_signature_and_launch_tensors_that_disagree_are_refused(tmp_path):
    from ptxprobe.core.errors import SpecError
    from ptxprobe.sources.launch import load_launch

    spec = tmp_path / "k.toml"
    spec.write_text('signature = {x_ptr = "*fp16", n = "i32"}\n[launch]\nsizes = [{n = 64}]\ngrid = [1]\n'
                    'args = [{name = "x_ptr", dtype = "float32", shape = ["n"], output = true}, '
                    '{name = "n", value = "n"}]\n')
    with pytest.raises(SpecError, match=r"x_ptr is \*fp16 in the signature but float32 in \[launch\]"):
        load_launch(spec)
    spec.write_text(spec.read_text().replace('"float32"', '"float16"'))
    assert load_launch(spec).args[0].dtype == "float16"
