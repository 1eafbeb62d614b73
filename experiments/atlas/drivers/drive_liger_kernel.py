"""liger-kernel's own modules called as a model calls them, forward and backward, at Llama-3-8B's shapes (hidden
4096, MLP 14336, vocabulary 128256, 32 query and 8 key-value heads of 128; 2 sequences of 512 tokens; the
vocabulary-wide losses on 64 of those rows, which specialise as the whole would: a multiple of 16) in bf16 and
fp32, on CPU tensors: run by ``ptxprobe capture --interpret``, each launch is recorded as the library specialised it.

Each op is tried alone; one line per op says whether it ran (an op whose host code needs CUDA fails here and is
counted, not hidden). The library's code is imported from the environment it is installed in, never copied.

On a GPU (``--device cuda --op NAME --dtype bf16 --time SECONDS``) one op's forward and backward, its inputs made
once, is called back to back for about SECONDS after a warm-up and its median time per call printed as ``ms=``:
what ``ptxprobe capture --run --metric 'ms=(\\S+)'`` compares between names (the atlas's speed sample).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch
from op_timing import cli, run_ops

HIDDEN, MLP, VOCAB, HEADS, KV_HEADS, HEAD_DIM, BATCH, SEQ = 4096, 14336, 128256, 32, 8, 128, 2, 512
ROWS = BATCH * SEQ
VOCAB_ROWS = 64


def _grad(*xs):
    return [x.detach().requires_grad_(True) for x in xs]


def ops(dtype):
    """(name, setup) for each module, built the way a model builds it: ``setup()`` makes the module and its inputs
    and returns the step (one forward and backward)."""
    import liger_kernel.transformers as lt

    config = SimpleNamespace(hidden_size=HIDDEN, intermediate_size=MLP, hidden_act="silu", hidden_activation="gelu")

    def x(*shape, scale=1.0):
        return (torch.randn(*shape) * scale).to(dtype)

    def backward(y):
        (y.float().sum() if y.dim() else y).backward()

    def norm(module, *inputs):
        def setup():
            m, xs = module().to(dtype), _grad(*(make() for make in inputs))
            return lambda: backward(m(*xs) if len(xs) == 1 else m(*xs)[0])
        return setup

    def rope():
        q, k = _grad(x(BATCH, HEADS, SEQ, HEAD_DIM), x(BATCH, KV_HEADS, SEQ, HEAD_DIM))
        cos, sin = x(1, SEQ, HEAD_DIM), x(1, SEQ, HEAD_DIM)

        def step():
            qo, ko = lt.liger_rotary_pos_emb(q, k, cos, sin)
            backward(qo.float().sum() + ko.float().sum())
        return step

    def cross_entropy():
        logits, = _grad(x(VOCAB_ROWS, VOCAB))
        target = torch.randint(0, VOCAB, (VOCAB_ROWS,))
        loss = lt.LigerCrossEntropyLoss()
        return lambda: backward(loss(logits.float() if dtype == torch.float32 else logits, target))

    def fused_linear_ce():
        h, w = _grad(x(VOCAB_ROWS, HIDDEN), x(VOCAB, HIDDEN, scale=0.02))
        target = torch.randint(0, VOCAB, (VOCAB_ROWS,))
        loss = lt.LigerFusedLinearCrossEntropyLoss()
        return lambda: backward(loss(w, h, target))

    def distill(module):
        def setup():
            p, q = _grad(x(VOCAB_ROWS, VOCAB), x(VOCAB_ROWS, VOCAB))
            lp, lq = _grad(torch.log_softmax(p.float(), -1).to(dtype), torch.log_softmax(q.float(), -1).to(dtype))
            m = module()
            return lambda: backward(m(lp, lq))
        return setup

    def rows(*shape, scale=1.0):
        return lambda: x(*shape, scale=scale)

    return [
        ("rms_norm", norm(lambda: lt.LigerRMSNorm(HIDDEN), rows(BATCH, SEQ, HIDDEN))),
        ("layer_norm", norm(lambda: lt.LigerLayerNorm(HIDDEN), rows(BATCH, SEQ, HIDDEN))),
        ("fused_add_rms_norm", norm(lambda: lt.LigerFusedAddRMSNorm(HIDDEN), rows(BATCH, SEQ, HIDDEN),
                                    rows(BATCH, SEQ, HIDDEN))),
        ("poly_norm", norm(lambda: lt.LigerPolyNorm(in_place=False), rows(BATCH, SEQ, HIDDEN))),
        ("dyt", norm(lambda: lt.LigerDyT(HIDDEN), rows(BATCH, SEQ, HIDDEN))),
        ("group_norm", norm(lambda: lt.LigerGroupNorm(HIDDEN // 128, 32), rows(BATCH, HIDDEN // 128, SEQ))),
        ("swiglu_mlp", norm(lambda: lt.LigerSwiGLUMLP(config), rows(BATCH, SEQ // 4, HIDDEN, scale=0.1))),
        ("geglu_mlp", norm(lambda: lt.LigerGEGLUMLP(config), rows(BATCH, SEQ // 4, HIDDEN, scale=0.1))),
        ("relu_squared", norm(lambda: lt.LigerReLUSquared(), rows(BATCH, SEQ, MLP))),
        ("softmax", norm(lambda: lt.LigerSoftmax(), rows(BATCH * HEADS, SEQ, SEQ // 4))),
        ("sparsemax", norm(lambda: lt.LigerSparsemax(), rows(BATCH * HEADS, SEQ // 4, SEQ // 4))),
        ("rope", rope),
        ("cross_entropy", cross_entropy),
        ("fused_linear_cross_entropy", fused_linear_ce),
        ("kl_div", distill(lt.LigerKLDIVLoss)),
        ("jsd", distill(lt.LigerJSD)),
        ("tvd", distill(lt.LigerTVDLoss)),
    ]


def main() -> int:
    """``--device cuda``: the same calls on the GPU (a GPU capture to compare the interpreter's with); with ``--op``
    and ``--time`` one op timed."""
    a = cli(sys.argv[1:], dtypes=("bf16", "fp32"))
    return run_ops(a, lambda dtype: ops(dtype), dtypes={"bf16": torch.bfloat16, "fp32": torch.float32})


if __name__ == "__main__":
    sys.exit(main())
