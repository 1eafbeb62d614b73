"""flash-linear-attention's (fla-core) chunked ops called as its layers call them, forward and backward, at a
1.3B-model shape (batch 1, 2048 tokens, 16 heads of 128), bf16, on CPU tensors: run by ``ptxprobe capture
--interpret``, each launch is recorded as the library specialised it (every autotune config its pruning keeps).

Each op is tried alone; one line per op says whether it ran. Under the interpreter the library's host code sees no
GPU, so choices it makes from the device (configs by architecture or shared memory) take their no-GPU branch: the
atlas says so beside these kernels. The library is imported from the environment it is installed in, never copied.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.nn.functional as F

BATCH, SEQ, HEADS, HEAD_DIM = 1, 2048, 16, 128


def ops():
    from fla.ops.delta_rule import chunk_delta_rule
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.gla import chunk_gla
    from fla.ops.retention import chunk_retention
    from fla.ops.simple_gla import chunk_simple_gla

    dt = torch.bfloat16

    def x(*shape):
        return torch.randn(*shape).to(dt).requires_grad_(True)

    def qkv():
        q, k, v = (x(BATCH, SEQ, HEADS, HEAD_DIM) for _ in range(3))
        return q, k, v

    def unit(k):
        return F.normalize(k.float(), dim=-1).to(dt)

    def gate(*shape):
        return F.logsigmoid(torch.randn(*shape)).requires_grad_(True)

    def beta():
        return torch.rand(BATCH, SEQ, HEADS).to(dt).requires_grad_(True)

    def run(f):
        o, _ = f()
        o.float().sum().backward()

    return [
        ("chunk_gla", lambda: run(lambda: chunk_gla(*qkv(), gate(BATCH, SEQ, HEADS, HEAD_DIM).to(dt)))),
        ("chunk_simple_gla", lambda: run(lambda: chunk_simple_gla(*qkv(), gate(BATCH, SEQ, HEADS)))),
        ("chunk_retention", lambda: run(lambda: chunk_retention(*qkv()))),
        ("chunk_delta_rule", lambda: run(lambda: (lambda q, k, v: chunk_delta_rule(q, unit(k), v, beta()))(*qkv()))),
        ("chunk_gated_delta_rule", lambda: run(lambda: (lambda q, k, v: chunk_gated_delta_rule(
            q, unit(k), v, gate(BATCH, SEQ, HEADS), beta()))(*qkv()))),
    ]


def main() -> int:
    torch.manual_seed(0)
    for name, thunk in ops():
        start = time.perf_counter()
        try:
            thunk()
            said = {"op": name, "dtype": "torch.bfloat16", "ran": True}
        except Exception as exc:  # noqa: BLE001 - counted per op, the driver goes on
            said = {"op": name, "dtype": "torch.bfloat16", "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        print("atlas-driver:", json.dumps({**said, "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
