"""``ptxprobe capture --interpret -- python prog.py``: a program that launches Triton kernels on CPU tensors, captured
without a GPU. Each launch must come out specialised as Triton's launcher specialises the real arguments (alignment
of a tensor view, an integer equal to 1 or divisible by 16, constexprs, an autotuner's configs), which the test
derives itself from the same tensors, outside the interpreter."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from ptxprobe.cli import main

pytestmark = pytest.mark.e2e

PROGRAM = textwrap.dedent('''
    import sys
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _twice(v):
        return v * 2.0


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr, ACT: tl.constexpr, OUT: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        v = tl.load(x_ptr + i * stride, mask=m).to(tl.float32)
        if ACT == "relu":
            v = tl.maximum(v, 0.0)
        tl.store(y_ptr + i, _twice(v).to(OUT), mask=m)


    @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                              triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2)], key=["n"])
    @triton.jit
    def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        z = tl.load(z_ptr + i, mask=m)  # accumulates: a second execution would show
        tl.store(z_ptr + i, z + tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


    @triton.jit
    def fill_kernel(x_ptr, num_warps: tl.constexpr):  # a parameter named as a launch option: Triton passes both
        tl.store(x_ptr + tl.arange(0, 32 * num_warps), 0.0)


    def launches():
        """The arguments of every launch, as the test specialises them itself."""
        x = torch.arange(4096, dtype=torch.float16) - 2048
        y = torch.zeros(4096, dtype=torch.float16)
        return x, y, [
            ("scale_kernel", (x, y, 4096, 1, 256, "relu", tl.float16), {}),
            ("scale_kernel", (x[1:], y, 4095, 1, 256, "none", tl.float16), {"num_warps": 8}),  # x + 2 bytes
        ]


    def nested():
        @triton.jit
        def inner_kernel(x_ptr):
            tl.store(x_ptr, 1.0)
        return inner_kernel


    if __name__ == "__main__":
        x, y, calls = launches()
        for name, args, options in calls:
            globals()[name][(16,)](*args[:4], BLOCK=args[4], ACT=args[5], OUT=args[6], **options)
        z = torch.zeros_like(x)
        add_kernel[lambda meta: (triton.cdiv(4096, meta["BLOCK"]),)](x, x, z, 4096)
        fill_kernel[(1,)](torch.empty(64), num_warps=2)
        if "--bad" in sys.argv:  # a launch whose arguments do not bind: Triton would refuse it
            fill_kernel[(1,)](torch.empty(64), 4, 5)
        nested()[(1,)](z)
        if "--check" in sys.argv:  # the kernels' results, which only an executed launch computes
            assert torch.equal(z[1:], 2 * x[1:]), "add_kernel computed nothing, or more than once"
        print("done")
''')


def _capture(tmp_path, *extra, program_args=("--check",)):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "cap"
    r = subprocess.run([sys.executable, "-m", "ptxprobe", "capture", "-o", str(out), "-s", "repeat=1", "-s",
                        "ptxas=triton", "--arch", "sm_90a", *extra, "--", sys.executable, str(prog), *program_args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    return prog, json.loads((out / "captured.json").read_text()), r


def _module(prog):
    spec = importlib.util.spec_from_file_location("interpret_prog", prog)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launches_recorded_under_the_interpreter_are_specialised_as_triton_specialises_them(tmp_path):
    """Record mode: the program's own check fails (nothing was computed), the kernels launched before are kept and
    said; a launch whose arguments do not bind is named as not compiled and the program goes on; each is
    compiled for --arch with the specialisation Triton's binder gives the real tensors; the autotuner
    gives one kernel per config; a kernel defined inside a function is named as not compiled, with why."""
    from ptxprobe.sources.triton import specialize

    prog, rec, r = _capture(tmp_path, "--interpret", program_args=("--check", "--bad"))
    assert rec["interpret"] == "record" and "add_kernel computed nothing" in rec["program_failed"]
    assert "kept" in r.stderr and "Traceback (most recent call last)" not in r.stderr.split("program failed")[0]
    bad, nested = sorted(rec["not_compiled"], key=lambda n: n["function"])
    assert "inner_kernel" in nested["function"] and "defined inside a function" in nested["error"]
    assert "fill_kernel" in bad["function"] and "do not bind" in bad["error"]
    kernels = rec["kernels"]
    assert all(k["arch"] == "sm_90a" and k["metadata"]["interpreted"] for k in kernels)
    mod = _module(prog)
    _, _, calls = mod.launches()
    scale = [k for k in kernels if k["entry"] == "scale_kernel"]
    assert len(scale) == 2
    for (_, args, options), k in zip(calls, scale, strict=True):
        want = specialize(mod.scale_kernel, list(args)).to_json()
        assert k["metadata"]["specialization"] == want
        assert k["metadata"]["num_warps"] == options.get("num_warps", 4)
    assert "x_ptr" not in scale[1]["metadata"]["specialization"]["divisible_by_16"]  # the view 2 bytes in
    assert scale[0]["metadata"]["specialization"]["constexprs"]["stride"] == "1"  # an integer 1 is a constant
    add = sorted((k for k in kernels if k["entry"] == "add_kernel"), key=lambda k: k["metadata"]["via"])
    assert [(k["metadata"]["via"], k["metadata"]["num_warps"]) for k in add] == [("autotune 1/2", 2),
                                                                                 ("autotune 2/2", 4)]
    assert [k["metadata"]["specialization"]["constexprs"]["BLOCK"] for k in add] == ["64", "128"]
    (fill,) = [k for k in kernels if k["entry"] == "fill_kernel"]
    assert fill["metadata"]["num_warps"] == 2 and fill["metadata"]["specialization"]["constexprs"]["num_warps"] == "2"
    for k in kernels:
        ptx = (tmp_path / "cap" / k["ptx"]).read_text()
        assert ".target sm_90a" in ptx and f".entry {k['entry']}(" in ptx
    rows = [json.loads(ln) for ln in (tmp_path / "cap" / "sweep" / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} == {"ok"} and len({r["kernel"] for r in rows}) == 5


def test_execute_mode_computes_what_the_program_reads_back(tmp_path):
    """``--interpret execute`` runs each launch in the interpreter after recording it, an autotuned one once (its
    other configs recorded only): the program's check of an accumulating kernel's result passes."""
    _, rec, _ = _capture(tmp_path, "--interpret", "execute")
    assert rec["program_failed"] is None and len(rec["kernels"]) == 5


def test_interpret_needs_a_target_and_no_gpu_run(tmp_path, capsys):
    for extra in ([], ["--arch", "sm_90a", "--run"]):
        rc = main(["capture", "-o", str(tmp_path / "x"), "--interpret", *extra, "--", sys.executable, "-c", "0"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "--interpret" in err[0], err
    assert not (tmp_path / "x" / "captured.json").exists()


def test_a_librarys_own_autotuner_subclass_is_unwrapped_to_its_jit_function():
    """fla's kernels sit inside its own subclass of Triton's Autotuner: replay (and --triton) must find the jit
    function inside it, as inside Triton's own wrappers."""
    import triton
    import triton.language as tl
    from triton.runtime.autotuner import Autotuner, Heuristics

    from ptxprobe.sources.triton import unwrapped

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)

    class CachedAutotuner(Autotuner):
        pass

    heur = Heuristics(k, k.arg_names, {"BLOCK": lambda args: 64})
    tuned = CachedAutotuner(heur, k.arg_names, [triton.Config({})], [], None, None)
    fn, wrappers = unwrapped(tuned)
    assert fn is k and wrappers == [tuned, heur]
