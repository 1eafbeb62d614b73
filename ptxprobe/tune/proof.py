"""The proof of a race's choice: the chosen configuration against yours on rounds the race never saw.

A race picks the best of several on the same rounds it then judges them with, so the winner's interval and gain
are biased up (the winner's curse): its interval covers the truth less often than it says, and a gain that does not
exist looks like one. The proof removes the bias by design: one comparison, fixed before it is measured (the
race's choice), timed on fresh rounds with the same paired ``measure`` the race used, judged by the same interval
and rule (``stats.decide``: ``faster`` only beyond the margin). It decides the answer: the choice is recommended
only when the proof says ``faster``, and the gain ``tune`` reports is the proof's. One test of one hypothesis needs
no multiplicity adjustment; its looks do: a look at ``first_rounds``, then ``growth`` times more, each at a
Bonferroni-adjusted level (``race.rung_level``), stopping once the verdict is settled (the interval beyond or
inside the margin: more rounds could not move it across) or at the round cap. Unlike the race it does not stop at a
target half-width: a gain just beyond the margin needs the rounds that settle it (a proof stopped at the race's
0.2 % target confirmed a true +0.6 % far less often: experiments/analysis/tune_proof.py). Pure: the GPU, or a
program, comes in through ``measure``; tests and the study plug in simulated timings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptxprobe.stats import paired as stats
from ptxprobe.tune.race import INTERRUPTED, Measure, RacePlan, RaceResult, Standing, rung_level

PROOF_FIRST_ROUNDS = 20  # the first look: the sweep's min_rounds (fewer give intervals too wide to settle a margin)
SETTLED = "settled"  # Proof.stopped_by: the interval beyond the margin or inside it
CONFIRMED, UNCONFIRMED, REFUTED = "confirmed", "unconfirmed", "slower"  # what a proof says of the race's choice


def outcome_of_verdict(verdict: str) -> str:
    """What a proof's verdict says of the race's choice: ``confirmed`` (faster beyond the margin), ``slower``
    (slower beyond it) or ``unconfirmed`` (anything else)."""
    return CONFIRMED if verdict == stats.FASTER else REFUTED if verdict == stats.SLOWER else UNCONFIRMED


@dataclass(frozen=True)
class ProofPlan:
    first_rounds: int = PROOF_FIRST_ROUNDS
    growth: int = 2
    max_rounds: int = 80
    level: float = 0.95
    margin: float = stats.EQUIVALENCE_MARGIN
    interval: str = stats.SERIAL_SIGNED_RANK

    def __post_init__(self):
        if self.first_rounds < 3 or self.growth < 1 or self.max_rounds < self.first_rounds:
            raise ValueError(f"proof plan: first_rounds >= 3, growth >= 1, max_rounds >= first_rounds ({self})")

    @classmethod
    def after(cls, race: RacePlan) -> ProofPlan:
        """The proof of a race run under ``race``: its cap, level, margin and interval, its first look at
        ``PROOF_FIRST_ROUNDS`` (or the race's cap, when that is smaller)."""
        first = min(max(PROOF_FIRST_ROUNDS, race.first_rounds), race.max_rounds)
        return cls(first_rounds=first, growth=2, max_rounds=race.max_rounds, level=race.level, margin=race.margin,
                   interval=race.interval)


@dataclass(frozen=True)
class Proof:
    """The race's choice against yours on fresh rounds: ratio (> 1 faster), interval, verdict and what it means."""

    label: str
    rounds: int
    looks: int
    ratio: float
    low: float
    high: float
    level: float
    verdict: str  # stats.decide, one comparison
    p_value: float
    stopped_by: str  # SETTLED, cap

    @property
    def outcome(self) -> str:
        return outcome_of_verdict(self.verdict)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def to_json(self) -> dict:
        return {"label": self.label, "rounds": self.rounds, "looks": self.looks, "ratio": self.ratio,
                "low": self.low, "high": self.high, "level": self.level, "half_width": self.half_width,
                "verdict": self.verdict, "p_value": self.p_value, "stopped_by": self.stopped_by,
                "outcome": self.outcome, "fresh_rounds": True}


def settled(iv: stats.Interval, margin: float) -> bool:
    """Whether more rounds could not change which side of the margin the interval is on."""
    return iv.low > 1.0 + margin or iv.high < 1.0 - margin or (iv.low >= 1.0 - margin and iv.high <= 1.0 + margin)


def prove(label: str, measure: Measure, plan: ProofPlan = ProofPlan()) -> Proof:
    """Time ``label`` against yours on fresh rounds until the verdict is settled or the cap; see the module doc.
    A KeyboardInterrupt propagates: an unfinished proof decides nothing."""
    logs: list[float] = []
    rounds, look = plan.first_rounds, 0
    while True:
        rounds = min(rounds, plan.max_rounds - len(logs))
        got = measure((label,), rounds)[label]
        if len(got) != rounds:
            raise ValueError(f"measure returned {len(got)} rounds for {label!r}, asked {rounds}")
        logs.extend(float(x) for x in got)
        look += 1
        x = np.asarray(logs, dtype=float)
        iv = stats.paired_interval(x, level=rung_level(look, plan.level), method=plan.interval)
        if settled(iv, plan.margin):
            stopped = SETTLED
        elif len(logs) >= plan.max_rounds:
            stopped = "cap"
        else:
            rounds *= plan.growth
            continue
        return Proof(label, len(logs), look, iv.estimate, iv.low, iv.high, iv.level,
                     stats.decide(iv, plan.margin), stats.paired_pvalue(x, plan.interval), stopped)


def proved(choice: Standing | None, result: RaceResult, plan: RacePlan, measure: Measure,
           log=lambda text: None) -> tuple[Proof | None, bool]:
    """(the proof of the race's ``choice`` under ``ProofPlan.after(plan)``, whether an interrupt cut it): no proof
    when there is nothing to prove (no choice, or a race ended by an interrupt) or the proof was interrupted (an
    unfinished proof decides nothing: yours stays, the record says the choice was not proven, and the tune stops
    there as after an interrupted race)."""
    if choice is None or result.stopped_by == INTERRUPTED:
        return None, False
    log(f"proving {choice.label} on fresh rounds")
    try:
        return prove(choice.label, measure, ProofPlan.after(plan)), False
    except KeyboardInterrupt:
        log(f"the proof of {choice.label} was interrupted; yours stays")
        return None, True
