"""An fp32 Triton matmul whose inner loop is FFMA (``tl.dot`` with ``input_precision="ieee"``: no tensor cores),
the Triton counterpart of sgemm.cu; run as a program it times itself and prints ``ms=<per matmul>``.

Its machine code changes with the ``cutlass`` name under every ptxas release from 12.4 to 13.0 on sm_90a, which
makes it the program of the ``tune``/``apply`` study (experiments/gpu/h200_tune.sh ffma):

    ptxprobe tune --triton experiments/user/ffma_matmul.py:cutlass_matmul_fp32 \\
        --spec experiments/user/ffma_matmul.toml -o T
    ptxprobe apply T --rounds 10 --metric 'ms=(\\S+)' -- python experiments/user/ffma_matmul.py cutlass_matmul_fp32
"""

import os
import sys

import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 16


@triton.jit
def matmul_fp32(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(A + rows[:, None] * K + (k0 + ks)[None, :])
        b = tl.load(B + (k0 + ks)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(C + rows[:, None] * N + cols[None, :], acc)


# the same kernel under the name a CUTLASS-minded author might give it (as Triton's Gluon tutorial named its
# attention): ptxas sees the entry ``cutlass_matmul_fp32``
cutlass_matmul_fp32 = triton.jit(repr=lambda _: "cutlass_matmul_fp32")(matmul_fp32.fn)
KERNELS = {"matmul_fp32": matmul_fp32, "cutlass_matmul_fp32": cutlass_matmul_fp32}


def main(kernel: str = "matmul_fp32", size: int = 4096, iters: int = 40) -> None:
    """The program: one matmul checked against torch in float64, then ``iters`` timed back to back."""
    import torch

    fn = KERNELS[kernel]

    a, b = (torch.randn(size, size, device="cuda", dtype=torch.float32) for _ in range(2))
    c = torch.empty_like(a)
    grid = (size // BLOCK_M, size // BLOCK_N)

    def launch():
        fn[grid](a, b, c, size, size, size, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                          num_warps=4, num_stages=3)

    launch()
    want = (a.double() @ b.double()).float()
    err = ((c - want).abs().max() / want.abs().max()).item()
    if not err < 1e-5:
        sys.exit(f"{kernel}: relative error {err:.3g} against float64")
    for _ in range(3):
        launch()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        launch()
    stop.record()
    stop.synchronize()
    print(f"{kernel} ms={start.elapsed_time(stop) / iters:.5f} err={err:.2e}")


if __name__ == "__main__":
    # a kernel renamed by repr= keeps Triton's cache key: compile afresh so the name is the one asked for
    os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")
    main(sys.argv[1] if len(sys.argv) > 1 else "matmul_fp32", *(int(x) for x in sys.argv[2:4]))
