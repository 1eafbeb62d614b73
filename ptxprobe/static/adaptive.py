"""Adaptive repeats: assemble more only where the verdict is not yet as sure as asked.

Every name of a group starts with ``repeat`` assemblies. When a group is complete, each
renamed name whose outputs are disjoint from the baseline's (a difference) but whose
confidence is below ``confidence`` gets one more assembly, and so does the baseline,
until the confidence is reached or ``max_repeat`` runs are made. Names that coincide with
the baseline (identical, within noise) need no more: more runs cannot turn an overlap into
a difference. So deterministic ptxas releases stop early, and noisy ones get the runs the
claim needs; every row says how many runs its verdict rests on (``n_runs``).
"""

from __future__ import annotations

from collections import Counter

from ptxprobe.static.verdicts import static_verdict


def more_runs(base: Counter, variants: dict[str, Counter], runs: dict[str, int], baseline: str,
              confidence: float, max_repeat: int) -> set[str]:
    """Templates (baseline included) that need one more assembly; empty when the group is settled."""
    need: set[str] = set()
    for template, outputs in variants.items():
        verdict, conf = static_verdict(base, outputs)
        if verdict in ("differs", "differs_unrepeated") and (conf or 0.0) < confidence:
            if runs.get(template, 0) < max_repeat:
                need.add(template)
            if runs.get(baseline, 0) < max_repeat:
                need.add(baseline)
    return need


def runs_for(confidence: float, max_repeat: int) -> int:
    """Runs per side a deterministic difference needs to reach ``confidence`` (1 - (1/(n+1))**n)."""
    for n in range(1, max_repeat + 1):
        if 1.0 - (1.0 / (n + 1)) ** n >= confidence:
            return n
    return max_repeat
