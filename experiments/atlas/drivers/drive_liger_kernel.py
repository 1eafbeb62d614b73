"""liger-kernel's own modules called as a model calls them, forward and backward, at Llama-3-8B's shapes (hidden
4096, MLP 14336, vocabulary 128256, 32 query and 8 key-value heads of 128; 2 sequences of 512 tokens; the
vocabulary-wide losses on 64 of those rows, which specialise as the whole would: a multiple of 16) in bf16 and
fp32, on CPU tensors: run by ``ptxprobe capture --interpret``, each launch is recorded as the library specialised it.

Each op is tried alone; one line per op says whether it ran (an op whose host code needs CUDA fails here and is
counted, not hidden). The library's code is imported from the environment it is installed in, never copied.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import torch

HIDDEN, MLP, VOCAB, HEADS, KV_HEADS, HEAD_DIM, BATCH, SEQ = 4096, 14336, 128256, 32, 8, 128, 2, 512
ROWS = BATCH * SEQ
VOCAB_ROWS = 64


def _grad(*xs):
    return [x.detach().requires_grad_(True) for x in xs]


def ops(dtype):
    """(name, thunk) for each module, built the way a model builds it."""
    import liger_kernel.transformers as lt

    config = SimpleNamespace(hidden_size=HIDDEN, intermediate_size=MLP, hidden_act="silu", hidden_activation="gelu")

    def x(*shape, scale=1.0):
        return (torch.randn(*shape) * scale).to(dtype)

    def backward(y):
        (y.float().sum() if y.dim() else y).backward()

    def norm(module, *inputs):
        module = module.to(dtype)
        backward(module(*_grad(*inputs)) if len(inputs) == 1 else module(*_grad(*inputs))[0])

    def rope():
        q, k = _grad(x(BATCH, HEADS, SEQ, HEAD_DIM), x(BATCH, KV_HEADS, SEQ, HEAD_DIM))
        cos, sin = x(1, SEQ, HEAD_DIM), x(1, SEQ, HEAD_DIM)
        qo, ko = lt.liger_rotary_pos_emb(q, k, cos, sin)
        backward(qo.float().sum() + ko.float().sum())

    def cross_entropy():
        logits, = _grad(x(VOCAB_ROWS, VOCAB))
        backward(lt.LigerCrossEntropyLoss()(logits.float() if dtype == torch.float32 else logits,
                                            torch.randint(0, VOCAB, (VOCAB_ROWS,))))

    def fused_linear_ce():
        h, w = _grad(x(VOCAB_ROWS, HIDDEN), x(VOCAB, HIDDEN, scale=0.02))
        backward(lt.LigerFusedLinearCrossEntropyLoss()(w, h, torch.randint(0, VOCAB, (VOCAB_ROWS,))))

    def distill(module):
        p, q = _grad(x(VOCAB_ROWS, VOCAB), x(VOCAB_ROWS, VOCAB))
        backward(module(torch.log_softmax(p.float(), -1).to(dtype), torch.log_softmax(q.float(), -1).to(dtype)))

    return [
        ("rms_norm", lambda: norm(lt.LigerRMSNorm(HIDDEN), x(BATCH, SEQ, HIDDEN))),
        ("layer_norm", lambda: norm(lt.LigerLayerNorm(HIDDEN), x(BATCH, SEQ, HIDDEN))),
        ("fused_add_rms_norm", lambda: norm(lt.LigerFusedAddRMSNorm(HIDDEN), x(BATCH, SEQ, HIDDEN),
                                            x(BATCH, SEQ, HIDDEN))),
        ("poly_norm", lambda: norm(lt.LigerPolyNorm(in_place=False), x(BATCH, SEQ, HIDDEN))),
        ("dyt", lambda: norm(lt.LigerDyT(HIDDEN), x(BATCH, SEQ, HIDDEN))),
        ("group_norm", lambda: norm(lt.LigerGroupNorm(HIDDEN // 128, 32), x(BATCH, HIDDEN // 128, SEQ))),
        ("swiglu_mlp", lambda: norm(lt.LigerSwiGLUMLP(config), x(BATCH, SEQ // 4, HIDDEN, scale=0.1))),
        ("geglu_mlp", lambda: norm(lt.LigerGEGLUMLP(config), x(BATCH, SEQ // 4, HIDDEN, scale=0.1))),
        ("relu_squared", lambda: norm(lt.LigerReLUSquared(), x(BATCH, SEQ, MLP))),
        ("softmax", lambda: norm(lt.LigerSoftmax(), x(BATCH * HEADS, SEQ, SEQ // 4))),
        ("sparsemax", lambda: norm(lt.LigerSparsemax(), x(BATCH * HEADS, SEQ // 4, SEQ // 4))),
        ("rope", rope),
        ("cross_entropy", cross_entropy),
        ("fused_linear_cross_entropy", fused_linear_ce),
        ("kl_div", lambda: distill(lt.LigerKLDIVLoss())),
        ("jsd", lambda: distill(lt.LigerJSD())),
        ("tvd", lambda: distill(lt.LigerTVDLoss())),
    ]


def main() -> int:
    """``--device cuda``: the same calls on the GPU (a GPU capture to compare the interpreter's with)."""
    torch.manual_seed(0)
    if "--device" in sys.argv:
        torch.set_default_device(sys.argv[sys.argv.index("--device") + 1])
    for dtype in (torch.bfloat16, torch.float32):
        for name, thunk in ops(dtype):
            start = time.perf_counter()
            try:
                thunk()
                said = {"op": name, "dtype": str(dtype), "ran": True}
            except Exception as exc:  # noqa: BLE001 - counted per op, the driver goes on
                said = {"op": name, "dtype": str(dtype), "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            print("atlas-driver:", json.dumps({**said, "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
