"""A ``.cu`` file is assembled by the ptxas of the CUDA toolkit whose nvcc compiled it, and the answer says so; any
other ptxas is on request, and a lowered PTX ``.version`` is said on screen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SGEMM = Path(__file__).resolve().parents[1] / "experiments" / "user" / "sgemm.cu"


def _sweep(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptxprobe", "rename-sweep", "--cu", str(SGEMM), "-s", "archs=sm_90a",
                           "-s", "names={base},cutlass_{base}", "-s", "repeat=1", "-o", str(tmp_path / "run"), *extra],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def nvcc():
    from ptxprobe.core.errors import ToolNotFound
    from ptxprobe.toolchain.tools import find_tool

    try:
        return find_tool("nvcc")
    except ToolNotFound:
        pytest.skip("nvcc not installed")


def test_cu_files_are_assembled_by_their_own_toolkit_and_it_says_so(tmp_path, nvcc):
    run = _sweep(tmp_path)
    assert run.returncode in (0, 1), run.stderr
    said = "note: --cu files are assembled by the ptxas of the CUDA toolkit whose nvcc compiles them"
    assert said in run.stderr and said not in run.stdout  # a note: stdout holds the answer alone
    rows = [json.loads(x) for x in (tmp_path / "run" / "variants.jsonl").read_text().splitlines()]
    assert {r["ptxas_version"] for r in rows} == {nvcc.version}
    again = _sweep(tmp_path, "-o", str(tmp_path / "again"))  # the same sweep elsewhere: every row from the cache
    assert f"0 assembled, {len(rows)} from the cache, 0 already done" in again.stdout, again.stdout


def test_another_ptxas_on_request_says_when_it_lowered_the_ptx_version(tmp_path, nvcc):
    if nvcc.release < (13, 0):
        pytest.skip("an nvcc before CUDA 13 emits a PTX .version Triton's ptxas 12.8 accepts as it is")
    run = _sweep(tmp_path, "-s", "ptxas=triton")
    assert run.returncode in (0, 1), run.stderr
    rows = [json.loads(x) for x in (tmp_path / "run" / "variants.jsonl").read_text().splitlines()]
    assert all(r["ptxas_version"] != nvcc.version for r in rows)
    lowered = {r["note"] for r in rows if r.get("note")}
    assert lowered and all(f"note: {n}" in run.stderr and n not in run.stdout for n in lowered)
    doc = json.loads(_sweep(tmp_path, "-s", "ptxas=triton", "--json").stdout)  # the JSON answer carries them too
    assert {f"note: {n}" for n in lowered} <= set(doc["notes"])
