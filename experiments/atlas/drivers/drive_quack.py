"""quack-kernels' own compile functions called as its ops call them for a model's tensors, at real models' shapes
(hidden 2048, 4096 and 8192: Llama-3.2-1B, Llama-3-8B, Llama-3-70B; Llama-3-8B's projections, MLP 14336, 32 query
and 8 key-value heads of 128; vocabularies 32000 and 128256; 8192 tokens a step; a MoE router of 128 experts, top
8) in bf16 and fp16 (fp32 where a model keeps it: norms, the loss), with no GPU: run by ``ptxprobe capture --arch
ARCH``, which pins the CuTe DSL's target (``CUTE_DSL_ARCH``) and keeps the PTX each compile makes.

quack compiles ahead of time on fake tensors (``cute.runtime.make_fake_tensor``): its ``_compile_*`` functions and
the ``compile`` methods of its kernel classes take dtypes and the static sizes only. Each is called here with the
arguments quack's own wrapper derives from real tensors (``rmsnorm`` forward and backward, ``layernorm_fwd`` and
``_bwd``, ``softmax``, ``cross_entropy``, ``apply_rotary``, ``topk``, ``gemm(..., tuned=False)`` as ``Linear``
calls it forward, for the input gradient and for the weight gradient, ``split_k_reduce``, ``rms_final_reduce``),
read from its source: the GEMMs' arguments are those ``quack.gemm._build_gemm_plan`` passes for a dense 2-D call
with quack's default config for the arch (the autotuner and nvMatmulHeuristics need a GPU). quack's choices
that ask the device read ``QUACK_ARCH``, set here to the target: its documented override for compiling without
a GPU. Its persistent object cache is switched off (``QUACK_CACHE_ENABLED=0``): a kernel loaded from it is not
compiled, and leaves no PTX.

One line per op call (``atlas-driver: {json}``): the op, quack's function, dtype, shape, config, whether it ran
and whether it compiled a new kernel (a GEMM's kernel does not depend on M, N, K: the projections after the
first reuse it); an op that fails is said, with its error, and the driver goes on.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

from dsl_lines import plain, ptx_count

ARCH = os.environ.get("CUTE_DSL_ARCH")
if not ARCH:
    sys.exit("drive_quack.py: CUTE_DSL_ARCH is not set; run it under ptxprobe capture --arch sm_90a")
os.environ.setdefault("QUACK_ARCH", ARCH)
os.environ["QUACK_CACHE_ENABLED"] = "0"

HIDDEN, MLP, HEADS, KV_HEADS, HEAD_DIM, TOKENS = 4096, 14336, 32, 8, 128, 8192
NORM_SIZES = (2048, 4096, 8192)
VOCABS = (32000, 128256)
EXPERTS, TOP_K = 128, 8
SPLIT_K = 4
# Llama-3-8B's linear layers at 8192 tokens: (name, in_features K, out_features N)
PROJECTIONS = (("qkv_proj", HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM), ("o_proj", HIDDEN, HIDDEN),
               ("gate_up_proj", HIDDEN, 2 * MLP), ("down_proj", MLP, HIDDEN), ("lm_head", HIDDEN, VOCABS[1]))


def ops():
    """(op, quack function, dtype, shape, config, thunk) for every call, in order."""
    from cutlass import BFloat16, Float8E4M3FN, Float16, Float32, Int64
    from quack.cross_entropy import CrossEntropy, CrossEntropyBackward
    from quack.cute_dsl_utils import get_device_capacity
    from quack.gemm import _compile_gemm
    from quack.gemm_config import SplitKMode, default_config
    from quack.rms_final_reduce import _compile_rms_final_reduce
    from quack.rmsnorm import _bucket_T_hint, _compile_rmsnorm_bwd, _compile_rmsnorm_fwd
    from quack.rmsnorm_config import RmsNormBwdConfig, RmsNormFwdConfig
    from quack.rotary import RotaryKernel
    from quack.rounding import RoundingMode
    from quack.softmax import Softmax, SoftmaxBackward
    from quack.split_k_reduce import _compile_split_k_reduce
    from quack.topk import TopK, TopKBackward

    names = {BFloat16: "bf16", Float16: "fp16", Float32: "fp32", Float8E4M3FN: "fp8_e4m3"}
    capacity = get_device_capacity()
    gemm_config = default_config(None)
    t_hint = _bucket_T_hint(TOKENS)
    calls = []

    def add(op, fn, dtype, shape, thunk, config=None):
        calls.append((op, f"{fn.__module__}.{fn.__qualname__}", names.get(dtype, str(dtype)), shape,
                      plain(config), fn, thunk))

    def norm(d, n, residual=False, layernorm=False, out="fwd"):
        """rmsnorm()/layernorm_fwd() forward as autograd calls it (rstd kept for the backward; the weight in the
        activations' dtype, a LayerNorm's weight and bias in fp32 as layernorm_fwd requires), and its backward
        (rmsnorm_bwd's dense path: fp32 dW partials; layernorm_bwd: dW and dB partials)."""
        w = Float32 if layernorm else d
        if out == "fwd":
            cfg = RmsNormFwdConfig.from_analytical_heuristic(n, d.width, is_layernorm=layernorm)
            return cfg, lambda: _compile_rmsnorm_fwd(d, d, d if residual else None, w, Float32 if layernorm else None,
                                                     d if residual else None, n, True, layernorm, layernorm, False,
                                                     0.0)
        cfg = RmsNormBwdConfig.from_analytical_heuristic(n, d.width, d.width, T_hint=t_hint,
                                                         num_acc=2 if layernorm else 1)
        return cfg, lambda: _compile_rmsnorm_bwd(n, d, d, d, w, layernorm, None, d if residual else None, True,
                                                 False, T_hint=t_hint, is_layernorm=layernorm, weight_offset=0.0)

    def gemm(a, d, a_major, b_major, dynamic):
        """quack.gemm._compile_gemm as _build_gemm_plan calls it for gemm(A, B, tuned=False): dense, unbatched
        (2-D), B handed over as (K, N) (b_kn), no epilogue operands, split_k 1, the default config of the arch."""
        c = gemm_config
        return lambda: _compile_gemm(
            a, a, d, None, a_major, b_major, "n", None, (c.tile_m, c.tile_n), (c.cluster_m, c.cluster_n, c.cluster_k),
            c.pingpong, True, dynamic or c.is_dynamic_persistent, None, None, 0, 0, 0, False, (), False, False, False,
            False, False, capacity, RoundingMode.RN, 0, c.num_warps, None, None, 1, SplitKMode.SERIAL, False, True,
            True, None, 0, None, None, None, False)

    for d in (BFloat16, Float16):
        for n in NORM_SIZES:
            for out in ("fwd", "bwd"):
                cfg, thunk = norm(d, n, out=out)
                add(f"rmsnorm_{out}", _compile_rmsnorm_fwd if out == "fwd" else _compile_rmsnorm_bwd, d,
                    {"N": n, "rows": TOKENS}, thunk, cfg)
        for label, kw in (("fused_add_rmsnorm", {"residual": True}), ("layernorm", {"layernorm": True})):
            for out in ("fwd", "bwd"):
                cfg, thunk = norm(d, HIDDEN, out=out, **kw)
                add(f"{label}_{out}", _compile_rmsnorm_fwd if out == "fwd" else _compile_rmsnorm_bwd, d,
                    {"N": HIDDEN, "rows": TOKENS}, thunk, cfg)
        for v in VOCABS:  # softmax over a vocabulary (sampling), forward and backward
            add("softmax_fwd", Softmax.compile, d, {"N": v}, lambda d=d, v=v: Softmax.compile(d, d, v))
            add("softmax_bwd", SoftmaxBackward.compile, d, {"N": v},
                lambda d=d, v=v: SoftmaxBackward.compile(d, d, d, v))
        for v in VOCABS:  # cross_entropy(logits, int64 labels): forward keeps lse, backward from it
            add("cross_entropy_fwd", CrossEntropy.compile, d, {"vocab": v},
                lambda d=d, v=v: CrossEntropy.compile(d, Int64, None, v, True, False, None, None))
            add("cross_entropy_bwd", CrossEntropyBackward.compile, d, {"vocab": v},
                lambda d=d, v=v: CrossEntropyBackward.compile(d, Int64, v, None))
        for conjugate, op in ((False, "rotary_fwd"), (True, "rotary_bwd")):  # apply_rotary, cos/sin in x's dtype
            add(op, RotaryKernel.compile, d, {"head_dim": HEAD_DIM, "heads": HEADS},
                lambda d=d, c=conjugate: RotaryKernel.compile(d, d, None, None, HEAD_DIM, False, c))
        add("topk_softmax_fwd", TopK.compile, d, {"N": EXPERTS, "k": TOP_K},
            lambda d=d: TopK.compile(d, EXPERTS, TOP_K, True))
        add("topk_softmax_bwd", TopKBackward.compile, d, {"N": EXPERTS, "k": TOP_K},
            lambda d=d: TopKBackward.compile(d, d, d, EXPERTS, TOP_K, True))
        cfg = {k: v for k, v in plain(gemm_config).items() if k not in ("split_k", "swap_ab", "use_tma_gather")}
        for name, k_in, n_out in PROJECTIONS:  # Linear: x @ W.T, dout @ W (dynamic scheduler), dout.T @ x
            for op, thunk in (("linear_fwd", gemm(d, d, "k", "k", False)),
                              ("linear_dgrad", gemm(d, d, "k", "n", True)),
                              ("linear_wgrad", gemm(d, d, "m", "n", True))):
                shape = {"layer": name, "M": TOKENS, "K": k_in, "N": n_out} if op == "linear_fwd" else \
                    {"layer": name, "M": TOKENS, "K": n_out, "N": k_in} if op == "linear_dgrad" else \
                    {"layer": name, "M": n_out, "K": TOKENS, "N": k_in}
                add(op, _compile_gemm, d, shape, thunk, cfg)
        add("split_k_reduce", _compile_split_k_reduce, d, {"split_k": SPLIT_K, "N": HIDDEN},
            lambda d=d: _compile_split_k_reduce(d, SPLIT_K, False, math.gcd(HIDDEN, 4), 0, 0, None, None, None),
            {"mode": "SEPARATE", "epilogue": None})
    for n_out, op in ((HIDDEN, "rmsnorm_fwd"), (HIDDEN, "rmsnorm_bwd")):  # an fp32 model's norms
        cfg, thunk = norm(Float32, n_out, out=op.rsplit("_", 1)[1])
        add(op, _compile_rmsnorm_fwd if op.endswith("fwd") else _compile_rmsnorm_bwd, Float32,
            {"N": n_out, "rows": TOKENS}, thunk, cfg)
    add("cross_entropy_fwd", CrossEntropy.compile, Float32, {"vocab": VOCABS[1]},  # logits upcast for the loss
        lambda: CrossEntropy.compile(Float32, Int64, None, VOCABS[1], True, False, None, None))
    add("cross_entropy_bwd", CrossEntropyBackward.compile, Float32, {"vocab": VOCABS[1]},
        lambda: CrossEntropyBackward.compile(Float32, Int64, VOCABS[1], None))
    add("linear_fwd", _compile_gemm, Float8E4M3FN, {"layer": "o_proj", "M": TOKENS, "K": HIDDEN, "N": HIDDEN,
                                                     "out": "bf16"}, gemm(Float8E4M3FN, BFloat16, "k", "k", False),
        {k: v for k, v in plain(gemm_config).items() if k not in ("split_k", "swap_ab", "use_tma_gather")})
    tiles = -(-HIDDEN // gemm_config.tile_n)  # gemm_rms: per-tile squared-sum partials, one per tile of N
    add("rms_final_reduce", _compile_rms_final_reduce, Float32, {"N": tiles, "hidden": HIDDEN},
        lambda: _compile_rms_final_reduce(Float32, tiles), {"tile_n": gemm_config.tile_n})
    return calls


def main() -> int:
    start = time.perf_counter()
    calls = ops()
    print("atlas-driver-setup:", json.dumps({"arch": ARCH, "quack_arch": os.environ["QUACK_ARCH"],
                                              "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    for op, function, dtype, shape, config, fn, thunk in calls:
        start = time.perf_counter()
        before, files = fn.cache_info().misses, ptx_count()
        said = {"op": op, "function": function, "dtype": dtype, "shape": shape, "config": config}
        try:
            thunk()
            said |= {"ran": True, "compiled": fn.cache_info().misses > before}
        except Exception as exc:  # noqa: BLE001 - counted per op, the driver goes on
            said |= {"ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        said["ptx_files"] = ptx_count() - files
        print("atlas-driver:", json.dumps({**said, "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
