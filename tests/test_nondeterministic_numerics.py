"""A kernel that differs from itself (float atomics, split-K): its baseline runs several times per draw, and other
names are judged against that spread, never failed for it; a deterministic kernel keeps the bitwise gate."""

from __future__ import annotations

import pytest

from ptxprobe.gpu.numerics import BASELINE_REPEATS, merged_numerics, numerics, own_spread, within_own_spread

pytestmark = pytest.mark.unit


def _sum_in_order(x, perm):
    """A float32 sum in another order of its terms: what float atomics give run to run."""
    return x[perm].sum().reshape(1)


def test_a_name_within_the_baselines_own_spread_passes_and_one_beyond_it_does_not():
    import torch

    g = torch.Generator().manual_seed(5)
    x = torch.randn(4096, generator=g, dtype=torch.float32) * 1e3
    orders = [torch.randperm(x.numel(), generator=g) for _ in range(BASELINE_REPEATS + 2)]
    first, *again = (_sum_in_order(x, p) for p in orders[:BASELINE_REPEATS])
    spread = own_spread([merged_numerics({"y": numerics(y, first, None)}) for y in again])
    assert BASELINE_REPEATS >= 3 and spread["baseline_repeats"] == BASELINE_REPEATS
    assert not spread["baseline_deterministic"] and spread["baseline_self_max_ulp"] > 0
    inside = merged_numerics({"y": numerics(_sum_in_order(x, orders[1]), first, None)})  # as a re-run landed
    outside = merged_numerics({"y": numerics(_sum_in_order(x, orders[-1]), first, None)})  # an order never seen
    assert not inside["bitwise_equal_to_baseline"] and within_own_spread(inside, spread)
    assert outside["max_ulp_vs_baseline"] > spread["baseline_self_max_ulp"] and not within_own_spread(outside, spread)
    wrong = merged_numerics({"y": numerics(first * (1 + 1e-3), first, None)})  # an error far beyond the spread
    assert not wrong["bitwise_equal_to_baseline"] and not within_own_spread(wrong, spread)
    steady = own_spread([merged_numerics({"y": numerics(first.clone(), first, None)})] * (BASELINE_REPEATS - 1))
    assert steady["baseline_deterministic"] and steady["baseline_self_max_ulp"] == 0
    assert within_own_spread(merged_numerics({"y": numerics(first.clone(), first, None)}), steady)
    assert not within_own_spread(inside, steady)  # a deterministic baseline: bitwise only


def test_tunes_gate_prunes_a_nondeterministic_kernels_candidates_only_beyond_its_own_spread():
    """The audit's case: float atomics make every candidate differ bitwise from yours, and the bitwise gate pruned
    them all as numerics failures. Within your configuration's own spread a candidate passes; beyond it, or where
    yours is deterministic, it is pruned and the reason says how far, and how far yours differs from itself."""
    from ptxprobe.tune.answer import passes_numerics

    base = {"nan_count": 0, "inf_count": 0, "fully_written": True}
    spread = {"baseline_deterministic": False, "baseline_self_max_ulp": 9, "baseline_self_n_diff": 1}
    near = {**base, **spread, "bitwise_equal_to_baseline": False, "n_diff_vs_baseline": 1, "max_ulp_vs_baseline": 4}
    near["within_baseline_spread"] = within_own_spread(near, spread)
    far = {**near, "max_ulp_vs_baseline": 22}
    far["within_baseline_spread"] = within_own_spread(far, spread)
    assert passes_numerics(near, base, "bitwise", None) == (True, "")
    ok, why = passes_numerics(far, base, "bitwise", None)
    assert not ok and "max ULP 22" in why and "yours differs from itself by up to 9 ULP" in why
    steady = {**near, "baseline_deterministic": True, "baseline_self_max_ulp": 0}
    steady["within_baseline_spread"] = within_own_spread(steady, steady)
    ok, why = passes_numerics(steady, base, "bitwise", None)
    assert not ok and "differs from itself" not in why
    assert passes_numerics({**base, "bitwise_equal_to_baseline": True}, base, "bitwise", None) == (True, "")
