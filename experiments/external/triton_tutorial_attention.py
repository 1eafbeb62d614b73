"""Drive Triton's fused-attention tutorial (fetched into external/, see sources.toml) as a user would.

    python experiments/external/triton_tutorial_attention.py external/triton_fused_attention.py [--seconds S]

The tutorial module is imported unmodified; ``PYTEST_VERSION`` is set first, the tutorial's own switch
to its single test config (no autotuning). Its forward attention runs at batch 4, 32 heads, N 4096,
D 128 in fp16 (causal and not) and fp8 e5m2 (V transposed, as the tutorial's benchmark passes it),
then a timed loop of about ``--seconds`` per case, CUDA events around the whole loop. Prints one
``case ... ms=`` line per case and ``kernel_ms=`` (their sum), the measure ``capture --run --metric``
reads. Needs a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys


def load(path: str):
    os.environ.setdefault("PYTEST_VERSION", "1")
    spec = importlib.util.spec_from_file_location("triton_fused_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--seq-len", type=int, default=4096)
    a = ap.parse_args(argv)
    import torch

    mod = load(a.source)
    z, h, n, d = 4, 32, a.seq_len, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    total = 0.0
    for dtype, causal in (("fp16", False), ("fp16", True), ("fp8", False)):
        q, k, v = (torch.randn((z, h, n, d), device="cuda", dtype=torch.float16, generator=gen) * 0.5
                   for _ in range(3))
        if dtype == "fp8":
            q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
            v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
        fn = lambda q=q, k=k, v=v, causal=causal: mod.attention(q, k, v, causal, d**-0.5, False)  # noqa: E731
        fn()
        torch.cuda.synchronize()
        a0, a1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a0.record()
        fn()
        a1.record()
        a1.synchronize()
        iters = max(3, int(a.seconds * 1e3 / max(a0.elapsed_time(a1), 1e-3)))
        a0.record()
        for _ in range(iters):
            fn()
        a1.record()
        a1.synchronize()
        ms = a0.elapsed_time(a1) / iters
        total += ms
        print(f"case {dtype} causal={causal} iters={iters} ms={ms:.5f}", flush=True)
    print(f"kernel_ms={total:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
