"""A new user's first session, end to end, as they would type it: ptxprobe installed from its wheel into a fresh
venv, a Triton kernel of their own, ``spec init``, the TODOs filled in with an editor, ``rename-sweep --triton
k.py:fn --spec k.toml -s archs=sm_90a``, ``report``, then ``repro`` of that run from another directory after the
kernel's own folder is gone (the run directory keeps its inputs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def fused_scale_add(x_ptr, y_ptr, out_ptr, n_elements, alpha, bias, BLOCK_SIZE: tl.constexpr, RELU: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    r = x * alpha + y + bias
    if RELU:
        r = tl.maximum(r, 0.0)
    tl.store(out_ptr + offs, r, mask=mask)
'''

REFERENCE = "def expected(x_ptr, y_ptr, alpha, bias, **_):\n    return (x_ptr * alpha + y_ptr + bias).clamp(min=0)\n"

# the user's edits, as string replaces: each TODO spec init left, and the reference it suggests
EDITS = {
    'bias = "TODO"': 'bias = "fp32"',
    'RELU = "TODO"': "RELU = true",
    '{name = "bias", value = "TODO"}': '{name = "bias", value = 0.5}',
    '# reference = "reference.py:fn"': 'reference = "ref.py:expected"',
}


def test_a_new_user_goes_from_their_own_triton_kernel_to_a_report_and_a_repro(tmp_path, built_wheel):
    venv = tmp_path / "venv"  # beside this machine's torch and triton: only ptxprobe is new
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-build-isolation", "--no-index", str(built_wheel)],
                   check=True, timeout=300, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PTXPROBE_CACHE=str(tmp_path / "cache"), COLUMNS="100")
    exe = str(venv / "bin" / "ptxprobe")

    def ptxprobe(*args: str, cwd: Path, codes=(0,)) -> subprocess.CompletedProcess:
        r = subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode in codes, (args, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
        return r

    which = subprocess.run([str(venv / "bin" / "python"), "-c", "import ptxprobe; print(ptxprobe.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert which.startswith(str(venv)), which  # the installed wheel, not this checkout

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "k.py").write_text(KERNEL)
    (mine / "ref.py").write_text(REFERENCE)
    r = ptxprobe("spec", "init", "k.py:fused_scale_add", "-o", "k.toml", cwd=mine)
    assert "wrote k.toml" in r.stdout and "fill in its 3 \"TODO\"" in r.stdout
    spec = tomllib.loads((mine / "k.toml").read_text())
    assert spec["signature"]["x_ptr"] == "*fp32" and spec["signature"]["n_elements"] == "i32"
    assert spec["signature"]["bias"] == "TODO" and spec["constexprs"] == {"BLOCK_SIZE": 64, "RELU": "TODO"}

    r = ptxprobe("rename-sweep", "--triton", "k.py:fused_scale_add", "--spec", "k.toml", "-s", "archs=sm_90a",
                 cwd=mine, codes=(2,))  # not yet filled in: refused, naming what is left
    assert "signature.bias, constexprs.RELU, launch.args[bias].value" in r.stderr

    text = (mine / "k.toml").read_text()
    for before, after in EDITS.items():
        assert before in text, before
        text = text.replace(before, after)
    (mine / "k.toml").write_text(text)

    r = ptxprobe("rename-sweep", "--triton", "k.py:fused_scale_add", "--spec", "k.toml", "-s", "archs=sm_90a",
                 cwd=mine, codes=(0, 1))
    assert "does the name matter?" in r.stdout and "fused_scale_add" in r.stdout
    run = next((mine / "runs").glob("*/results.parquet")).parent
    assert run.parent == mine / "runs"

    r = ptxprobe("report", str(run), cwd=mine)
    assert (run / "report" / "index.html").is_file() and "report" in r.stdout

    elsewhere = tmp_path / "elsewhere"  # another directory, with the kernel's own folder gone
    shutil.move(str(mine), str(tmp_path / "moved"))
    elsewhere.mkdir()
    moved_run = tmp_path / "moved" / "runs" / run.name
    r = ptxprobe("repro", str(moved_run), cwd=elsewhere)
    assert "reproduced" in r.stdout and "match" in r.stdout, r.stdout[-2000:]
