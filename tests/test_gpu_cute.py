"""On a CUDA GPU: a CuTe DSL program run under ``apply`` launches ptxprobe's cubin, loaded under the DSL's own name.

The program the test writes JIT-compiles a small kernel for the GPU it finds, runs it on torch tensors and checks the
result; under ``apply`` the capture hook (``capture.swap_cute``) loads the tuned cubin (assembled under the
trigger-free name at -O0, its symbol spelt back) in place of the DSL's own, and the DSL's host code then finds and
launches it. Skips cleanly without a GPU or without the DSL; the H200 run is in experiments/results.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from tests.ptx_text import CUTE_SCALE_KERNEL
from tests.test_cute_apply import _tuned_doc
from tests.test_gpu import _gpu_arch

pytestmark = pytest.mark.gpu

JIT_PROGRAM = "import json\nimport torch\n" + CUTE_SCALE_KERNEL + textwrap.dedent('''
    from cutlass.cute.runtime import from_dlpack

    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    y = torch.zeros_like(x)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    args = (from_dlpack(x, assumed_align=16), from_dlpack(y, assumed_align=16))
    compiled = cute.compile(scale, *args, stream)
    compiled(*args, stream)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x), "wrong output"
    print(json.dumps({"ok": True}))
''')


def test_apply_launches_the_tuned_cubin_in_a_cute_dsl_program(tmp_path):
    _gpu_arch()  # skips without torch or a GPU
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl is not installed")
    from ptxprobe.capture.program import run_program
    from ptxprobe.core.cache import Cache
    from ptxprobe.tune.apply import apply_program

    prog = tmp_path / "prog.py"
    prog.write_text(JIT_PROGRAM)
    (k,), _ = run_program([sys.executable, str(prog)], tmp_path / "cap", 600)
    assert k.frontend == "cute-dsl"
    doc = _tuned_doc((tmp_path / "cap" / k.ptx).read_text(), k.entry, k.ptx_sha256)
    rec = apply_program(doc, [sys.executable, str(prog)], tmp_path / "apply", rounds=0, metric=None, timeout=600,
                        cache=Cache())
    (swap,) = rec.kernels
    assert swap.name == k.entry != swap.compiled_as and swap.verified
    # the run: the program's own check passed and the hook loaded the tuned cubin
    assert rec.runs and all(r["ok"] for r in rec.runs)
    reports = [json.loads(x) for p in sorted((tmp_path / "apply" / "arms").glob("report-*.jsonl"))
               for x in p.read_text().splitlines()]
    assert len(reports) == len(rec.runs) and all(sum(r["swapped"].values()) == 1 for r in reports)
    assert all(not r["unseen"] and not r["mismatched"] for r in reports)
