"""A small torch.compile'd transformer block: Inductor writes its Triton kernels (nobody here wrote them).

    python experiments/external/inductor_model.py [--seconds S]

Pre-norm block (RMSNorm, attention through SDPA, RMSNorm, SwiGLU MLP) in bf16, batch 8 x 1024
tokens, width 1024, compiled by Inductor; the pointwise and reduction work around the matmuls is
what Inductor generates as Triton kernels. After warm-up, a timed loop of about ``--seconds``
(CUDA events); prints ``step_ms=`` (what ``capture --run --metric 'step_ms=(\\S+)'`` reads). Needs a GPU.
"""

from __future__ import annotations

import argparse
import sys


def build(width: int = 1024, heads: int = 8):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(width), nn.RMSNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width, bias=False)
            self.up, self.gate = nn.Linear(width, 4 * width, bias=False), nn.Linear(width, 4 * width, bias=False)
            self.down = nn.Linear(4 * width, width, bias=False)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
            y = self.n2(x)
            return x + self.down(torch.nn.functional.silu(self.gate(y)) * self.up(y))

    return Block()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args(argv)
    import os

    # Inductor compiles in one process: the capture hook sees every compile where the launch happens
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    torch.manual_seed(0)
    model = build().cuda().to(torch.bfloat16)
    step = torch.compile(model)
    x = torch.randn(8, 1024, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            step(x)
        torch.cuda.synchronize()
        a0, a1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a0.record()
        step(x)
        a1.record()
        a1.synchronize()
        iters = max(5, int(a.seconds * 1e3 / max(a0.elapsed_time(a1), 1e-3)))
        a0.record()
        for _ in range(iters):
            step(x)
        a1.record()
        a1.synchronize()
    print(f"iters={iters} step_ms={a0.elapsed_time(a1) / iters:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
