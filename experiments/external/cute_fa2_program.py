"""CUTLASS's CuTe DSL FlashAttention-2 example run as its author runs it, as a program for ``ptxprobe tune -- ...``.

    python experiments/external/fetch.py --only cute_ampere_flash_attention    (once, with the network)
    ptxprobe tune -o runs/fa2 --ptxas '' --metric 'us=(\\S+)' -- python experiments/external/cute_fa2_program.py

The example (fetched into external/, never committed; ``sources.toml`` names its commit and sha256) is imported
unmodified and its own ``run()`` called: it JIT-compiles the kernel for the GPU it finds (``cute.compile`` on torch
tensors with dynamic layouts), checks the output against PyTorch's attention (``assert_close``: a configuration
that breaks it fails the program, which is tune's gate), and times it with the DSL's own benchmark (CUDA events).
Its average time in microseconds is printed as ``us=...``: the measure tune and apply read. fp16, batch 4, 32
heads, sequence 4096, head dim 128, 128x128 tiles, 128 threads: the shape of the ``ampere_fa2_fp16_full`` case
timed ahead of time in ``2026-12-03-h200-cute-dsl-aot``.

``--static-layout``: the example's kernel class compiled on the torch tensors as they are (``from_dlpack`` without
``mark_layout_dynamic``: shapes and strides become constants, as the fake tensors of the ahead-of-time case), checked
against PyTorch's attention the same way and timed with CUDA events (100 launches after 10). Another PTX than
``run()``'s: the name's effect is measured for each.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--external", default=str(ROOT / "external"), help="where fetch.py put the example")
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--static-layout", action="store_true", help="shapes and strides compiled in (see above)")
    ap.add_argument("--settle-s", type=float, default=0.0,
                    help="--static-layout: launch untimed this long first, so the timed launches run at the clock "
                         "the card holds under sustained load (the power limit), not the clock of a burst")
    args = ap.parse_args(argv)
    path = Path(args.external) / "cute_ampere_flash_attention.py"
    if not path.is_file():
        sys.exit(f"{path} is missing: run `python experiments/external/fetch.py --only cute_ampere_flash_attention` "
                 "first")
    import cutlass

    spec = importlib.util.spec_from_file_location("cute_ampere_flash_attention", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    if args.static_layout:
        us = static_layout(example, args.seq_len, args.causal, args.iterations, args.settle_s)
    else:
        us = example.run(cutlass.Float16, 4, args.seq_len, args.seq_len, 32, 128, softmax_scale=128 ** -0.5,
                         m_block_size=128, n_block_size=128, num_threads=128, is_causal=args.causal,
                         warmup_iterations=10, iterations=args.iterations)
    print(f"us={us:.3f}")
    return 0


def static_layout(example, n: int, causal: bool, iterations: int, settle_s: float = 0.0) -> float:
    """The example's kernel compiled with shapes and strides as constants; checked, then timed (microseconds)."""
    import cuda.bindings.driver as cuda
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import from_dlpack

    scale = 128 ** -0.5
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randint(-2, 2, (4, n, 32, 128), generator=gen, device="cuda").half() for _ in range(3))
    o = torch.empty_like(q)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    args = (*(from_dlpack(t, assumed_align=16) for t in (q, k, v, o)), scale, stream)
    fa2 = example.FlashAttentionForwardAmpere(128, 128, 128, 128, causal)
    compiled = cute.compile(fa2, *args)
    compiled(*args)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.permute(0, 2, 1, 3) for t in (q, k, v)), scale=scale,
                                                           is_causal=causal).permute(0, 2, 1, 3)
    torch.testing.assert_close(o, ref, atol=1e-2, rtol=1e-4)  # the example's own tolerance
    for _ in range(10):
        compiled(*args)
    torch.cuda.synchronize()
    settle_until = time.perf_counter() + settle_s
    while time.perf_counter() < settle_until:  # ~10 launches queued per check: the GPU never idles meanwhile
        for _ in range(10):
            compiled(*args)
        torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        compiled(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iterations


if __name__ == "__main__":
    sys.exit(main())
