"""Parse + diff speed on large listings (target: two 5,000-instruction kernels in < 2 s on one core).

    python experiments/benchmarks/bench_diff.py

Builds the largest kernel of the default experiment (persistent causal fp16 attention for
sm_100a) under two names, disassembles once (nvdisasm time is reported apart), then times
parsing the two listings and diffing them. Listings are doubled to >= 5,000 instructions
when the kernel is smaller.
"""

from __future__ import annotations

import json
import time

from ptxprobe.api import (
    Cache,
    Listing,
    RegisteredSource,
    assemble,
    diff_listings,
    find_tool,
    parse_nvdisasm,
    rename_entry,
    run_tool,
    triton_ptxas,
)


def listing_text(cubin_path: str) -> str:
    tool = find_tool("nvdisasm")
    return run_tool([tool.path, "-hex", "-c", cubin_path]).stdout


def main() -> None:
    e = RegisteredSource("attention_persistent", "fp16", 128, True, "default").emit("sm_100a", Cache())
    tool = triton_ptxas("sm_100a")
    a = assemble(e.ptx, "sm_100a", tool)
    b = assemble(rename_entry(e.ptx, e.entry, "cutlass_" + e.entry).ptx, "sm_100a", tool)
    t = time.perf_counter()
    ta, tb = listing_text(a.cubin_path), listing_text(b.cubin_path)
    t_nvdisasm = time.perf_counter() - t
    t = time.perf_counter()
    la = next(iter(parse_nvdisasm(ta).values()))
    lb = next(iter(parse_nvdisasm(tb).values()))
    t_parse = time.perf_counter() - t
    n0 = len(la.instructions)
    while len(la.instructions) < 5000:  # grow to the benchmark's size, keeping offsets consistent
        k = len(la.instructions)
        la = Listing(
            la.kernel,
            la.instructions
            + tuple(i.__class__(i.offset + 16 * k, *list(i.__dict__.values())[1:]) for i in la.instructions[:n0]),
            la.labels,
        )
        lb = Listing(
            lb.kernel,
            lb.instructions
            + tuple(i.__class__(i.offset + 16 * k, *list(i.__dict__.values())[1:]) for i in lb.instructions[:n0]),
            lb.labels,
        )
    t = time.perf_counter()
    d = diff_listings(la, lb)
    t_diff = time.perf_counter() - t
    print(
        json.dumps(
            {
                "kernel_instructions": n0,
                "benchmark_instructions": [len(la.instructions), len(lb.instructions)],
                "nvdisasm_s_two_cubins": round(t_nvdisasm, 3),
                "parse_s_two_listings": round(t_parse, 3),
                "parse_s_scaled_to_benchmark": round(t_parse * len(la.instructions) / n0, 3),
                "diff_s": round(t_diff, 3),
                "verdict": d.verdict,
                "counts": d.counts,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
