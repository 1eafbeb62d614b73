"""Blackwell (sm_100a) flash attention in Gluon: tcgen05 MMAs into tensor memory, persistent.

S = Q K^T and O += P V run on the 5th-generation tensor cores (``tcgen05_mma``) with both
accumulators in tensor memory (TMEM); completion is tracked with an mbarrier. Q, K, V tiles
are staged in NVMMA-swizzled shared memory; P goes back through shared memory as the A
operand of the second MMA. One program per SM strides over (query block, head) tiles.
fp8 inputs take V transposed, as the Triton kernels do, so both MMA operands are K-major.

This kernel is built ahead of time for sm_100a (no Blackwell GPU here: static analysis only).
It is not warp-specialised: loads, MMAs and softmax run in one partition, in order.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (
    TensorMemoryLayout,
    allocate_tensor_memory,
    fence_async_shared,
    mbarrier,
    tcgen05_mma,
)

from .gluon_api import accumulator_reg_layout, thread_barrier


@gluon.jit
def _load_tile(base, row0, ROWS: gl.constexpr, COLS: gl.constexpr, row_stride, layout: gl.constexpr):
    rows = row0 + gl.arange(0, ROWS, gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, gl.SliceLayout(0, layout))
    return gl.load(base + rows[:, None] * row_stride + cols[None, :])


@gluon.jit
def online_softmax_step(s, m_i, l_i, qk_scale, offs_m, start_n, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """One key block of the online softmax, S read from tensor memory: (P, O's rescale, new max, new sum)."""
    s = s * qk_scale
    if CAUSAL:
        offs_n = start_n + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s.type.layout))
        s = gl.where(offs_m[:, None] >= offs_n[None, :], s, -1.0e6)
    m_new = gl.maximum(m_i, gl.max(s, 1))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[:, None])
    return p, alpha, m_new, l_i * alpha + gl.sum(p, 1)


@gluon.jit
def gluon_attention(
    Q,
    K,
    V,
    Out,
    sm_scale,
    N_CTX,
    N_BH,
    HEAD_DIM: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr,
    V_TRANSPOSED: gl.constexpr,
):
    dtype: gl.constexpr = Q.dtype.element_ty
    NUM_WARPS: gl.constexpr = gl.num_warps()
    io: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [NUM_WARPS, 1], [1, 0])
    io_t: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [NUM_WARPS, 1], [1, 0])
    q_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    k_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    p_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
    s_tl: gl.constexpr = TensorMemoryLayout((BLOCK_M, BLOCK_N), col_stride=1)
    o_tl: gl.constexpr = TensorMemoryLayout((BLOCK_M, HEAD_DIM), col_stride=1)
    s_rl: gl.constexpr = accumulator_reg_layout([BLOCK_M, BLOCK_N], s_tl, NUM_WARPS)
    o_rl: gl.constexpr = accumulator_reg_layout([BLOCK_M, HEAD_DIM], o_tl, NUM_WARPS)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_sl)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], k_sl)
    if V_TRANSPOSED:
        v_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEAD_DIM, BLOCK_N], dtype)
        v_smem = gl.allocate_shared_memory(dtype, [HEAD_DIM, BLOCK_N], v_sl)
    else:
        v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], k_sl)
    p_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], p_sl)
    s_tmem = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N], s_tl)
    o_tmem = allocate_tensor_memory(gl.float32, [BLOCK_M, HEAD_DIM], o_tl)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    phase = 0

    qk_scale = sm_scale * 1.4426950408889634
    n_m = N_CTX // BLOCK_M
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh = tile % N_BH
        start_m = tile // N_BH
        if CAUSAL:
            start_m = n_m - 1 - start_m  # heaviest query blocks first
        head = off_bh.to(gl.int64) * N_CTX * HEAD_DIM
        q_smem.store(_load_tile(Q + head, start_m * BLOCK_M, BLOCK_M, HEAD_DIM, HEAD_DIM, io))
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_rl))
        l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_rl))
        o_tmem.store(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_rl))
        hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
        offs_m = start_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, s_rl))
        for start_n in range(0, hi, BLOCK_N):
            k_smem.store(_load_tile(K + head, start_n, BLOCK_N, HEAD_DIM, HEAD_DIM, io))
            if V_TRANSPOSED:
                v_rows = gl.arange(0, HEAD_DIM, gl.SliceLayout(1, io_t))
                v_cols = start_n + gl.arange(0, BLOCK_N, gl.SliceLayout(0, io_t))
                v_smem.store(gl.load(V + head + v_rows[:, None] * N_CTX + v_cols[None, :]))
            else:
                v_smem.store(_load_tile(V + head, start_n, BLOCK_N, HEAD_DIM, HEAD_DIM, io))
            fence_async_shared()
            thread_barrier()
            # S = Q K^T on the tensor cores, into tensor memory
            tcgen05_mma(q_smem, k_smem.permute((1, 0)), s_tmem, use_acc=False, mbarriers=[bar])
            mbarrier.wait(bar, phase)
            phase ^= 1
            p, alpha, m_i, l_i = online_softmax_step(
                s_tmem.load(s_rl), m_i, l_i, qk_scale, offs_m, start_n, BLOCK_N, CAUSAL
            )
            # rescale O in tensor memory, then O += P V
            o = o_tmem.load(o_rl)
            o_tmem.store(o * gl.convert_layout(alpha, gl.SliceLayout(1, o_rl))[:, None])
            p_smem.store(p.to(dtype))
            fence_async_shared()
            thread_barrier()
            if V_TRANSPOSED:
                tcgen05_mma(p_smem, v_smem.permute((1, 0)), o_tmem, use_acc=True, mbarriers=[bar])
            else:
                tcgen05_mma(p_smem, v_smem, o_tmem, use_acc=True, mbarriers=[bar])
            mbarrier.wait(bar, phase)
            phase ^= 1
        o = o_tmem.load(o_rl) / gl.convert_layout(l_i, gl.SliceLayout(1, o_rl))[:, None]
        o = gl.convert_layout(o.to(Out.dtype.element_ty), io)
        rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, io))
        cols = gl.arange(0, HEAD_DIM, gl.SliceLayout(0, io))
        gl.store(Out + head + rows[:, None] * HEAD_DIM + cols[None, :], o)
    mbarrier.invalidate(bar)


# --- ptxprobe registry entry ---------------------------------------------------------------------


def _family():
    from ptxprobe.sources.registry import KernelConfig, KernelFamily

    from .triton_attention import _persistent_args, _persistent_grid, attention_common

    cfg = KernelConfig(128, 64, 4, 1)
    return KernelFamily(
        name="attention_gluon",
        frontend="triton",
        description="Gluon Blackwell FA2 forward: tcgen05 MMAs into TMEM, mbarriers, persistent (sm_100a, static only)",
        fn=gluon_attention,
        dtypes=("fp16", "bf16", "fp8e5", "fp8e4nv"),
        head_dims=(64, 128),
        configs=(cfg,),
        default_config=cfg,
        launch_args=_persistent_args,
        grid=_persistent_grid,
        **attention_common(),
        archs=("sm_100a",),
    )


FAMILIES = (_family(),)
