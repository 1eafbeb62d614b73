"""FlashAttention-4 (``flash-attn-4``, ``flash_attn.cute``) forward and backward as its own interface builds them for
real models' attention shapes, with no GPU: run by ``ptxprobe capture --arch ARCH``, which pins the CuTe DSL's
target (``CUTE_DSL_ARCH``) and keeps the PTX each compile makes.

FA4 compiles on first call: its interface picks the kernel class and config from the arch (``FLASH_ATTENTION_ARCH``,
set here to the target: its documented override for compiling without a GPU) and the SM count
(``FLASH_ATTENTION_NUM_SMS``: 132, an H100/H200 SXM, at sm_90a; 148, a B200, at sm_100a), builds the kernel object
and hands it to ``cute.compile``. Under torch's ``FakeTensorMode`` (tensors with a shape, a dtype and a ``cuda``
device, and no memory) FA4 knows it is faking (``flash_attn.cute.testing.is_fake_mode``): it compiles and launches
nothing. Its persistent cache is off (``FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=0``, its default): a kernel loaded
from it would leave no PTX.

Each shape is called three ways, as a model's attention calls FA4:
  ``fwd``: inference, ``flash_attn_func(q, k, v, causal=...)`` (no gradient, no LSE);
  ``fwd_train``: ``_flash_attn_fwd`` with q, k, v requiring grad, as ``FlashAttnFunc.forward`` calls it (FA4 then
  writes the LSE and may pick another config);
  ``bwd``: ``_flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale, causal)``, as ``FlashAttnFunc.backward`` calls it
  (FA4's preprocess, the backward kernel and its dQ (and, for GQA, dK/dV) postprocess).
The training pair is called directly, not through autograd: ``flash_attn_func`` on fake ``cuda`` tensors that
require grad aborts the interpreter when autograd records the call (torch here is CPU-only: "terminate called after
throwing an instance of 'c10::Error' what(): PyTorch is not linked with support for cuda devices", raised from
``torch::autograd::impl::gradient_edge``), so ``loss.backward()`` cannot be captured without a GPU; the two
functions autograd would call are.

The shapes (heads of queries / of keys and values, head dim): Llama-3.2-1B (32/8, 64), Phi-3-mini (32/32, 96),
Llama-3-8B (32/8, 128; FA4 packs the GQA itself where it chooses), DeepSeek-V3's MLA prefill (128/128, 192 for q and
k, 128 for v), Gemma-2-9B (16/8, 256); sequence 8192 (4096 for head dim 256), batch 2, bf16 and fp16, causal and not.

One line per call (``atlas-driver: {json}``): the op, FA4's function, dtype, shape, the kernel classes FA4 compiled
and the config it picked for each, whether it ran, the PTX files it left; a call FA4 refuses for the arch (its own
check of head dims, dtypes or arch) is said with ``refused`` and its words, and the driver goes on.
"""

from __future__ import annotations

import json
import os
import sys
import time

from dsl_lines import plain, ptx_count

ARCH = os.environ.get("CUTE_DSL_ARCH")
if not ARCH:
    sys.exit("drive_fa4.py: CUTE_DSL_ARCH is not set; run it under ptxprobe capture --arch sm_90a")
os.environ.setdefault("FLASH_ATTENTION_ARCH", ARCH)
os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", {"sm_90a": "132", "sm_100a": "148"}.get(ARCH, "132"))
os.environ["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] = "0"

BATCH = 2
# (model, query heads, key/value heads, head dim of q and k, head dim of v, sequence length)
SHAPES = (("Llama-3.2-1B", 32, 8, 64, 64, 8192), ("Phi-3-mini", 32, 32, 96, 96, 8192),
          ("Llama-3-8B", 32, 8, 128, 128, 8192), ("DeepSeek-V3 MLA prefill", 128, 128, 192, 128, 8192),
          ("Gemma-2-9B", 16, 8, 256, 256, 4096))
# a kernel object's fields that say the config FA4 picked (those it has)
CONFIG = ("tile_m", "tile_n", "m_block_size", "n_block_size", "num_stages", "q_stage", "num_threads",
          "intra_wg_overlap", "mma_pv_is_rs", "num_mma_regs", "num_producer_regs", "pack_gqa", "use_2cta_instrs",
          "cluster_shape_mn", "is_persistent", "Q_in_regs", "V_in_regs", "SdP_swapAB", "dKV_swapAB", "dQ_swapAB",
          "is_causal", "is_local", "qhead_per_kvhead")


def main() -> int:
    start = time.perf_counter()
    import flash_attn.cute.interface as fa4
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    compiled: list[dict] = []
    real = fa4.cute.compile

    def spy(kernel, *args, **kwargs):  # FA4's interface calls cute.compile through its own module attribute
        compiled.append({"class": type(kernel).__name__,
                         "config": {k: plain(getattr(kernel, k)) for k in CONFIG if hasattr(kernel, k)}})
        return real(kernel, *args, **kwargs)

    fa4.cute.compile = spy
    # FA4's static persistent scheduler (the Sm100 forward without a causal mask) sizes its grid in host code from the
    # SM count it asks the CUDA driver for (cutlass.utils.HardwareInfo), which fails here ('DynamicLibNotFoundError:
    # "cuda" is an NVIDIA driver library and can only be found via system search'): answered with
    # FLASH_ATTENTION_NUM_SMS, the count FA4's config selection reads. The count is a launch bound, not the kernel's.
    from cutlass.utils import hardware_info

    def _no_driver(self, device_id: int = 0):
        self.device_id = device_id

    hardware_info.HardwareInfo.__init__ = _no_driver
    hardware_info.HardwareInfo.get_device_multiprocessor_count = lambda self: int(os.environ["FLASH_ATTENTION_NUM_SMS"])
    from importlib.metadata import version
    print("atlas-driver-setup:", json.dumps({"arch": ARCH, "flash_attention_arch": os.environ["FLASH_ATTENTION_ARCH"],
                                              "flash_attention_num_sms": int(os.environ["FLASH_ATTENTION_NUM_SMS"]),
                                              "flash_attn_4": version("flash-attn-4"),
                                              "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    fwd, fwd_t, bwd = fa4.flash_attn_func, fa4._flash_attn_fwd, fa4._flash_attn_bwd
    names = {f: f"{f.__module__}.{f.__qualname__}" for f in (fwd, fwd_t, bwd)}
    with FakeTensorMode(), torch.no_grad():
        for dname, dtype in dtypes.items():
            for model, h, hkv, d, dv, s in SHAPES:
                for causal in (False, True):
                    shape = {"model": model, "batch": BATCH, "seqlen": s, "heads": h, "kv_heads": hkv,
                             "head_dim": d, "head_dim_v": dv, "causal": causal}
                    q = torch.empty(BATCH, s, h, d, dtype=dtype, device="cuda")
                    k = torch.empty(BATCH, s, hkv, d, dtype=dtype, device="cuda")
                    v = torch.empty(BATCH, s, hkv, dv, dtype=dtype, device="cuda")
                    saved = {}

                    def train_fwd(q=q, k=k, v=v, causal=causal, saved=saved):
                        qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
                        out, lse, *_ = fwd_t(qg, kg, vg, causal=causal)
                        saved.update(out=out, lse=lse)

                    calls = (("fwd", fwd, lambda q=q, k=k, v=v, causal=causal: fwd(q, k, v, causal=causal)),
                             ("fwd_train", fwd_t, train_fwd),
                             ("bwd", bwd, lambda q=q, k=k, v=v, causal=causal, saved=saved: bwd(
                                 q, k, v, saved["out"], torch.empty_like(saved["out"]), saved["lse"], None, causal)))
                    for op, fn, thunk in calls:
                        t0, files, n = time.perf_counter(), ptx_count(), len(compiled)
                        said = {"op": op, "function": names[fn], "dtype": dname, "shape": shape}
                        if op == "bwd" and "lse" not in saved:
                            said |= {"ran": False, "error": "no training forward to differentiate"}
                        else:
                            try:
                                thunk()
                                said["ran"] = True
                            except Exception as exc:  # noqa: BLE001 - said per call, the driver goes on
                                # FA4's own checks (head dims, dtypes, arch) refuse before it builds a kernel
                                refused = len(compiled) == n and isinstance(
                                    exc, (AssertionError, NotImplementedError, ValueError))
                                said |= {"ran": False, "refused" if refused else "error":
                                         f"{type(exc).__name__}: {exc}"[:300]}
                        said |= {"compiled": compiled[n:], "ptx_files": ptx_count() - files,
                                 "seconds": round(time.perf_counter() - t0, 2)}
                        print("atlas-driver:", json.dumps(said), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
