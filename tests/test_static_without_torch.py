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


def test_no_gpu_is_said_before_torch_or_the_timing_code_loads(tmp_path, monkeypatch):
    """A static sweep on a machine without a GPU asks for one with the device nodes and CUDA_VISIBLE_DEVICES, not by
    importing torch and the timing code (seconds of a warm sweep that has nothing to time)."""
    from ptxprobe.core.errors import NoGpu
    from ptxprobe.gpu import device

    code = ("import sys; from ptxprobe.core.errors import NoGpu; from ptxprobe.gpu import runtime_sweep\n"
            "try:\n    runtime_sweep(None, sys.argv[1])\nexcept NoGpu as exc:\n    print(exc)\n"
            "print(sorted(m for m in ('torch', 'scipy.stats', 'ptxprobe.gpu.dispatch') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=120, env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["no CUDA GPU is visible (CUDA_VISIBLE_DEVICES hides every device): static "
                                       "results only", "[]"]
    monkeypatch.setattr(device, "DEVICE_NODES", (str(tmp_path / "nvidiactl"),))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(NoGpu, match="no NVIDIA device node"):
        device.require_gpu()
    (tmp_path / "nvidiactl").touch()
    assert device.absent_gpu() is None


def test_a_static_sweep_writes_its_tables_without_pandas(tmp_path):
    """pandas is a third of a warm sweep's start-up: the results table is written through pyarrow's JSON reader, so
    a sweep of a PTX file never imports it, and the table reads back as the rows say (strings stay strings)."""
    import json

    import pandas as pd

    from tests.ptx_text import AXPY_PTX

    ptx = tmp_path / "k.ptx"
    ptx.write_text(AXPY_PTX)
    code = ("import sys; from ptxprobe.cli import main; rc = main(['rename-sweep', '--ptx', sys.argv[1], '-s', "
            "'archs=sm_90a', '-s', 'repeat=1', '-q', '--no-run', '-o', sys.argv[2]]); "
            "print('pandas' in sys.modules); sys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", code, str(ptx), str(tmp_path / "run")], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert run.stdout.split()[-1] == "False"
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    table = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert set(table.columns) == {k for r in rows for k in r}
    assert table.run_at.tolist() == [r["run_at"] for r in rows]  # not made timestamps
    assert table.registers.tolist() == [r["registers"] for r in rows]


def test_a_table_cell_holding_a_numpy_number_is_that_number_and_an_object_is_refused(tmp_path):
    """write_parquet serialises rows as JSON: a numpy scalar becomes its Python number (not the string of it), and a
    cell of another type is refused instead of written as its repr."""
    import numpy as np
    import pandas as pd

    from ptxprobe.core.store import write_parquet

    write_parquet(tmp_path / "t.parquet", [{"a": np.float32(1.5), "b": np.int64(3)}, {"a": 2.0, "b": 4}])
    t = pd.read_parquet(tmp_path / "t.parquet")
    assert t.a.tolist() == [1.5, 2.0] and t.b.tolist() == [3, 4]
    with pytest.raises(TypeError, match="cannot be written"):
        write_parquet(tmp_path / "u.parquet", [{"a": object()}])
    assert not (tmp_path / "u.parquet").exists()
