"""The static path never imports torch, a spec with a [launch] table included (a CPU-only install has no torch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptxprobe.sources.launch import TORCH_DTYPES

pytestmark = pytest.mark.integration

USER = Path(__file__).resolve().parents[1] / "experiments" / "user"


def test_every_dtype_name_the_spec_check_accepts_is_torch_s():
    torch = pytest.importorskip("torch")
    assert all(isinstance(getattr(torch, n, None), torch.dtype) for n in TORCH_DTYPES)


def test_a_triton_kernel_with_a_launch_spec_sweeps_where_torch_cannot_be_imported(tmp_path):
    # torch made unimportable, as on the README's CPU-only install; everything else as a user runs it
    code = ("import sys; sys.modules['torch'] = None; from ptxprobe.cli import main; "
            f"sys.exit(main(['rename-sweep', '--triton', '{USER / 'matmul_triton.py'}:matmul_fp16', '--spec', "
            f"'{USER / 'matmul_triton.toml'}', '-s', 'archs=sm_90a', '-s', 'repeat=1', '-q', '--no-run', "
            f"'-o', '{tmp_path / 'run'}']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert "torch" not in run.stderr
