"""The static verdict's confidence rests on the *variant's* run count: 1 - u**n, u the baseline's unseen share
(Good-Turing, add-one), n how many times the variant was assembled. With unequal counts per side the two
readings differ, and the adaptive repeats decide on it."""

from __future__ import annotations

from collections import Counter

import pytest

from ptxprobe.static.adaptive import more_runs
from ptxprobe.static.verdicts import static_verdict

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("base", "variant"), [(Counter(a=5), Counter(c=2)), (Counter(a=2), Counter(c=6)),
                                               (Counter(a=3, b=1), Counter(c=2))])
def test_the_confidence_counts_the_variants_runs(base, variant):
    singletons = sum(1 for c in base.values() if c == 1)
    unseen = (singletons + 1) / (sum(base.values()) + 1)
    verdict, confidence = static_verdict(base, variant)
    assert verdict == "differs"
    assert confidence == pytest.approx(1.0 - unseen ** sum(variant.values()), abs=1e-12)


def test_a_variant_with_few_runs_beside_a_long_baseline_is_assembled_again():
    """Five baseline runs and two variant runs give 1 - (1/6)**2 = 0.972 < 0.98: the variant needs a third run
    (the baseline's count would claim 0.9999 and stop)."""
    runs = {"{base}": 5, "t": 2}
    assert "t" in more_runs(Counter(a=5), {"t": Counter(c=2)}, runs, "{base}", 0.98, 8)
    assert more_runs(Counter(a=5), {"t": Counter(c=3)}, {"{base}": 5, "t": 3}, "{base}", 0.98, 8) == set()
