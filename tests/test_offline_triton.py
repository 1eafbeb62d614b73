"""``--triton`` as users write Gluon kernels, on a machine without a GPU: a module that asks the device a question
at import time, a tensor descriptor written without its layout, a dtype constexpr, and a ``repr=`` that puts the
trigger in the kernel's own name (then the sweep compares the trigger-free name, the given one and a control)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from ptxprobe.core.errors import SpecError
from ptxprobe.sources.offline import complete_signature, constexpr_value, has_gpu, offline_target

pytestmark = pytest.mark.integration

MODULE = textwrap.dedent('''
    import torch
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

    # what Triton's own examples do at import time: ask the driver and torch about the GPU
    TARGET = triton.runtime.driver.active.get_current_target()
    MAJOR = torch.cuda.get_device_capability()[0]
    assert TARGET.backend == "cuda" and MAJOR == TARGET.arch // 10
    # the TMA load's name moved in Triton 3.8 (3.9 removed the old one): what a module written for every release does
    tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared


    def name_of(specialization):
        return ("cutlass_" if specialization.constants["dtype"] == gl.float8e5 else "") + "copy_tile"


    @gluon.jit(repr=name_of)
    def copy_tile(in_desc, out_ptr, dtype: gl.constexpr, BLOCK: gl.constexpr):
        smem = gl.allocate_shared_memory(dtype, [BLOCK, BLOCK], in_desc.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, in_desc.block_type.nbytes)
        tma_load(in_desc, [gl.program_id(0) * BLOCK, 0], bar, smem)
        mbarrier.wait(bar, 0)
        layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
        x = smem.load(layout)
        rows = gl.arange(0, BLOCK, gl.SliceLayout(1, layout))
        cols = gl.arange(0, BLOCK, gl.SliceLayout(0, layout))
        gl.store(out_ptr + rows[:, None] * BLOCK + cols[None, :], x.to(gl.float32))
''')


def _spec(dtype: str) -> str:
    return textwrap.dedent(f'''
        divisible_by_16 = ["out_ptr"]
        num_warps = 4
        constexprs = {{dtype = {{dtype = "{dtype}"}}, BLOCK = 64}}

        [signature]
        in_desc = "tensordesc<{dtype}[64,64]>"
        out_ptr = "*fp32"
        dtype = "constexpr"
        BLOCK = "constexpr"
    ''')


def ptxprobe(*args):
    return subprocess.run([sys.executable, "-m", "ptxprobe", *args], capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(has_gpu(), reason="checks the import without a GPU")
def test_a_gluon_module_that_asks_the_gpu_at_import_compiles_without_one(tmp_path):
    mod = tmp_path / "copy_mod.py"
    mod.write_text(MODULE)
    spec = tmp_path / "copy.toml"
    spec.write_text(_spec("fp16"))
    r = ptxprobe("rename-sweep", "--triton", f"{mod}:copy_tile", "--spec", str(spec), "-s", "archs=sm_90a",
                 "-s", "ptxas=triton", "-s", "repeat=1", "-o", str(tmp_path / "run"), "--json")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert {x["name"] for x in rows} == {"copy_tile", "cutlass_copy_tile", "xutlass_copy_tile"}
    assert all(x["status"] == "ok" for x in rows)


@pytest.mark.skipif(has_gpu(), reason="checks the import without a GPU")
def test_a_kernel_named_with_the_trigger_by_its_repr_is_compared_trigger_free(tmp_path):
    """The fp8 specialisation is called cutlass_copy_tile by the module itself: baseline xutlass_, control zutlass_."""
    mod = tmp_path / "copy_mod.py"
    mod.write_text(MODULE)
    spec = tmp_path / "copy8.toml"
    spec.write_text(_spec("fp8e5"))
    r = ptxprobe("rename-sweep", "--triton", f"{mod}:copy_tile", "--spec", str(spec), "-s", "archs=sm_90a",
                 "-s", "ptxas=triton", "-s", "repeat=1", "-o", str(tmp_path / "run"))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert "comparing it with the trigger removed" in r.stderr
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert {x["name"] for x in rows} == {"xutlass_copy_tile", "cutlass_copy_tile", "zutlass_copy_tile"}
    assert {x["name"] for x in rows if x["is_baseline"]} == {"xutlass_copy_tile"}


def test_without_the_offline_target_the_same_import_fails_as_it_does_for_users(tmp_path):
    """The planted fault: the module's import-time question is real, and only offline_target answers it."""
    if has_gpu():
        pytest.skip("a GPU answers the question itself")
    mod = tmp_path / "copy_mod.py"
    mod.write_text(MODULE)
    r = subprocess.run([sys.executable, "-c", f"import importlib.util as u; s = u.spec_from_file_location('m', "
                        f"{str(mod)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and ("active drivers" in r.stderr or "CUDA" in r.stderr)


def test_descriptor_layouts_and_dtype_constexprs_are_derived_as_triton_does():
    import triton.language as tl
    from triton.experimental.gluon import language as gl

    sig = complete_signature(None, {"d": "tensordesc<fp8e5[128,128]>", "p": "*fp16"}, is_gluon=True)
    want = gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e5)
    assert sig == {"d": f"tensordesc<fp8e5[128, 128],{want!r}>", "p": "*fp16"}
    plain = {"d": "tensordesc<fp16[64,64]>"}
    assert complete_signature(None, plain, is_gluon=False) == plain
    assert constexpr_value("x", {"dtype": "bf16"}) == tl.bfloat16
    assert constexpr_value("x", "gl.float16") == tl.float16 and constexpr_value("x", "fp16") == "fp16"
    with pytest.raises(SpecError, match="not a Triton dtype"):
        constexpr_value("x", {"dtype": "float17"})
    with pytest.raises(SpecError, match="one key"):
        constexpr_value("x", {"dtype": "fp16", "also": 1})


def test_offline_target_restores_what_it_replaced():
    import torch
    from triton.runtime import driver

    before = (driver._active, torch.cuda.get_device_capability)
    with offline_target("sm_100a"):
        if not has_gpu():
            assert driver.active.get_current_target().arch == 100
            assert torch.cuda.get_device_capability() == (10, 0)
    assert (driver._active, torch.cuda.get_device_capability) == before
