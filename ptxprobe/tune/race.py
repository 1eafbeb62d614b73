"""Successive halving over distinct codes, each paired with the user's configuration: GPU time goes to contenders.

Pure: the race sees the world through ``measure(candidates, rounds)``, which returns, per candidate, one paired
log ratio log(user's time / candidate's time) per round (> 0: the candidate is faster), exactly what the
calibrated paired design (``gpu.timing``: each candidate A B B A with the user's configuration in one graph)
yields. Tests plug in simulated timings with a known best; ``tune.gpu`` plugs in the GPU.

Each rung measures every contender ``rounds`` more rounds (accumulating), judges each with the Hodges-Lehmann
ratio and its exact signed-rank interval at a level Bonferroni-adjusted over the rungs (``stats.sequential_level``
is the same rule for the sweep's looks), then keeps the better ``1/eta`` by estimate **and** every candidate whose
interval still reaches the leader's lower bound: a candidate is dropped only when it is behind on the estimate and
clearly worse than the leader, so noise cannot drop the true best unless its interval misses by chance. Rounds grow
by ``growth`` per rung; the first rung has at least the rounds at which the best candidate could come out
significant after the final adjustment over every candidate raced (``stats.decisive_rounds``: 8 for five codes,
whatever the plan asked; fewer make every verdict inconclusive). The race stops when the leader's half-width is
at the target and no other contender's interval reaches its lower bound (``target``), when every contender still in
contention is at the target
(``tied``: they cannot be told apart at that precision), or at the round cap (``cap``). Interrupted (Ctrl-C) after
a rung, it ends there (``interrupted``): the standings of the rungs it completed, judged as at any end. The final
verdicts are adjusted (Benjamini-Hochberg) over every candidate raced, not only the survivors.

The race *chooses*; it does not decide. Its standings are judged on the rounds that chose the winner, so the
winner's gain is biased up; ``tune.proof`` times the choice again on fresh rounds, and that decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ptxprobe.stats import paired as stats
from ptxprobe.tune.space import PREFERENCES

Measure = Callable[[Sequence[str], int], Mapping[str, Sequence[float]]]
INTERRUPTED = "interrupted"  # RaceResult.stopped_by of a race stopped by Ctrl-C after at least one rung
ALONE = "alone"  # RaceResult.stopped_by when there was nothing to race (your machine code is the only one)
RACED_FAMILY = "raced"  # the race record's ``bh_family``: BH over every candidate raced (absent: the final standings)


@dataclass(frozen=True)
class RacePlan:
    first_rounds: int = 10  # rounds of the first rung (every distinct code)
    eta: int = 2  # keep 1/eta of the contenders per rung (those still in contention stay too)
    growth: int = 2  # rounds per rung multiply by this
    max_rounds: int = 80  # per contender, in all
    target_halfwidth: float = 0.002  # the winner's interval half-width the race aims at (0.2 %)
    level: float = 0.95
    margin: float = stats.EQUIVALENCE_MARGIN
    prefer: str = "simplest"  # among contenders the race cannot tell from the leader: the simplest change, or fastest
    # the standings' interval (stats.INTERVAL_METHODS); records without one were raced with "signed-rank"
    interval: str = stats.SERIAL_SIGNED_RANK

    def __post_init__(self):
        if self.first_rounds < 3 or self.eta < 2 or self.growth < 1 or self.max_rounds < self.first_rounds:
            raise ValueError(f"race plan: first_rounds >= 3, eta >= 2, growth >= 1, max_rounds >= first_rounds "
                             f"({self})")
        if self.prefer not in PREFERENCES:
            raise ValueError(f"race plan: prefer is one of {', '.join(PREFERENCES)} (got {self.prefer!r})")


@dataclass(frozen=True)
class Standing:
    """A contender against the user's configuration: throughput ratio (> 1: faster) and interval."""

    label: str
    rounds: int
    ratio: float
    low: float
    high: float
    level: float
    verdict: str = ""  # stats.decide, with the q-value over the final standings (set at the end)
    p_value: float | None = None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def to_json(self) -> dict:
        return {"label": self.label, "rounds": self.rounds, "ratio": self.ratio, "low": self.low, "high": self.high,
                "level": self.level, "half_width": self.half_width, "verdict": self.verdict, "p_value": self.p_value}


@dataclass(frozen=True)
class Dropped:
    standing: Standing
    rung: int
    leader: str
    leader_low: float

    def to_json(self) -> dict:
        return {**self.standing.to_json(), "rung": self.rung, "leader": self.leader, "leader_low": self.leader_low,
                "reason": f"clearly slower than {self.leader} at rung {self.rung}"}


@dataclass(frozen=True)
class RaceResult:
    """The last standings (best first), what was dropped on the way, and how it ended."""

    standings: tuple[Standing, ...]
    dropped: tuple[Dropped, ...]
    rungs: int
    rounds_measured: int  # contender-rounds in all (one paired A B B A with the user's configuration each)
    stopped_by: str  # target, tied, cap, ALONE, INTERRUPTED

    @property
    def leader(self) -> Standing | None:
        return self.standings[0] if self.standings else None

    @property
    def winner(self) -> Standing | None:
        """The leader when it is proven faster than the user's configuration (``faster``); else None: keep yours."""
        lead = self.leader
        return lead if lead is not None and lead.verdict == stats.FASTER else None

    def tied_with_winner(self) -> tuple[Standing, ...]:
        """The winner and every final contender also proven faster whose interval reaches the winner's lower bound:
        the race's own rule for "not told apart" (the leader first)."""
        lead = self.winner
        if lead is None:
            return ()
        return tuple(s for s in self.standings if s.verdict == stats.FASTER and s.high >= lead.low)

    def to_json(self) -> dict:
        return {"standings": [s.to_json() for s in self.standings], "dropped": [d.to_json() for d in self.dropped],
                "rungs": self.rungs, "rounds_measured": self.rounds_measured, "stopped_by": self.stopped_by,
                "bh_family": RACED_FAMILY}


def standing(label: str, logs: Sequence[float], level: float, method: str = stats.SERIAL_SIGNED_RANK) -> Standing:
    """Hodges-Lehmann ratio and its interval (by default the signed-rank one widened for serial correlation) of one
    contender's paired log ratios."""
    iv = stats.paired_interval(np.asarray(logs, dtype=float), level=level, method=method)
    return Standing(label, len(logs), iv.estimate, iv.low, iv.high, iv.level)


def rung_level(rung: int, level: float) -> float:
    """The interval level after ``rung`` looks: Bonferroni over the looks, as ``stats.sequential_level`` does."""
    return 1.0 - (1.0 - level) / max(1, rung)


def survivors(table: Sequence[Standing], eta: int) -> tuple[list[Standing], list[Standing], Standing]:
    """(kept, dropped, leader): the better 1/eta by estimate, plus any whose interval reaches the leader's low."""
    ranked = sorted(table, key=lambda s: s.ratio, reverse=True)
    leader = ranked[0]
    keep_n = max(1, math.ceil(len(ranked) / eta))
    kept = [s for i, s in enumerate(ranked) if i < keep_n or s.high >= leader.low]
    return kept, [s for s in ranked if s not in kept], leader


def race(candidates: Sequence[str], measure: Measure, plan: RacePlan = RacePlan()) -> RaceResult:
    """Successive halving of ``candidates`` (labels) against the user's configuration; see the module doc."""
    alive = list(dict.fromkeys(candidates))
    if not alive:
        return RaceResult((), (), 0, 0, ALONE)
    logs: dict[str, list[float]] = {c: [] for c in alive}
    dropped: list[Dropped] = []
    # never fewer rounds than a verdict over every candidate raced can need (the final BH family)
    plan = replace(plan, first_rounds=max(plan.first_rounds, stats.decisive_rounds(len(alive), plan.level)),
                   max_rounds=max(plan.max_rounds, stats.decisive_rounds(len(alive), plan.level)))
    rounds, rung, measured = plan.first_rounds, 0, 0
    kept: list[Standing] = []
    while True:
        rounds = min(rounds, plan.max_rounds - len(logs[alive[0]]))
        try:
            got = measure(tuple(alive), rounds)
        except KeyboardInterrupt:
            if not kept:  # not one rung measured: nothing to answer with
                raise
            return RaceResult(judged(kept, logs, plan.margin, plan.interval, list(logs)), tuple(dropped), rung,
                              measured, INTERRUPTED)
        for c in alive:
            if len(got[c]) != rounds:
                raise ValueError(f"measure returned {len(got[c])} rounds for {c!r}, asked {rounds}")
            logs[c].extend(float(x) for x in got[c])
        measured += rounds * len(alive)
        rung += 1
        level = rung_level(rung, plan.level)
        table = [standing(c, logs[c], level, plan.interval) for c in alive]
        kept, out, leader = survivors(table, plan.eta)
        dropped += [Dropped(s, rung, leader.label, leader.low) for s in out]
        alive = [s.label for s in kept]
        done = len(logs[alive[0]])
        contention = [s for s in kept if s.high >= leader.low]  # the leader itself, and any it has not beaten
        if all(s.half_width <= plan.target_halfwidth for s in contention):
            stopped = "target" if len(contention) == 1 else "tied"
        elif done >= plan.max_rounds:
            stopped = "cap"
        else:
            rounds *= plan.growth
            continue
        return RaceResult(judged(kept, logs, plan.margin, plan.interval, list(logs)), tuple(dropped), rung, measured,
                          stopped)


def judged(kept: Sequence[Standing], logs: Mapping[str, Sequence[float]], margin: float,
           method: str = stats.SERIAL_SIGNED_RANK, family: Sequence[str] | None = None) -> tuple[Standing, ...]:
    """The final standings, best first, each with its verdict against the user's configuration: ``stats.decide``
    with Benjamini-Hochberg over ``family``: every candidate raced (``race`` passes them all: the final standings
    are the survivors of a selection, and adjusting over the survivors alone forgets the candidates that selection
    looked at); None, the final standings alone (races recorded before ``RACED_FAMILY``)."""
    ranked = sorted(kept, key=lambda s: s.ratio, reverse=True)
    labels = list(dict.fromkeys([*(s.label for s in ranked), *(family or ())]))
    p = [stats.paired_pvalue(np.asarray(logs[label], dtype=float), method) for label in labels]
    q = stats.bh_qvalues(p)
    return tuple(replace(s, verdict=stats.decide(stats.Interval(s.ratio, s.low, s.high, s.level), margin, qs),
                         p_value=ps) for s, ps, qs in zip(ranked, p[:len(ranked)], q[:len(ranked)], strict=True))
