"""flash-linear-attention's (fla-core) chunked ops called as its layers call them, forward and backward, at a
1.3B-model shape (batch 1, 2048 tokens, 16 heads of 128), bf16, on CPU tensors: run by ``ptxprobe capture
--interpret``, each launch is recorded as the library specialised it (every autotune config its pruning keeps).

Each op is tried alone; one line per op says whether it ran. Under the interpreter the library's host code sees no
GPU, so choices it makes from the device (configs by architecture or shared memory) take their no-GPU branch: the
atlas says so beside these kernels. The library is imported from the environment it is installed in, never copied.

On a GPU (``--device cuda --op NAME --time SECONDS``) one op, its inputs made once, is timed forward and backward
(``drivers/op_timing.py``): the atlas's speed sample.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from op_timing import cli, run_ops

BATCH, SEQ, HEADS, HEAD_DIM = 1, 2048, 16, 128


def ops():
    from fla.ops.delta_rule import chunk_delta_rule
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.gla import chunk_gla
    from fla.ops.retention import chunk_retention
    from fla.ops.simple_gla import chunk_simple_gla

    dt = torch.bfloat16

    def x(*shape):
        return lambda: torch.randn(*shape).to(dt).requires_grad_(True)

    qkv = [x(BATCH, SEQ, HEADS, HEAD_DIM)] * 3

    def unit_k():
        return F.normalize(torch.randn(BATCH, SEQ, HEADS, HEAD_DIM), dim=-1).to(dt).requires_grad_(True)

    def gate(*shape):
        return lambda: F.logsigmoid(torch.randn(*shape)).requires_grad_(True)

    def beta():
        return torch.rand(BATCH, SEQ, HEADS).to(dt).requires_grad_(True)

    def run(f, *make):
        """The op's setup: its inputs made once (keys of unit norm where the rule wants them); the step calls it,
        forward and backward."""
        def setup():
            inputs = [m() for m in make]
            return lambda: f(*inputs)[0].float().sum().backward()
        return setup

    q, k, v = qkv
    return [
        ("chunk_gla", run(chunk_gla, q, k, v, lambda: gate(BATCH, SEQ, HEADS, HEAD_DIM)().detach().to(dt)
                          .requires_grad_(True))),
        ("chunk_simple_gla", run(chunk_simple_gla, q, k, v, gate(BATCH, SEQ, HEADS))),
        ("chunk_retention", run(chunk_retention, q, k, v)),
        ("chunk_delta_rule", run(chunk_delta_rule, q, unit_k, v, beta)),
        ("chunk_gated_delta_rule", run(chunk_gated_delta_rule, q, unit_k, v, gate(BATCH, SEQ, HEADS), beta)),
    ]


def main() -> int:
    """``--device cuda``: the calls on the GPU; with ``--op`` and ``--time`` one op timed."""
    a = cli(sys.argv[1:], dtypes=("bf16",))
    return run_ops(a, lambda dtype: ops(), dtypes={"bf16": torch.bfloat16})


if __name__ == "__main__":
    sys.exit(main())
