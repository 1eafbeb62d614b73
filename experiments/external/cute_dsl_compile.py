"""Compile CUTLASS's CuTe DSL examples (fetched into external/, see sources.toml) without a GPU.

    ptxprobe capture --arch sm_90a -o runs/cute-sm90 -- python experiments/external/cute_dsl_compile.py hopper
    ptxprobe capture --arch sm_100a -o runs/cute-sm100 -- python experiments/external/cute_dsl_compile.py blackwell
    ptxprobe capture --arch sm_90a -o runs/fa4-sm90 --set ptxas=12.9.86,13.0.88,13.5.37 \
        -- python experiments/external/cute_dsl_compile.py fa4        (pip install flash-attn-4 first)

Each example module is imported unmodified and its kernel class compiled with ``cute.compile`` on fake
tensors (``cute.runtime.make_fake_compact_tensor``) and a fake stream: the CuTe DSL then needs no GPU when
the target is pinned (``CUTE_DSL_ARCH``, set by ``capture --arch``). ``capture`` keeps the PTX the DSL
writes (``CUTE_DSL_KEEP=ptx``). With ``--export DIR`` each compiled function is also exported for AOT use
(``export_to_c``: a header and an object file per case), what ``experiments/external/cute_aot.py`` runs
on a GPU machine.

Cases (problem sizes are static, the layouts the examples' own ``run()`` builds):
  hopper:    dense GEMM fp16 and fp8 e4m3 (4096^3, tile 128x256); FMHA fp16 D128, causal and not
             (batch 4, 32 heads, N 4096; not persistent: the persistent grid asks the driver for the SM
             count while compiling); Ampere FA2 fp16 D128 built for the Hopper target
  blackwell: persistent dense GEMM fp16 and fp8 e4m3 (4096^3, 2-CTA 256x256)
  fa4:       FlashAttention-4's Hopper forward (``flash-attn-4`` from PyPI, imported from site-packages, never
             copied here; 4.0.0b40 checked), fp16 and bf16, D128, causal and not (batch 4, 32 heads, N 4096):
             see fa4_hopper_fwd. Needs FLASH_ATTENTION_ARCH=sm_90a and FLASH_ATTENTION_NUM_SMS=132 (set here
             when unset) besides CUTE_DSL_ARCH.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(name: str, ext: Path):
    sys.path.insert(0, str(ext))  # the FMHA imports helpers.fmha_helpers from beside it
    spec = importlib.util.spec_from_file_location(name, ext / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake(dtype, shape, order):
    from cutlass.cute.runtime import make_fake_compact_tensor

    return make_fake_compact_tensor(dtype, shape, stride_order=order, assumed_align=16)


def hopper_gemm(ext: Path, dtype_name: str):
    import cutlass

    mod = load("cute_hopper_gemm", ext)
    ab = {"fp16": cutlass.Float16, "fp8e4m3": cutlass.Float8E4M3FN}[dtype_name]
    m = n = k = 4096
    a = _fake(ab, (m, k, 1), (1, 0, 2))  # k-major A, k-major B, n-major C: what fp8 requires
    b = _fake(ab, (n, k, 1), (1, 0, 2))
    c = _fake(cutlass.Float16, (m, n, 1), (1, 0, 2))
    gemm = mod.HopperWgmmaGemmKernel(cutlass.Float32, (128, 256), (1, 1))
    return gemm, (a, b, c), {"m": m, "n": n, "k": k, "dtype": dtype_name}


def hopper_fmha(ext: Path, causal: bool):
    import math

    import cutlass

    mod = load("cute_hopper_fmha", ext)
    fmha_utils = sys.modules["helpers.fmha_helpers"]
    b, s, h, d = 4, 4096, 32, 128
    f16 = cutlass.Float16
    # (s, d, h_r, h_k, b) with d innermost, then h_r, h_k, s, b: the permuted (b, s, h_k, h_r, d) of run()
    order = (3, 0, 1, 2, 4)
    # multi-head (no grouping): h_k = h key/value heads, h_r = 1 query head per key/value head
    q = _fake(f16, (s, d, 1, h, b), order)
    k = _fake(f16, (s, d, 1, h, b), order)
    v = _fake(f16, (s, d, 1, h, b), order)
    o = _fake(f16, (s, d, 1, h, b), order)
    lse = _fake(cutlass.Float32, (s, 1, 1, h, b), order)
    # not persistent: the persistent grid asks the driver for the SM count while compiling
    fmha = mod.HopperFusedMultiHeadAttentionForward(cutlass.Float32, cutlass.Float32, (64, 128, d), False,
                                                    fmha_utils.MaskEnum.WINDOW_MASK)
    scale = 1.0 / math.sqrt(d)
    args = (q, k, v, o, lse, scale * 1.4426950408889634, scale, 1.0, None, 0 if causal else None)
    if causal:
        args = (*args[:9], cutlass.Int32(0))
    return fmha, args, {"b": b, "s": s, "h": h, "d": d, "causal": causal}


def ampere_fa2(ext: Path, causal: bool):
    import cutlass

    mod = load("cute_ampere_flash_attention", ext)
    b, s, h, d = 4, 4096, 32, 128
    t = [_fake(cutlass.Float16, (b, s, h, d), (3, 2, 1, 0)) for _ in range(4)]
    fa = mod.FlashAttentionForwardAmpere(d, 128, 128, 128, causal)
    return fa, (*t, d**-0.5), {"b": b, "s": s, "h": h, "d": d, "causal": causal}


def blackwell_gemm(ext: Path, dtype_name: str):
    import cutlass

    mod = load("cute_blackwell_gemm", ext)
    ab = {"fp16": cutlass.Float16, "fp8e4m3": cutlass.Float8E4M3FN}[dtype_name]
    m = n = k = 4096
    a = _fake(ab, (m, k, 1), (1, 0, 2))
    b = _fake(ab, (n, k, 1), (1, 0, 2))
    c = _fake(cutlass.Float16, (m, n, 1), (1, 0, 2))
    compiled = mod.compile_bmm((m, n, k, 1), a, b, c, cutlass.Float32, "k", "k", "n", max_active_clusters=74)
    return compiled, None, {"m": m, "n": n, "k": k, "dtype": dtype_name}


def fa4_hopper_fwd(ext: Path, param: tuple[str, bool]):
    """FA4's ``FlashAttentionForwardSm90`` built by FA4's own interface, compiled on fake tensors.

    ``flash_attn_func`` runs under torch's FakeTensorMode (no GPU, no memory) with ``cute.compile`` intercepted
    in FA4's interface: FA4 picks its config (tile, intra-WG overlap, RS PV MMA, registers) for the H200's 132
    SMs, constructs the kernel object and hands ``cute.compile`` its arguments, which are kept and the call
    stopped. The kernel is then compiled through a ``cute.jit`` wrapper taking (q, k, v, out, softmax_scale,
    stream): ``export_to_c`` cannot write FA4's ``AuxData`` argument, and FA4's own AOT path needs TVM FFI.
    The wrapper passes FA4's other captured arguments (all None for dense attention, no LSE: FA4's inference
    call) unchanged. q, k, v, out are fake (b, s, h, d) tensors with dynamic shapes and strides and a static
    unit stride on d, FA4's ``mark_layout_dynamic(leading_dim=3)`` layout. Checked for fp16 D128 non-causal
    with FA4 4.0.0b40: the PTX is identical to the one FA4's own ``cute.compile`` (with ``--enable-tvm-ffi``)
    writes, entry name included.
    """
    import os
    from importlib.metadata import version

    os.environ.setdefault("FLASH_ATTENTION_ARCH", "sm_90a")  # FA4 picks its kernel class from this, not the DSL's
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", "132")  # H200 (and H100 SXM): FA4's config selection reads it
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import flash_attn.cute.interface as fa4
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    dtype_name, causal = param
    b, s, h, d = 4, 4096, 32, 128
    tdt, cdt = {"fp16": (torch.float16, cutlass.Float16), "bf16": (torch.bfloat16, cutlass.BFloat16)}[dtype_name]

    class _Captured(Exception):
        pass

    seen = {}

    def spy(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        raise _Captured

    real = fa4.cute.compile
    fa4.cute.compile = spy  # FA4's interface calls cute.compile through its own module attribute
    try:
        with FakeTensorMode():
            q, k, v = (torch.empty(b, s, h, d, dtype=tdt, device="cuda") for _ in range(3))
            try:
                fa4.flash_attn_func(q, k, v, causal=causal)
            except _Captured:
                pass
    finally:
        fa4.cute.compile = real
    if "args" not in seen:
        raise RuntimeError("FA4 compiled nothing (a cached kernel?)")
    kernel, *args, _stream = seen["args"]
    if type(kernel).__name__ != "FlashAttentionForwardSm90":
        raise RuntimeError(f"FA4 picked {type(kernel).__name__}, not FlashAttentionForwardSm90")
    if args[4] is not None:
        raise RuntimeError("FA4 asked for an LSE output; this case passes none")
    scale = args[5]  # FA4's softmax scale, 1/sqrt(d), a Python float: a run-time Float32 in the wrapper
    rest = tuple(args[6:])  # cu_seqlens ... tensormap_workspace: None and an empty AuxData for dense attention

    def fa4_fwd(mQ, mK, mV, mO, softmax_scale, stream):
        kernel(mQ, mK, mV, mO, None, softmax_scale, *rest, stream)

    # real objects, not this module's postponed (string) annotations, which the DSL would resolve in its globals
    fa4_fwd.__annotations__ = {"mQ": cute.Tensor, "mK": cute.Tensor, "mV": cute.Tensor, "mO": cute.Tensor,
                               "softmax_scale": cutlass.Float32, "stream": cuda.CUstream}
    # the DSL names its kept PTX after the host function and its arguments, cut short: one name per case
    fa4_fwd.__name__ = fa4_fwd.__qualname__ = f"fa4_fwd_{dtype_name}_{'causal' if causal else 'full'}"
    fa4_fwd = cute.jit(fa4_fwd)

    def fake():
        return cute.runtime.make_fake_tensor(cdt, tuple(cute.sym_int() for _ in range(4)),
                                             stride=(*(cute.sym_int64(divisibility=8) for _ in range(3)), 1),
                                             assumed_align=16)

    config = {key: getattr(kernel, key) for key in ("tile_m", "tile_n", "num_stages", "intra_wg_overlap",
                                                    "mma_pv_is_rs", "num_mma_regs", "num_producer_regs",
                                                    "pack_gqa", "cluster_shape_mn")}
    shape = {"b": b, "s": s, "h": h, "d": d, "causal": causal, "dtype": dtype_name, "softmax_scale": scale,
             "layout": "bshd", "lse": False, "flash_attn_4": version("flash-attn-4"),
             "fa4_num_sms": int(os.environ["FLASH_ATTENTION_NUM_SMS"]), "fa4_config": config}
    return fa4_fwd, (fake(), fake(), fake(), fake(), scale), shape


CASES = {
    "hopper": [("hopper_gemm_fp16", hopper_gemm, "fp16"), ("hopper_gemm_fp8e4m3", hopper_gemm, "fp8e4m3"),
               ("hopper_fmha_fp16_full", hopper_fmha, False), ("hopper_fmha_fp16_causal", hopper_fmha, True),
               ("ampere_fa2_fp16_full", ampere_fa2, False)],
    "blackwell": [("blackwell_gemm_fp16", blackwell_gemm, "fp16"),
                  ("blackwell_gemm_fp8e4m3", blackwell_gemm, "fp8e4m3")],
    "fa4": [(f"fa4_hopper_fwd_{dt}_{mask}", fa4_hopper_fwd, (dt, mask == "causal"))
            for dt in ("fp16", "bf16") for mask in ("full", "causal")],
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family", choices=sorted(CASES))
    ap.add_argument("--external", default="external", help="where fetch.py put the sources")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--export", help="also export_to_c every case into this directory")
    a = ap.parse_args(argv)
    import cutlass.cute as cute
    from cutlass.runtime import make_fake_stream

    ext = Path(a.external).resolve()
    if a.export:
        Path(a.export).mkdir(parents=True, exist_ok=True)
    record, failed = {}, 0
    for name, build, param in CASES[a.family]:
        if a.only and name not in a.only:
            continue
        try:
            obj, args, shape = build(ext, param)
            compiled = obj if args is None else cute.compile(obj, *args, make_fake_stream())
            if a.export:
                compiled.export_to_c(a.export, name, function_prefix=name)
            record[name] = {"ok": True, **shape}
            print(f"{name}: compiled", flush=True)
        except Exception as exc:  # one example that does not build is a result; the others still run
            failed += 1
            record[name] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:400]}", flush=True)
    if a.export:
        (Path(a.export) / "cases.json").write_text(json.dumps(record, indent=1))
    return 1 if failed and failed == len(record) else 0


if __name__ == "__main__":
    sys.exit(main())
