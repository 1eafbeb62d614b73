"""Flash-attention forward (FA2 algorithm, online softmax) in Triton, written for ptxprobe.

Two schedules share one tile body: ``attention``, the classic grid, one program per (query block, batch*head);
``attention_persistent``, one program per SM that strides over all tiles (the refactor that preceded the ``cutlass``
naming observation).

Layout: Q, K, V and Out are contiguous (Z, H, N, D). For fp8 inputs V is passed transposed, (Z, H, D, N), so both
tensor-core operands of P@V are K-major, which Hopper's fp8 wgmma requires; the output is fp16 for fp8 inputs. The
sequence length must be a multiple of both block sizes (no masking on loads).
Inputs, the float64 reference and the FLOP count are in ``attention_common`` (they need no Triton).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .attention_common import _DTYPE_NAMES, _is_fp8, _out_dtype_name, attention_common

LOG2E = 1.4426950408889634


@triton.jit
def _tile_loop(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    offs_m,
    offs_n0,
    offs_d,
    lo,
    hi,
    qk_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    V_TRANSPOSED: tl.constexpr,
):
    """Accumulate softmax(q k^T) v over key blocks [lo, hi)."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_n0
        k = tl.load(k_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        if MASKED:
            keep = offs_m[:, None] >= offs_n[None, :]
            s = tl.where(keep, s * qk_scale, -1.0e6)
        else:
            s = s * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if V_TRANSPOSED:
            vt = tl.load(v_base + offs_d[:, None] * N_CTX + offs_n[None, :])
            acc = tl.dot(p.to(vt.dtype), tl.trans(vt), acc)
        else:
            v = tl.load(v_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
            acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_tile(
    Q,
    K,
    V,
    Out,
    sm_scale,
    N_CTX,
    start_m,
    off_bh,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    V_TRANSPOSED: tl.constexpr,
):
    """Compute one BLOCK_M x HEAD_DIM output tile of one (batch, head)."""
    head_offset = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + head_offset + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    k_base = K + head_offset
    v_base = V + head_offset
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        # Blocks strictly below the diagonal need no mask; the diagonal band does.
        hi_full = start_m * BLOCK_M
        acc, l_i, m_i = _tile_loop(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            offs_m,
            offs_n0,
            offs_d,
            0,
            hi_full,
            qk_scale,
            N_CTX,
            HEAD_DIM,
            BLOCK_N,
            False,
            V_TRANSPOSED,
        )
        acc, l_i, m_i = _tile_loop(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            offs_m,
            offs_n0,
            offs_d,
            hi_full,
            hi_full + BLOCK_M,
            qk_scale,
            N_CTX,
            HEAD_DIM,
            BLOCK_N,
            True,
            V_TRANSPOSED,
        )
    else:
        acc, l_i, m_i = _tile_loop(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            offs_m,
            offs_n0,
            offs_d,
            0,
            N_CTX,
            qk_scale,
            N_CTX,
            HEAD_DIM,
            BLOCK_N,
            False,
            V_TRANSPOSED,
        )
    out = acc / l_i[:, None]
    tl.store(Out + head_offset + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(Out.dtype.element_ty))


@triton.jit
def attention(
    Q,
    K,
    V,
    Out,
    sm_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    V_TRANSPOSED: tl.constexpr,
):
    """Classic grid: axis 0 walks query blocks, axis 1 walks batch*heads."""
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    _attention_tile(Q, K, V, Out, sm_scale, N_CTX, start_m, off_bh, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, V_TRANSPOSED)


@triton.jit
def attention_persistent(
    Q,
    K,
    V,
    Out,
    sm_scale,
    N_CTX,
    N_BH,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    V_TRANSPOSED: tl.constexpr,
):
    """Persistent grid: each program strides over tiles, heaviest (causal: last) query blocks first."""
    n_m = N_CTX // BLOCK_M
    n_tiles = n_m * N_BH
    for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), flatten=False):
        off_bh = tile % N_BH
        start_m = tile // N_BH
        if CAUSAL:
            start_m = n_m - 1 - start_m
        _attention_tile(
            Q, K, V, Out, sm_scale, N_CTX, start_m, off_bh, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, V_TRANSPOSED
        )


# --- ptxprobe registry entries ------------------------------------------------------------


def _constexprs(spec) -> list:
    c = spec.config
    return [spec.head_dim, c.block_m, c.block_n, spec.causal, _is_fp8(spec)]


def _pointers(spec, inputs):
    from ptxprobe.sources.registry import PointerArg

    if inputs is not None:
        return [inputs["q"], inputs["k"], inputs["v"], inputs["out"]]
    dt, out = _DTYPE_NAMES[spec.dtype], _out_dtype_name(spec.dtype)
    return [PointerArg(dt), PointerArg(dt), PointerArg(dt), PointerArg(out)]


def _classic_args(spec, problem, inputs):
    return [*_pointers(spec, inputs), spec.head_dim**-0.5, problem.seq_len, *_constexprs(spec)]


def _persistent_args(spec, problem, inputs):
    return [
        *_pointers(spec, inputs),
        spec.head_dim**-0.5,
        problem.seq_len,
        problem.batch * problem.heads,
        *_constexprs(spec),
    ]


def _classic_grid(spec, problem, n_sms):
    return (problem.seq_len // spec.config.block_m, problem.batch * problem.heads, 1)


def _persistent_grid(spec, problem, n_sms):
    tiles = (problem.seq_len // spec.config.block_m) * problem.batch * problem.heads
    return (min(n_sms, tiles), 1, 1)


def _families():
    from ptxprobe.sources.registry import KernelConfig, KernelFamily

    configs = (KernelConfig(128, 64, 8, 3), KernelConfig(128, 128, 8, 2), KernelConfig(64, 64, 4, 2))
    common = dict(
        frontend="triton",
        dtypes=("fp16", "bf16", "fp8e5", "fp8e4nv"),
        head_dims=(64, 128),
        configs=configs,
        default_config=configs[0],
        **attention_common(),
    )
    return (
        KernelFamily(
            name="attention",
            description="Triton FA2 forward, one program per (query block, head)",
            fn=attention,
            launch_args=_classic_args,
            grid=_classic_grid,
            **common,
        ),
        KernelFamily(
            name="attention_persistent",
            description="Triton FA2 forward, persistent: one program per SM striding over tiles",
            fn=attention_persistent,
            launch_args=_persistent_args,
            grid=_persistent_grid,
            **common,
        ),
    )


FAMILIES = _families()
