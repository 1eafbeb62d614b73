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
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--external", default=str(ROOT / "external"), help="where fetch.py put the example")
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iterations", type=int, default=100)
    args = ap.parse_args(argv)
    path = Path(args.external) / "cute_ampere_flash_attention.py"
    if not path.is_file():
        sys.exit(f"{path} is missing: run `python experiments/external/fetch.py --only cute_ampere_flash_attention` "
                 "first")
    import cutlass

    spec = importlib.util.spec_from_file_location("cute_ampere_flash_attention", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    us = example.run(cutlass.Float16, 4, args.seq_len, args.seq_len, 32, 128, softmax_scale=128 ** -0.5,
                     m_block_size=128, n_block_size=128, num_threads=128, is_causal=args.causal,
                     warmup_iterations=10, iterations=args.iterations)
    print(f"us={us:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
