"""The few Gluon names our attentions use whose spelling moved between Triton releases, resolved once at import.

Gluon is experimental: ``gl.thread_barrier`` became ``gl.barrier`` in 3.7, and the register layout of a tensor
memory load was ``get_tmem_reg_layout`` in 3.6 and 3.7 and is the descriptor type's ``get_reg_layout`` from 3.8 on,
and the TMA load ``tma.async_copy_global_to_shared`` became ``tma.async_load`` in 3.8 (3.9 removed the old name).
The kernels call the names here, so one source serves every release from 3.6 (the first whose ``warp_specialize``
takes a function and an argument list per partition); each name is found by what the installed Triton has, not by
its version number, so a release that keeps either spelling needs no change here.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import blackwell
from triton.experimental.gluon.language.nvidia.hopper import tma

# a barrier over the CTA's threads (3.7 renamed it; both lower to the same gpu.barrier)
thread_barrier = getattr(gl, "thread_barrier", None) or gl.barrier

# a TMA copy of a tile from global into shared memory, completing on an mbarrier (Hopper's and Blackwell's alike)
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

_LEGACY_REG_LAYOUT = getattr(blackwell, "get_tmem_reg_layout", None)


@gluon.constexpr_function
def accumulator_reg_layout(shape, tmem_layout, num_warps):
    """The register layout of a float32 tensor-memory tile ``shape`` (laid out as ``tmem_layout``) that
    ``num_warps`` warps load and store with the 32x32b instructions."""
    shape = [int(n) for n in shape]
    if _LEGACY_REG_LAYOUT is not None:
        return _LEGACY_REG_LAYOUT(gl.float32, shape, tmem_layout, num_warps)
    desc = blackwell.tensor_memory_descriptor_type(gl.float32, shape, tmem_layout, shape)
    return desc.get_reg_layout(num_warps)
