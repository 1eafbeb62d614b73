"""``ptxprobe capture -- python prog.py``: a program the test writes compiles Triton kernels (no GPU needed to
compile), capture keeps each distinct PTX with Triton's metadata and rename-sweeps them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

PROGRAM = textwrap.dedent('''
    import sys
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0, mask=m)


    @triton.jit
    def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(z_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


    target = GPUTarget("cuda", 90, 32)
    two = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    three = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    for fn, sig in ((scale_kernel, two), (add_kernel, three), (scale_kernel, two)):  # one compiled twice
        triton.compile(ASTSource(fn, sig, constexprs={"BLOCK": 256}), target=target, options={"num_warps": 8})
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
''')


def ptxprobe(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ptxprobe", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd)


def test_capture_keeps_every_distinct_kernel_and_sweeps_them(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "cap"
    r = ptxprobe("capture", "-o", str(out), "-s", "repeat=1", "--json", "--", sys.executable, str(prog))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    rec = json.loads((out / "captured.json").read_text())
    # the second compile of scale_kernel lands where the first did (Triton's dump key is the source's hash)
    assert sorted(k["entry"] for k in rec["kernels"]) == ["add_kernel", "scale_kernel"]
    assert all(k["arch"] == "sm_90a" and k["metadata"]["num_warps"] == 8 for k in rec["kernels"])
    assert rec["program"] == str(prog) and len(rec["program_sha256"]) == 64
    doc = json.loads(r.stdout)
    kernels = {p["kernel"] for p in doc["pivot"]}
    assert any("add_kernel" in k for k in kernels) and any("scale_kernel" in k for k in kernels)
    rows = [json.loads(ln) for ln in (out / "sweep" / "results.jsonl").read_text().splitlines()]
    assert {r["name_template"] for r in rows} == {"{base}", "cutlass_{base}", "xutlass_{base}"}
    assert all(r["status"] == "ok" for r in rows)


def test_a_failing_program_and_one_that_compiles_nothing_are_tool_failures(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    r = ptxprobe("capture", "-o", str(tmp_path / "a"), "--", sys.executable, str(prog), "3")
    assert r.returncode == 3 and "the captured program failed" in r.stderr and "Traceback" not in r.stderr
    empty = tmp_path / "empty.py"
    empty.write_text("print('no kernels here')\n")
    r = ptxprobe("capture", "-o", str(tmp_path / "b"), "--", sys.executable, str(empty))
    assert r.returncode == 3 and "compiled no Triton or CuTe DSL kernel" in r.stderr
    r = ptxprobe("capture", "-o", str(tmp_path / "c"))
    assert r.returncode == 2 and "needs a command" in r.stderr


def test_the_same_ptx_under_two_dump_keys_is_captured_once(tmp_path):
    """Triton keys its dump by source hash: two keys can hold byte-identical PTX; it is swept once."""
    from ptxprobe.capture.program import collect

    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "cap"
    r = ptxprobe("capture", "-o", str(out), "-s", "repeat=1", "--", sys.executable, str(prog))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    dump = out / "triton-dump"
    first = next(dump.rglob("scale_kernel.ptx"))
    twin = dump / "ANOTHERKEY" / "scale_kernel.ptx"
    twin.parent.mkdir()
    twin.write_text(first.read_text())
    kernels = collect(dump, out / "triton-cache", tmp_path / "again")
    assert sorted(k.entry for k in kernels) == ["add_kernel", "scale_kernel"]
    assert all(k.metadata.get("num_warps") == 8 for k in kernels)


def test_ctrl_c_during_the_program_ab_keeps_the_finished_runs(tmp_path):
    """Ctrl-C (SIGINT to ptxprobe) in the middle of ``capture --run``: exit 130, and ab.json holds every run that
    finished, judged by the usual rule (too few rounds say so). The program interrupts on its third A/B run."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM.replace("sys.exit(", textwrap.dedent('''
        import os, signal
        from pathlib import Path
        if os.environ.get("PTXPROBE_SWAP"):
            c = Path(sys.argv[0]).with_name("runs")
            n = int(c.read_text()) if c.exists() else 0
            c.write_text(str(n + 1))
            if n == 2:
                os.kill(os.getppid(), signal.SIGINT)
    ''') + "sys.exit(", 1))
    out = tmp_path / "cap"
    r = ptxprobe("capture", "-o", str(out), "-s", "repeat=1", "--run", "--rounds", "6", "--", sys.executable,
                 str(prog))
    assert r.returncode == 130, r.stderr[-2000:]
    assert "interrupted after 2 runs" in r.stderr + r.stdout
    rec = json.loads((out / "ab" / "ab.json").read_text())
    assert rec["interrupted"] is True and len(rec["runs"]) == 2
    assert {c["verdict"] for c in rec["comparisons"]} == {"too_few_runs"}


def test_a_capture_of_other_kernels_into_a_swept_directory_is_refused_and_loses_nothing(tmp_path):
    """The directory's sweep holds the first capture's kernels: a capture of others is refused (exit 2, one line)
    before its captured.json is written; --fresh replaces them."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "cap"
    quick = ("-s", "repeat=1", "-s", "names={base},cutlass_{base}")
    assert ptxprobe("capture", "-o", str(out), *quick, "--", sys.executable, str(prog)).returncode in (0, 1)
    first = (out / "captured.json").read_text()
    prog.write_text(PROGRAM.replace('"BLOCK": 256', '"BLOCK": 128'))
    r = ptxprobe("capture", "-o", str(out), *quick, "--", sys.executable, str(prog))
    assert r.returncode == 2 and "--fresh" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (out / "captured.json").read_text() == first
    r = ptxprobe("capture", "-o", str(out), *quick, "--fresh", "--", sys.executable, str(prog))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert (out / "captured.json").read_text() != first
