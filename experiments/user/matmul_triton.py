"""An fp16 Triton matmul (tl.dot, fp32 accumulation) to run through ptxprobe as a user kernel."""

import triton
import triton.language as tl


@triton.jit
def matmul_fp16(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(A + rows[:, None] * K + (k0 + ks)[None, :])
        b = tl.load(B + (k0 + ks)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(C + rows[:, None] * N + cols[None, :], acc.to(tl.float16))
