"""The Gluon Hopper attention builds for sm_90a on a machine without a GPU, in every dtype, head dim,
mask and schedule, as warp-specialised wgmma code that ptxas assembles without spills. On a GPU it is checked
against float64 by tests/test_gpu.py and experiments/benchmarks/attention_sota.py."""

from __future__ import annotations

import pytest

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.sources import RegisteredSource
from ptxprobe.sources.registry import Problem, family
from ptxprobe.sources.triton import compile_stages, specialize
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import triton_ptxas

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8e4nv"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_builds_for_sm90a_as_warp_specialised_wgmma_without_spills(dtype, head_dim, tmp_path):
    e = RegisteredSource("attention_gluon_hopper", dtype, head_dim, True, "default", 4096).emit("sm_90a",
                                                                                              Cache(tmp_path))
    assert e.entry == "gluon_attention_hopper" and ".target sm_90a" in e.ptx
    mma = "e4m3" if dtype.startswith("fp8") else ("bf16" if dtype == "bf16" else "f16")
    assert "wgmma.mma_async" in e.ptx and f".{mma}.{mma}" in e.ptx  # both operands on the tensor cores
    assert "cp.async.bulk.tensor" in e.ptx and "mbarrier.try_wait" in e.ptx  # TMA producer, mbarrier handshakes
    assert {"setmaxnreg.dec.sync.aligned.u32 \t24;", "setmaxnreg.inc.sync.aligned.u32 \t240;"} <= {
        ln.strip() for ln in e.ptx.splitlines()}  # the producer gives its registers to the consumers
    art = assemble(e.ptx, "sm_90a", triton_ptxas("sm_90a"), cache=Cache(tmp_path))
    rep = art.reports["gluon_attention_hopper"]
    assert art.ok and rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0 and rep.stack_bytes == 0


@pytest.mark.parametrize("knobs", [{"overlap": False}, {"pingpong": True}, {"p_smem": True}, {"q_bufs": 1}])
def test_every_schedule_knob_builds(knobs):
    fam = family("attention_gluon_hopper")
    spec = fam.spec("fp16", 128, False, "default")
    sp = specialize(fam.fn, fam.launch_args(spec, Problem(seq_len=4096), None, **knobs))
    outputs, meta = compile_stages(fam.fn, sp, "sm_90a", fam.compile_options(spec))
    assert "wgmma.mma_async" in outputs["ptx"] and meta["shared"] <= 227 * 1024


def test_only_hopper_is_a_target():
    with pytest.raises(SpecError):
        RegisteredSource("attention_gluon_hopper", "fp16", 128, False, "default", 4096).emit("sm_100a", Cache())
