"""What a name does to the numbers: bitwise and ULP distance to the baseline name, error vs float64.

Pure tensor functions: they run on any device and are tested on the CPU.
"""

from __future__ import annotations

import json

_INT_OF_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def ordered_bits(x):
    """Integers whose differences count ULPs: float bits (sign-magnitude) to two's complement.

    Integer tensors are their own values.
    """
    import torch  # works on any device: tested on the CPU

    if not x.dtype.is_floating_point:
        return x.to(torch.int64)
    width = x.element_size()
    b = x.contiguous().view(getattr(torch, _INT_OF_WIDTH[width])).to(torch.int64)
    magnitude = (1 << (8 * width - 1)) - 1
    return torch.where(b < 0, -(b & magnitude), b)


def numerics(out, baseline_out, ref) -> dict:
    """Bitwise and ULP comparison with the baseline name's output; relative error vs float64 (if any)."""
    import torch  # works on any device: tested on the CPU

    floating = out.dtype.is_floating_point
    nan = int(torch.isnan(out).sum()) if floating else 0
    inf = int(torch.isinf(out).sum()) if floating else 0
    as_int = getattr(torch, _INT_OF_WIDTH[out.element_size()])
    diff = out.contiguous().view(as_int) != baseline_out.contiguous().view(as_int)
    ulp = (ordered_bits(out) - ordered_bits(baseline_out)).abs().max()
    rel = None
    if ref is not None:
        o64, r64 = out.to(torch.float64), ref.to(device=out.device, dtype=torch.float64)
        rel = float(torch.linalg.vector_norm(o64 - r64) / torch.linalg.vector_norm(r64))
    return {
        "nan_count": nan,
        "inf_count": inf,
        "fully_written": nan == 0,
        "bitwise_equal_to_baseline": bool(not diff.any()),
        "n_diff_vs_baseline": int(diff.sum()),
        "max_ulp_vs_baseline": int(ulp),
        "rel_err_vs_reference": rel,
    }


def merged_numerics(per_output: dict[str, dict]) -> dict:
    """One record for several outputs: counts add up, worst error wins; each output kept as JSON."""
    recs = list(per_output.values())
    rels = [r["rel_err_vs_reference"] for r in recs if r["rel_err_vs_reference"] is not None]
    return {
        "nan_count": sum(r["nan_count"] for r in recs),
        "inf_count": sum(r["inf_count"] for r in recs),
        "fully_written": all(r["fully_written"] for r in recs),
        "bitwise_equal_to_baseline": all(r["bitwise_equal_to_baseline"] for r in recs),
        "n_diff_vs_baseline": sum(r["n_diff_vs_baseline"] for r in recs),
        "max_ulp_vs_baseline": max(r["max_ulp_vs_baseline"] for r in recs),
        "rel_err_vs_reference": max(rels) if rels else None,
        "numerics_by_output": json.dumps(per_output, sort_keys=True),
    }


BASELINE_REPEATS = 3  # the baseline name runs this many times on each draw's inputs: its own spread


def own_spread(self_recs: list[dict]) -> dict:
    """The baseline name against itself, re-run on the same inputs (``numerics`` of each repeat against its first
    run): whether it is deterministic, and its widest ULP distance and count of differing elements. A kernel
    with float atomics or a split-K reduction differs from itself, so a name cannot be held to bitwise equality
    with it."""
    return {"baseline_deterministic": all(r["bitwise_equal_to_baseline"] for r in self_recs),
            "baseline_self_max_ulp": max((r["max_ulp_vs_baseline"] for r in self_recs), default=0),
            "baseline_self_n_diff": max((r["n_diff_vs_baseline"] for r in self_recs), default=0),
            "baseline_repeats": len(self_recs) + 1 if self_recs else 1}


def within_own_spread(rec: dict, spread: dict) -> bool:
    """A name's outputs count as the baseline's: bitwise equal to them, or, where the baseline is not bitwise equal
    to itself, no further from it in ULPs than its own re-runs were."""
    if rec["bitwise_equal_to_baseline"]:
        return True
    return not spread["baseline_deterministic"] and rec["max_ulp_vs_baseline"] <= spread["baseline_self_max_ulp"]
