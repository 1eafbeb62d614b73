"""CuTe DSL kernels compile to PTX on a machine without a GPU (``capture --arch``): a kernel the test writes,
compiled by ``cute.compile`` on fake tensors, captured from the DSL's dump, and swept with the trigger-free
names (every CuTe DSL symbol holds ``cutlass``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.ptx_text import CUTE_SCALE_KERNEL

pytestmark = pytest.mark.integration

pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl is not installed (pip install '.[test]')")

PROGRAM = CUTE_SCALE_KERNEL + textwrap.dedent('''
    from cutlass.cute.runtime import make_fake_compact_tensor
    from cutlass.runtime import make_fake_stream

    x = make_fake_compact_tensor(cutlass.Float32, (4096,), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (4096,), assumed_align=16)
    cute.compile(scale, x, y, make_fake_stream())
''')


def test_a_cute_dsl_kernel_is_captured_without_a_gpu_and_swept_trigger_free(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "cap"
    r = subprocess.run([sys.executable, "-m", "ptxprobe", "capture", "--arch", "sm_90a", "-o", str(out), "-s",
                        "archs=sm_90a", "-s", "ptxas=triton", "-s", "repeat=1", "--", sys.executable, str(prog)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    rec = json.loads((out / "captured.json").read_text())
    (k,) = rec["kernels"]
    assert k["frontend"] == "cute-dsl" and k["arch"] == "sm_90a" and "cutlass" in k["entry"]
    assert k["metadata"]["dsl_version"] == rec["cutlass_dsl"] is not None
    ptx = (out / k["ptx"]).read_text()
    assert ".target sm_90a" in ptx and f".entry {k['entry']}(" in ptx
    rows = [json.loads(x) for x in (out / "sweep" / "results.jsonl").read_text().splitlines()]
    names = {x["name_template"]: x["name"] for x in rows}
    assert set(names) == {"{base_untriggered}", "{base}", "{base_control}"}
    assert "cutlass" not in names["{base_untriggered}"] and names["{base}"] == k["entry"]
    assert all(x["status"] == "ok" for x in rows)
