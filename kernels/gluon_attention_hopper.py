"""Hopper (sm_90a) flash attention forward in Gluon, in the FA3 manner.

Per CTA a query tile of ``BLOCK_M`` rows is split between two consumer warpgroups
(``BLOCK_M // 2`` rows each); a one-warp producer feeds both through mbarriers:

* load (1 warp, few registers): TMA copies of Q once per tile and of K and V into a
  ``STAGES``-deep shared-memory ring; K and V have barriers of their own, so S = Q K^T
  can start before V has landed.
* consumers (two warpgroups: the default partition and one worker, most registers):
  warpgroup MMAs (wgmma) from shared memory, online softmax in registers, P kept in
  registers as the A operand of O += P V.  With ``OVERLAP`` each consumer issues the next
  S = Q K^T and the current O += P V back to back and runs the softmax while the second is
  still on the tensor cores (FA3's intra-warpgroup overlap); the two consumers work on
  different rows, so one's softmax also overlaps the other's MMAs.
* persistent: one program per SM strides over (query tile, batch*head) tiles, longest
  causal tiles first; launched with one program per tile it is the classic grid.

fp8 inputs take V transposed (Z, H, D, N), as the other attention kernels here do, so
both operands of P V are K-major, which Hopper's 8-bit wgmma requires; fp8 writes fp16.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .gluon_api import thread_barrier, tma_load
from .gluon_attention_ws import _kv_end, _tile_coords

LOG2E = gl.constexpr(1.4426950408889634)
CONSUMERS = gl.constexpr(2)  # consumer warpgroups per CTA


@gluon.jit
def _load_partition(
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, k_ready, k_free, v_ready, v_free,
    N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr,
):  # fmt: skip
    """The producer warp: TMA loads only; waits for a slot to be freed by both consumers."""
    Q_BUFS: gl.constexpr = q_smem.shape[0]
    n_m = N_CTX // BLOCK_M
    kv_count = 0
    tile_count = 0
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh, start_m = _tile_coords(tile, n_m, N_BH, CAUSAL)
        row0 = off_bh * N_CTX
        qb = tile_count % Q_BUFS
        mbarrier.wait(q_free.index(qb), ((tile_count // Q_BUFS) & 1) ^ 1)
        mbarrier.expect(q_ready.index(qb), q_desc.block_type.nbytes)
        tma_load(q_desc, [row0 + start_m * BLOCK_M, 0], q_ready.index(qb), q_smem.index(qb))
        for start_n in range(0, _kv_end(start_m, N_CTX, BLOCK_M, CAUSAL), BLOCK_N):
            slot = kv_count % STAGES
            phase = ((kv_count // STAGES) & 1) ^ 1
            mbarrier.wait(k_free.index(slot), phase)
            mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
            tma_load(k_desc, [row0 + start_n, 0], k_ready.index(slot), k_smem.index(slot))
            mbarrier.wait(v_free.index(slot), phase)
            mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
            if V_TRANSPOSED:
                tma_load(v_desc, [off_bh * HEAD_DIM, start_n], v_ready.index(slot), v_smem.index(slot))
            else:
                tma_load(v_desc, [row0 + start_n, 0], v_ready.index(slot), v_smem.index(slot))
            kv_count += 1
        tile_count += 1


@gluon.jit
def _softmax_update(s, m_i, l_i, qk_scale, offs_m, start_n, m_lo,
                    BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, s_layout: gl.constexpr):  # fmt: skip
    """One online-softmax step on a fresh S block: (p, alpha, m_new, l_new); causal blocks that cross the
    diagonal of the CTA's rows are masked."""
    s = s * qk_scale
    if CAUSAL:
        if start_n + BLOCK_N > m_lo:
            offs_n = start_n + gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_layout))
            s = gl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1))
    p = gl.exp2(s - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_new


@gluon.jit
def _p_operand(p, dtype: gl.constexpr, p_layout: gl.constexpr, p_smem, P_SMEM: gl.constexpr):
    """P as the A operand of O += P V: registers in the dot-operand layout, or (``P_SMEM``) this warpgroup's
    shared-memory buffer, written, fenced for the async proxy and synchronised before the wgmma reads it."""
    if P_SMEM:
        p_smem.store(p.to(dtype))
        fence_async_shared()
        thread_barrier()
        return p_smem
    else:
        return gl.convert_layout(p.to(dtype), p_layout)


@gluon.jit
def _wait_pv(acc, p_op, P_SMEM: gl.constexpr):
    """Wait for O += P V, keeping P's registers alive until then (Triton's wait cannot hold 8-bit registers:
    for fp8 in registers ptxas's own wgmma register tracking has to keep P intact)."""
    if P_SMEM:
        acc = warpgroup_mma_wait(0, deps=(acc,))
    elif p_op.dtype.primitive_bitwidth == 16:
        acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
    else:
        acc = warpgroup_mma_wait(0, deps=(acc,))
    return acc


@gluon.jit
def _take_turn(turn, n_turns, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Ping-pong: wait until the other consumer has issued its MMAs (warpgroup 0 goes first)."""
    if PINGPONG:
        mbarrier.wait(turn.index(WG), (n_turns & 1) ^ (1 - WG))


@gluon.jit
def _pass_turn(turn, n_turns, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Ping-pong: this consumer's MMAs are issued; the other one may issue its own."""
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - WG), count=1)
    return n_turns + 1


@gluon.jit
def _qk(q, k_smem, k_ready, s_zero, kv_count, turn, n_turns, WG: gl.constexpr, STAGES: gl.constexpr,
        PINGPONG: gl.constexpr):
    """Issue S = Q K^T on the next K/V block (asynchronous); its ring slot and phase, and the turn count."""
    slot = kv_count % STAGES
    phase = (kv_count // STAGES) & 1
    mbarrier.wait(k_ready.index(slot), phase)
    _take_turn(turn, n_turns, WG, PINGPONG)
    s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    return s, slot, phase, _pass_turn(turn, n_turns, WG, PINGPONG)


@gluon.jit
def _pv(p_op, acc, v_smem, v_ready, v_free, slot, phase, turn, n_turns, WG: gl.constexpr, V_TRANSPOSED: gl.constexpr,
        PINGPONG: gl.constexpr, P_SMEM: gl.constexpr):
    """O += P V on a K/V block's V, waited for, and the V slot freed; returns O and the turn count."""
    mbarrier.wait(v_ready.index(slot), phase)
    _take_turn(turn, n_turns, WG, PINGPONG)
    acc = warpgroup_mma(p_op, _v_operand(v_smem, slot, V_TRANSPOSED), acc, is_async=True)
    n_turns = _pass_turn(turn, n_turns, WG, PINGPONG)
    acc = _wait_pv(acc, p_op, P_SMEM)
    mbarrier.arrive(v_free.index(slot), count=1)
    return acc, n_turns


@gluon.jit
def _v_operand(v_smem, slot, V_TRANSPOSED: gl.constexpr):
    if V_TRANSPOSED:
        return v_smem.index(slot).permute((1, 0))
    else:
        return v_smem.index(slot)


@gluon.jit
def _consumer_partition(
    WG: gl.constexpr,
    Out, sm_scale, q_smem, k_smem, v_smem, p_smem, q_ready, q_free, k_ready, k_free, v_ready, v_free, turn,
    N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr,
    P_SMEM: gl.constexpr,
):  # fmt: skip
    """One consumer warpgroup: rows [WG * BLOCK_M/2, (WG+1) * BLOCK_M/2) of every tile."""
    ROWS: gl.constexpr = BLOCK_M // 2
    Q_BUFS: gl.constexpr = q_smem.shape[0]
    dtype: gl.constexpr = q_smem.dtype
    K_INSTR: gl.constexpr = 256 // dtype.primitive_bitwidth
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, K_INSTR])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, K_INSTR])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                 k_width=32 // dtype.primitive_bitwidth)
    p_buf = p_smem.index(WG)
    qk_scale = sm_scale * LOG2E
    n_m = N_CTX // BLOCK_M
    kv_count = 0
    tile_count = 0
    n_turns = 0
    for tile in range(gl.program_id(0), n_m * N_BH, gl.num_programs(0)):
        off_bh, start_m = _tile_coords(tile, n_m, N_BH, CAUSAL)
        m_lo = start_m * BLOCK_M
        offs_m = m_lo + WG * ROWS + gl.arange(0, ROWS, gl.SliceLayout(1, s_layout))
        m_i = gl.full([ROWS], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, s_layout))
        acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)
        s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
        qb = tile_count % Q_BUFS
        q = q_smem.index(qb).slice(WG * ROWS, ROWS)
        mbarrier.wait(q_ready.index(qb), (tile_count // Q_BUFS) & 1)
        # as many K/V blocks as the producer loads (the last may straddle the causal diagonal: masked)
        n_kv = gl.cdiv(_kv_end(start_m, N_CTX, BLOCK_M, CAUSAL), BLOCK_N)
        if OVERLAP:
            # prologue: S_0 and its softmax
            s, slot, phase, n_turns = _qk(q, k_smem, k_ready, s_zero, kv_count, turn, n_turns, WG, STAGES, PINGPONG)
            s = warpgroup_mma_wait(0, deps=(s,))
            mbarrier.arrive(k_free.index(slot), count=1)
            p, alpha, m_i, l_i = _softmax_update(s, m_i, l_i, qk_scale, offs_m, 0, m_lo, BLOCK_N, CAUSAL, s_layout)
            p_op = _p_operand(p, dtype, p_layout, p_buf, P_SMEM)
            prev_slot = slot
            prev_phase = phase
            kv_count += 1
            for j in range(1, n_kv):
                slot = kv_count % STAGES
                phase = (kv_count // STAGES) & 1
                mbarrier.wait(k_ready.index(slot), phase)
                mbarrier.wait(v_ready.index(prev_slot), prev_phase)
                _take_turn(turn, n_turns, WG, PINGPONG)
                s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                acc = warpgroup_mma(p_op, _v_operand(v_smem, prev_slot, V_TRANSPOSED), acc, is_async=True)
                n_turns = _pass_turn(turn, n_turns, WG, PINGPONG)
                s = warpgroup_mma_wait(1, deps=(s,))  # S_j is done; O += P V may still run
                mbarrier.arrive(k_free.index(slot), count=1)
                p, alpha, m_i, l_i = _softmax_update(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N, m_lo,
                                                     BLOCK_N, CAUSAL, s_layout)
                acc = _wait_pv(acc, p_op, P_SMEM)
                mbarrier.arrive(v_free.index(prev_slot), count=1)
                acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
                p_op = _p_operand(p, dtype, p_layout, p_buf, P_SMEM)
                prev_slot = slot
                prev_phase = phase
                kv_count += 1
            mbarrier.arrive(q_free.index(qb), count=1)  # every S of this tile is done: Q may be replaced
            acc, n_turns = _pv(p_op, acc, v_smem, v_ready, v_free, prev_slot, prev_phase, turn, n_turns, WG,
                               V_TRANSPOSED, PINGPONG, P_SMEM)
        else:
            for j in range(0, n_kv):
                s, slot, phase, n_turns = _qk(q, k_smem, k_ready, s_zero, kv_count, turn, n_turns, WG, STAGES,
                                              PINGPONG)
                s = warpgroup_mma_wait(0, deps=(s,))
                mbarrier.arrive(k_free.index(slot), count=1)
                p, alpha, m_i, l_i = _softmax_update(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N, m_lo,
                                                     BLOCK_N, CAUSAL, s_layout)
                acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
                p_op = _p_operand(p, dtype, p_layout, p_buf, P_SMEM)
                acc, n_turns = _pv(p_op, acc, v_smem, v_ready, v_free, slot, phase, turn, n_turns, WG, V_TRANSPOSED,
                                   PINGPONG, P_SMEM)
                kv_count += 1
            mbarrier.arrive(q_free.index(qb), count=1)
        o = acc / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
        rows = m_lo + WG * ROWS + gl.arange(0, ROWS, gl.SliceLayout(1, o_layout))
        cols = gl.arange(0, HEAD_DIM, gl.SliceLayout(0, o_layout))
        base = Out + off_bh.to(gl.int64) * N_CTX * HEAD_DIM
        gl.store(base + rows[:, None] * HEAD_DIM + cols[None, :], o.to(Out.dtype.element_ty))
        tile_count += 1


@gluon.jit
def gluon_attention_hopper(
    q_desc, k_desc, v_desc, Out, sm_scale, N_CTX, N_BH,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr, V_TRANSPOSED: gl.constexpr,
    OVERLAP: gl.constexpr, PINGPONG: gl.constexpr, P_SMEM: gl.constexpr, Q_BUFS: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [Q_BUFS, BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
    if P_SMEM:
        p_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M // 2, BLOCK_N], dtype)
        p_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, BLOCK_M // 2, BLOCK_N], p_sl)
    else:  # unused: a placeholder of the smallest legal shape
        p_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([8, 32], dtype)
        p_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, 8, 32], p_sl)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    k_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_free.index(i), count=CONSUMERS)
        mbarrier.init(v_free.index(i), count=CONSUMERS)
    q_ready = gl.allocate_shared_memory(gl.int64, [Q_BUFS, 1], bar_layout)
    q_free = gl.allocate_shared_memory(gl.int64, [Q_BUFS, 1], bar_layout)
    for i in gl.static_range(Q_BUFS):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_free.index(i), count=CONSUMERS)
    turn = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], bar_layout)
    for i in gl.static_range(CONSUMERS):
        mbarrier.init(turn.index(i), count=1)

    gl.warp_specialize(
        [
            (
                _consumer_partition,
                (0, Out, sm_scale, q_smem, k_smem, v_smem, p_smem, q_ready, q_free, k_ready, k_free, v_ready, v_free,
                 turn, N_CTX, N_BH, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, V_TRANSPOSED, OVERLAP, PINGPONG,
                 P_SMEM),
            ),
            (
                _consumer_partition,
                (1, Out, sm_scale, q_smem, k_smem, v_smem, p_smem, q_ready, q_free, k_ready, k_free, v_ready, v_free,
                 turn, N_CTX, N_BH, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, V_TRANSPOSED, OVERLAP, PINGPONG,
                 P_SMEM),
            ),
            (
                _load_partition,
                (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, k_ready, k_free, v_ready, v_free,
                 N_CTX, N_BH, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL, V_TRANSPOSED),
            ),
        ],
        [4, 1],
        [240, 24],
    )  # fmt: skip


# --- ptxprobe registry entry ---------------------------------------------------------------------


KNOBS = ("overlap", "pingpong", "p_smem", "q_bufs")  # the last launch arguments, in this order


def default_knobs(spec) -> dict:
    """The tuned choice per dtype: fp8 hands P over through shared memory (8-bit P in registers costs byte
    permutes and loses the intra-warpgroup overlap)."""
    fp8 = spec.dtype.startswith("fp8")
    return {"overlap": True, "pingpong": False, "p_smem": fp8, "q_bufs": 2 if _q_fits_twice(spec, fp8) else 1}


def _q_fits_twice(spec, p_smem: bool) -> bool:
    """Room for a second Q buffer beside the K/V ring (and P) within 200 of the 227 KB a CTA may have."""
    el = 1 if spec.dtype.startswith("fp8") else 2
    c = spec.config
    ring = c.num_stages * 2 * c.block_n * spec.head_dim * el
    return ring + 2 * c.block_m * spec.head_dim * el + p_smem * c.block_m * c.block_n * el <= 200 * 1024


def _args(spec, problem, inputs, **knobs):
    """The Blackwell warp-specialised kernel's arguments (the same descriptors, output and constants), then the
    schedule knobs."""
    from .gluon_attention_ws import _args as ws_args

    return [*ws_args(spec, problem, inputs), *(knobs.get(k, v) for k, v in default_knobs(spec).items())]


def _family():
    from ptxprobe.sources.registry import KernelConfig, KernelFamily

    from .triton_attention import _persistent_grid, attention_common

    # num_warps: one consumer warpgroup (the default partition); num_stages: the K/V ring depth
    cfg = KernelConfig(128, 128, 4, 2)
    return KernelFamily(
        name="attention_gluon_hopper",
        frontend="triton",
        description="Gluon Hopper FA3-style forward: TMA producer warp, two consumer warpgroups (wgmma, "
        "intra-warpgroup overlap), K/V ring, persistent (sm_90a)",
        fn=gluon_attention_hopper,
        dtypes=("fp16", "bf16", "fp8e4nv", "fp8e5"),
        head_dims=(64, 128),
        configs=(cfg, KernelConfig(128, 256, 4, 2), KernelConfig(128, 64, 4, 3)),
        default_config=cfg,
        launch_args=_args,
        grid=_persistent_grid,
        **attention_common(),
        archs=("sm_90a",),
        # 3 warpgroups (2 consumers + the producer's) share 64K registers: 168 each at launch, then
        # setmaxnreg moves them to 240 / 240 / 24
        options={"maxnreg": 168},
    )


FAMILIES = (_family(),)
