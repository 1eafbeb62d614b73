"""Blackwell (sm_100a) flash attention in Gluon, warp-specialised and persistent.

Three partitions share one persistent tile loop (one program per SM striding over
(query block, head) tiles) and talk only through mbarriers:

* load (1 warp): TMA copies of Q once per tile and of K/V into a ``STAGES``-deep ring;
* mma (1 warp): issues ``tcgen05_mma`` for S = Q K^T and O += P V, both accumulators in
  tensor memory; each MMA's completion arrives on the barrier its consumer waits for;
* softmax (the default partition, ``num_warps`` warps): online softmax on S read from
  tensor memory, rescales O in tensor memory, hands P over through shared memory, and
  writes the normalised output.

The load warp runs ahead of the MMAs by up to ``STAGES`` key blocks, so global-memory
latency overlaps the tensor-core and softmax work. fp8 takes V transposed, as the other
attention kernels here do, so both MMA operands are K-major.

Built ahead of time for sm_100a; there is no Blackwell GPU here, so it has only been
compiled and analysed statically, never run.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (
    TensorMemoryLayout,
    allocate_tensor_memory,
    fence_async_shared,
    mbarrier,
    tcgen05_commit,
    tcgen05_mma,
)

from .gluon_api import accumulator_reg_layout, thread_barrier, tma_load
from .gluon_attention import online_softmax_step


@gluon.jit
def _tile_coords(tile, n_m, N_BH, CAUSAL: gl.constexpr):
    """(batch*head index, query block index) of a persistent tile; causal runs the longest rows first."""
    off_bh = tile % N_BH
    start_m = tile // N_BH
    if CAUSAL:
        start_m = n_m - 1 - start_m
    return off_bh, start_m


@gluon.jit
def _kv_end(start_m, N_CTX, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    if CAUSAL:
        return (start_m + 1) * BLOCK_M
    else:
        return N_CTX


@gluon.jit
def _load_partition(
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, kv_ready, kv_free,
    N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr,
):  # fmt: skip
    n_m = N_CTX // BLOCK_M
    kv_count = 0
    tile_count = 0
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh, start_m = _tile_coords(tile, n_m, N_BH, CAUSAL)
        row0 = off_bh * N_CTX
        # Q is reused by every MMA of the tile: wait until the last tile's MMAs released it
        mbarrier.wait(q_free, (tile_count & 1) ^ 1)
        mbarrier.expect(q_ready, q_desc.block_type.nbytes)
        tma_load(q_desc, [row0 + start_m * BLOCK_M, 0], q_ready, q_smem)
        for start_n in range(0, _kv_end(start_m, N_CTX, BLOCK_M, CAUSAL), BLOCK_N):
            slot = kv_count % STAGES
            mbarrier.wait(kv_free.index(slot), ((kv_count // STAGES) & 1) ^ 1)
            bar = kv_ready.index(slot)
            mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
            tma_load(k_desc, [row0 + start_n, 0], bar, k_smem.index(slot))
            if V_TRANSPOSED:
                tma_load(v_desc, [off_bh * HEAD_DIM, start_n], bar, v_smem.index(slot))
            else:
                tma_load(v_desc, [row0 + start_n, 0], bar, v_smem.index(slot))
            kv_count += 1
        tile_count += 1


@gluon.jit
def _mma_partition(
    q_smem, k_smem, v_smem, p_smem, s_tmem, o_tmem, q_ready, q_free, kv_ready, kv_free, s_ready, p_ready, o_ready,
    N_CTX, N_BH,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr,
):  # fmt: skip
    n_m = N_CTX // BLOCK_M
    kv_count = 0
    tile_count = 0
    p_phase = 0
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh, start_m = _tile_coords(tile, n_m, N_BH, CAUSAL)
        mbarrier.wait(q_ready, tile_count & 1)
        for _start_n in range(0, _kv_end(start_m, N_CTX, BLOCK_M, CAUSAL), BLOCK_N):
            slot = kv_count % STAGES
            mbarrier.wait(kv_ready.index(slot), (kv_count // STAGES) & 1)
            # S may be overwritten: softmax finished reading the last S before it arrived on p_ready
            tcgen05_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_tmem, use_acc=False, mbarriers=[s_ready])
            mbarrier.wait(p_ready, p_phase)
            p_phase ^= 1
            if V_TRANSPOSED:
                v_op = v_smem.index(slot).permute((1, 0))
            else:
                v_op = v_smem.index(slot)
            tcgen05_mma(p_smem, v_op, o_tmem, use_acc=True, mbarriers=[o_ready, kv_free.index(slot)])
            kv_count += 1
        tcgen05_commit(q_free)  # arrives once every MMA issued so far (all that read Q) is done
        tile_count += 1


@gluon.jit
def _softmax_partition(
    Out, sm_scale, p_smem, s_tmem, o_tmem, s_ready, p_ready, o_ready,
    N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
):  # fmt: skip
    NUM_WARPS: gl.constexpr = gl.num_warps()
    s_tl: gl.constexpr = TensorMemoryLayout((BLOCK_M, BLOCK_N), col_stride=1)
    o_tl: gl.constexpr = TensorMemoryLayout((BLOCK_M, HEAD_DIM), col_stride=1)
    s_rl: gl.constexpr = accumulator_reg_layout([BLOCK_M, BLOCK_N], s_tl, NUM_WARPS)
    o_rl: gl.constexpr = accumulator_reg_layout([BLOCK_M, HEAD_DIM], o_tl, NUM_WARPS)
    io: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [NUM_WARPS, 1], [1, 0])
    qk_scale = sm_scale * 1.4426950408889634
    n_m = N_CTX // BLOCK_M
    s_phase = 0
    o_phase = 0
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh, start_m = _tile_coords(tile, n_m, N_BH, CAUSAL)
        o_tmem.store(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_rl))
        mbarrier.arrive(o_ready, count=1)  # O is ready for the first rescale of this tile
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_rl))
        l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_rl))
        offs_m = start_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, s_rl))
        for start_n in range(0, _kv_end(start_m, N_CTX, BLOCK_M, CAUSAL), BLOCK_N):
            mbarrier.wait(s_ready, s_phase)
            s_phase ^= 1
            p, alpha, m_i, l_i = online_softmax_step(
                s_tmem.load(s_rl), m_i, l_i, qk_scale, offs_m, start_n, BLOCK_N, CAUSAL
            )
            # the previous O += P V is done: O may be rescaled and P's buffer reused
            mbarrier.wait(o_ready, o_phase)
            o_phase ^= 1
            o = o_tmem.load(o_rl)
            o_tmem.store(o * gl.convert_layout(alpha, gl.SliceLayout(1, o_rl))[:, None])
            p_smem.store(p.to(p_smem.dtype))
            fence_async_shared()
            thread_barrier()
            mbarrier.arrive(p_ready, count=1)
        mbarrier.wait(o_ready, o_phase)  # the tile's last O += P V
        o_phase ^= 1
        o = o_tmem.load(o_rl) / gl.convert_layout(l_i, gl.SliceLayout(1, o_rl))[:, None]
        o = gl.convert_layout(o.to(Out.dtype.element_ty), io)
        rows = start_m * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, io))
        cols = gl.arange(0, HEAD_DIM, gl.SliceLayout(0, io))
        gl.store(Out + off_bh.to(gl.int64) * N_CTX * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :], o)


@gluon.jit
def gluon_attention_ws(
    q_desc, k_desc, v_desc, Out, sm_scale, N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
    p_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
    p_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], p_sl)
    s_tmem = allocate_tensor_memory(
        gl.float32, [BLOCK_M, BLOCK_N], TensorMemoryLayout((BLOCK_M, BLOCK_N), col_stride=1)
    )
    o_tmem = allocate_tensor_memory(
        gl.float32, [BLOCK_M, HEAD_DIM], TensorMemoryLayout((BLOCK_M, HEAD_DIM), col_stride=1)
    )
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    kv_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    kv_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    for i in gl.static_range(STAGES):
        mbarrier.init(kv_ready.index(i), count=1)
        mbarrier.init(kv_free.index(i), count=1)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    q_free = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    s_ready = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    p_ready = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    o_ready = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    mbarrier.init(q_ready, count=1)
    mbarrier.init(q_free, count=1)
    mbarrier.init(s_ready, count=1)
    mbarrier.init(p_ready, count=1)
    mbarrier.init(o_ready, count=1)

    gl.warp_specialize(
        [
            (
                _softmax_partition,
                (Out, sm_scale, p_smem, s_tmem, o_tmem, s_ready, p_ready, o_ready, N_CTX, N_BH,
                 HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL),
            ),
            (
                _load_partition,
                (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, kv_ready, kv_free, N_CTX, N_BH,
                 HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, V_TRANSPOSED),
            ),
            (
                _mma_partition,
                (q_smem, k_smem, v_smem, p_smem, s_tmem, o_tmem, q_ready, q_free, kv_ready, kv_free, s_ready,
                 p_ready, o_ready, N_CTX, N_BH, BLOCK_M, BLOCK_N, STAGES, CAUSAL, V_TRANSPOSED),
            ),
        ],
        [1, 1],
        [24, 24],
    )  # fmt: skip


# --- ptxprobe registry entry ---------------------------------------------------------------------

_GL_DTYPES = {"fp16": gl.float16, "bf16": gl.bfloat16, "fp8e5": gl.float8e5, "fp8e4nv": gl.float8e4nv}


def _descriptors(spec, problem, inputs) -> list:
    """TMA descriptors over Q, K, V viewed as 2-D (rows of all heads stacked); stand-ins without inputs."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from .triton_attention import _is_fp8, _pointers

    n, d = problem.seq_len, spec.head_dim
    rows = problem.batch * problem.heads * n
    m, bn = spec.config.block_m, spec.config.block_n
    q, k, v, _ = _pointers(spec, inputs)
    el = _GL_DTYPES[spec.dtype]

    def desc(t, shape, block):
        layout = gl.NVMMASharedLayout.get_default_for(block, el)
        return TensorDescriptor(t, shape, [shape[1], 1], block, layout)

    v_shape, v_block = ([problem.batch * problem.heads * d, n], [d, bn]) if _is_fp8(spec) else ([rows, d], [bn, d])
    return [desc(q, [rows, d], [m, d]), desc(k, [rows, d], [bn, d]), desc(v, v_shape, v_block)]


def _args(spec, problem, inputs):
    from .triton_attention import _is_fp8, _pointers

    c = spec.config
    return [
        *_descriptors(spec, problem, inputs),
        _pointers(spec, inputs)[3],
        spec.head_dim**-0.5,
        problem.seq_len,
        problem.batch * problem.heads,
        spec.head_dim,
        c.block_m,
        c.block_n,
        c.num_stages,
        spec.causal,
        _is_fp8(spec),
    ]


def _family():
    from ptxprobe.sources.registry import KernelConfig, KernelFamily

    from .triton_attention import _persistent_grid, attention_common

    cfg = KernelConfig(128, 64, 4, 2)  # num_warps: the softmax partition; num_stages: the K/V ring depth
    return KernelFamily(
        name="attention_gluon_ws",
        frontend="triton",
        description="Gluon Blackwell FA2 forward, warp-specialised (TMA load warp, tcgen05 MMA warp, softmax "
        "warpgroup), K/V ring, persistent (sm_100a, static only)",
        fn=gluon_attention_ws,
        dtypes=("fp16", "bf16", "fp8e5", "fp8e4nv"),
        head_dims=(64, 128),
        configs=(cfg, KernelConfig(128, 128, 4, 2)),
        default_config=cfg,
        launch_args=_args,
        grid=_persistent_grid,
        **attention_common(),
        archs=("sm_100a",),
    )


FAMILIES = (_family(),)
