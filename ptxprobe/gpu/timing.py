"""Timing on the GPU: CUDA-graph samples in a random order every round, stopped when the answer is sure.

The design (validated on simulated rounds in tests/test_design_stats.py):

* ``interleaved`` (the default): each compared pair is one CUDA graph of A B B A units (a unit is
  k launches lasting >= ``segment_ms``), repeated until each label has run >= ``min_sample_ms``,
  with a timing event recorded in the graph between any two units. A power-capped card's clock
  wanders within milliseconds; interleaving at that scale puts both labels under the same clock
  (measured on the H200: experiments/results/*-h200-interleave-*). ``pairs``: the pair's two
  samples back to back; ``rounds``: every label once per round;
* the L2 regime is *warm, back to back*: no flush, each launch finds what the previous one left
  (documented; it is the same for every label);
* every round runs the pairs (or labels) in a fresh random order, and who goes first at random;
  position and predecessor are kept;
* blocks are timed apart: the name comparison never shares rounds with SDPA or a planted control;
* warm-up by time (``warmup_s`` per label, ``card_warmup_s`` more for a process's first block);
* NVML's SM clock, power and throttle reasons are read with every sample, throttled samples flagged; each
  comparison's regime (``stats.regime``) is summarised from the readings of its paired rounds (``paired_readings``);
* ``regime = "sustained"`` instead holds each arm of a pair alone for seconds once its clock settles
  (``gpu.sustained``): the pairs design, ``sustained_rounds`` rounds, no adaptive stopping;
* rounds come in batches; after each batch every comparison still timed is looked at, and stops once its
  half-width (at the look-adjusted level) is <= ``target_halfwidth``, or at ``max_rounds`` under
  ``ceiling_halfwidth`` (else up to ``overflow_rounds`` more). A stopped comparison's pair is no longer replayed
  (``stopping = "each"``, the default); ``"together"`` times every pair until all may stop (the runs before
  2026-12-06): the same intervals, each stopped on its own half-width alone, for fewer rounds.

The stopping rule's guarantee is a *prespecified level validated by simulation*, not alpha spending and not an
anytime-valid confidence sequence: ``stats.sequential_level`` sets each look's level in advance, and the intervals
keep their coverage because ``stop_reason`` reads half-widths only, never an estimate.
experiments/analysis/stopping_simulation.py runs this module's ``look_rounds``, ``order_batches`` and
``stop_reason`` with the signed-rank interval across heavy tails, contamination, drift, the first-in-replay
penalty, three pairs per block and the overflow rounds (its committed result: FINDINGS.md, measurement section).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.graphs import GraphSample, PairGraph, Unit, launch_ms
from ptxprobe.gpu.sustained import hold
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import BURST, REGIMES, SUSTAINED, Reading, Regime, regime_of

THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # SW power cap, HW slowdown, SW/HW thermal, HW power brake


DESIGNS = ("interleaved", "pairs", "rounds")
STOPPINGS = ("each", "together")


@dataclass(frozen=True)
class TimingPlan:
    # interleaved: each compared pair A B B A in one graph, timed unit by unit; pairs: each compared pair's two
    # samples back to back; rounds: every label once per round
    design: str = "interleaved"
    min_sample_ms: float = 10.0  # per label per sample
    segment_ms: float = 1.0  # interleaved: each unit (k launches) lasts at least this
    # warm-up by time before a block's first round: ``warmup_s`` per label (every graph replays at least once), and
    # ``card_warmup_s`` more before the first block a process times (the card leaves idle). Interleaving cancels the
    # drift that follows: on the H200 the unit times of the first 3 rounds ran 1.2 % faster than the rest while the
    # A/A and planted log ratios of those rounds matched the rest within 0.03 % (2026-12-03-h200-interleaved). 0.1 s
    # per label, the default before, was untimed GPU time the A/A and planted goals did not need (FINDINGS: the warm-up)
    warmup_s: float = 0.02
    card_warmup_s: float = 1.0
    reference_rounds: int = 10  # rounds of a block with nothing to compare (torch SDPA: a reference rate)
    batch_rounds: int = 10
    min_rounds: int = 20
    max_rounds: int = 80
    target_halfwidth: float = 0.001
    # past max_rounds, comparisons whose half-width is still above the ceiling keep going, up to overflow_rounds
    # more (0: stop at max_rounds). The H200's noisiest group (one ~9 ms launch per unit) ended at 0.31 % after 60.
    ceiling_halfwidth: float = 0.0025
    overflow_rounds: int = 60
    # each: a comparison stops on its own half-width and its pair is timed no more; together: every pair is timed
    # until all may stop (the runs before 2026-12-06; what a group recorded without this key ran)
    stopping: str = "each"
    margin: float = stats.EQUIVALENCE_MARGIN  # TOST equivalence margin on the throughput ratio
    # the Hodges-Lehmann interval: the signed-rank interval widened for serial correlation (the default), the exact
    # signed-rank interval alone (runs of 2026-12-03..05) or "bca" (bootstrap; the earlier runs)
    interval: str = stats.SERIAL_SIGNED_RANK
    n_boot: int = 2000
    seed: int = 0
    rounds: int | None = None  # a fixed number of rounds (no adaptive stopping): caps max_rounds
    # burst: today's short units (both codes of a pair under one clock); sustained: each arm held alone
    # (gpu.sustained), ``sustained_rounds`` rounds of the pairs design unless ``rounds`` is given
    regime: str = BURST
    hold_s: float = 1.0  # sustained: GPU seconds each arm is timed for, per round
    settle_s: float = 0.5  # sustained: GPU seconds each arm runs at least before its window
    settle_max_s: float = 3.0  # sustained: and at most, when the clock does not settle
    sustained_rounds: int = 12

    def __post_init__(self):
        if self.design not in DESIGNS:
            raise ValueError(f"design {self.design!r}: choose one of {', '.join(DESIGNS)}")
        if self.regime not in REGIMES:
            raise ValueError(f"regime {self.regime!r}: choose one of {', '.join(REGIMES)}")
        if self.sustained_rounds < 3 or self.hold_s <= 0 or self.settle_s < 0 or self.settle_max_s < self.settle_s:
            raise ValueError("sustained: sustained_rounds >= 3, hold_s > 0, 0 <= settle_s <= settle_max_s (got "
                             f"{self.sustained_rounds}, {self.hold_s}, {self.settle_s}, {self.settle_max_s})")
        if self.stopping not in STOPPINGS:
            raise ValueError(f"stopping {self.stopping!r}: choose one of {', '.join(STOPPINGS)}")
        if self.interval not in stats.INTERVAL_METHODS:
            raise ValueError(f"interval {self.interval!r}: choose one of {', '.join(stats.INTERVAL_METHODS)}")

    @property
    def round_cap(self) -> int:
        return self.rounds if self.rounds else self.max_rounds + self.overflow_rounds


def effective(plan: TimingPlan) -> TimingPlan:
    """The plan a block really runs: a sustained plan runs the pairs design for ``sustained_rounds`` rounds (or
    its given ``rounds``), one look, no overflow."""
    if plan.regime != SUSTAINED:
        return plan
    n = plan.rounds or plan.sustained_rounds
    return replace(plan, design="pairs", rounds=n, min_rounds=n, max_rounds=n, batch_rounds=n, overflow_rounds=0)


def stop_reason(done: int, halfwidths: list[float], plan: TimingPlan) -> str | None:
    """Why a block stops after ``done`` rounds with these half-widths (at the look-adjusted level), or None to go
    on: ``target`` (every comparison at the target), ``ceiling`` (``max_rounds`` reached and every comparison
    under the ceiling) or ``cap`` (no rounds left). It reads half-widths only, never an estimate: that is what
    keeps the intervals' coverage under optional stopping; a rule that also stopped on an interval excluding 1
    would not (simulated: experiments/analysis/stopping_simulation.py, ``stops-on-significance``)."""
    if done < plan.min_rounds:
        return "cap" if done >= plan.round_cap else None
    if all(h <= plan.target_halfwidth for h in halfwidths):
        return "target"
    if done >= plan.round_cap:
        return "cap"
    if done >= plan.max_rounds and all(h <= plan.ceiling_halfwidth for h in halfwidths):
        return "ceiling"
    return None


def should_stop(done: int, halfwidths: list[float], plan: TimingPlan) -> bool:
    return stop_reason(done, halfwidths, plan) is not None


def look_stops(done: int, halfwidths: list[float], plan: TimingPlan) -> list[str | None]:
    """Each comparison looked at after ``done`` rounds: why it stops here, or None to go on. Under ``each``,
    ``stop_reason`` on its own half-width alone (the others' never hold it back, so it keeps the coverage a single
    comparison has under the rule); under ``together``, every one stops when ``stop_reason`` stops the lot. Before
    ``min_rounds`` give ``math.inf`` half-widths: only the round cap stops then."""
    if plan.stopping == "together":
        return [stop_reason(done, list(halfwidths), plan)] * len(halfwidths)
    return [stop_reason(done, [h], plan) for h in halfwidths]


def look_rounds(plan: TimingPlan) -> list[int]:
    """The round counts at which a block looks at its half-widths: ``min_rounds`` first, then every
    ``batch_rounds``, up to the cap (what ``order_batches`` runs and a replay of a recorded block re-checks)."""
    looks, done = [], 0
    while done < plan.round_cap:
        done = min(plan.min_rounds if done < plan.min_rounds else done + plan.batch_rounds, plan.round_cap)
        looks.append(done)
    return looks


def look_halfwidths(logs_by_pair: list, done: int, plan: TimingPlan, seed: int) -> list[float]:
    """The half-widths a look after ``done`` rounds judges, one per compared pair, at the look-adjusted level
    (none before ``min_rounds``): what ``time_block`` stops on, and what a replay of a recorded block recomputes."""
    if done < plan.min_rounds:
        return []
    level = stats.sequential_level(done, plan.min_rounds, plan.batch_rounds)
    return [stats.half_width(stats.paired_interval(logs, level=level, n_boot=500, seed=seed, method=plan.interval))
            for logs in logs_by_pair]


@dataclass
class Sampled:
    """Everything measured for one label of a block: per-round times and what the card said meanwhile."""

    label: str
    times_ms: list[float] = field(default_factory=list)  # per launch
    positions: list[int] = field(default_factory=list)
    predecessors: list[str | None] = field(default_factory=list)
    sm_clock_mhz: list[int | None] = field(default_factory=list)
    power_w: list[float | None] = field(default_factory=list)
    throttled: list[bool] = field(default_factory=list)
    launches_per_sample: int = 1
    partners: dict[str, list[float]] = field(default_factory=dict)  # paired design: partner -> this label's times
    partner_index: dict[str, list[int]] = field(default_factory=dict)  # partner -> those samples' positions here
    settle_s: list[float] = field(default_factory=list)  # sustained: each sample's settling time

    def paired_with(self, other: Sampled) -> tuple[list[float], list[float]]:
        """(this label's, the other's) times as a comparison pairs them round by round."""
        return stats.pair_series(self.label, self.times_ms, self.partners, other.label, other.times_ms,
                                 other.partners)

    def reading(self, i: int) -> Reading:
        at = (self.sm_clock_mhz, self.power_w, self.throttled)
        clock, power, throttled = (v[i] if i < len(v) else None for v in at)
        return Reading(clock, power, bool(throttled))

    def to_json(self) -> dict:
        return {"times_ms": self.times_ms, "positions": self.positions, "predecessors": self.predecessors,
                "sm_clock_mhz": self.sm_clock_mhz, "power_w": self.power_w, "throttled": self.throttled,
                "launches_per_sample": self.launches_per_sample,
                **({"partners": self.partners} if self.partners else {}),
                **({"partner_index": self.partner_index} if self.partner_index else {}),
                **({"settle_s": self.settle_s} if self.settle_s else {})}


def paired_readings(base: Sampled, other: Sampled,
                    shared: bool = True) -> tuple[list[Reading], list[Reading]] | None:
    """Each arm's reading in every round the comparison pairs (``Sampled.paired_with``'s rounds): through
    ``partner_index`` where recorded; in records before it, the other label's own readings where it was paired
    with the baseline alone and ``shared`` (the interleaved design: in one graph both shared that reading), each
    label's own where every label ran once a round; None where the rounds cannot be matched."""
    a, b = base.paired_with(other)
    if other.label in base.partner_index and base.label in other.partner_index:
        ia, ib = base.partner_index[other.label], other.partner_index[base.label]
    elif shared and set(other.partners) == {base.label} and len(other.times_ms) == len(b):
        one = [other.reading(i) for i in range(len(b))]
        return one, one
    elif not other.partners and len(base.times_ms) == len(a) == len(b):
        ia = ib = list(range(len(a)))
    else:
        return None
    return [base.reading(i) for i in ia], [other.reading(i) for i in ib]


def _visible_handle(nv):
    """NVML's handle of the device CUDA calls 0 here: ``CUDA_VISIBLE_DEVICES``' first entry (an index or a UUID,
    as a multi-GPU sweep sets it per worker), else NVML's device 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return nv.nvmlDeviceGetHandleByUUID(first)
    return nv.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)


class Nvml:
    """NVML readings for device 0 (absent NVML: every reading is None, nothing fails)."""

    def __init__(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv, self._h = pynvml, _visible_handle(pynvml)
        except Exception:  # no nvidia-ml-py, no driver access: readings are simply missing
            self._nv = self._h = None

    def read(self) -> tuple[int | None, float | None, bool]:
        if self._nv is None:
            return None, None, False
        nv, h = self._nv, self._h
        try:
            clock = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            power = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            get = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
            return int(clock), float(power), bool(get(h) & THROTTLE_MASK)
        except Exception:
            return None, None, False

    def busy(self) -> bool | None:
        """Whether a kernel ran during NVML's last sample period (utilisation above 0; None without NVML)."""
        if self._nv is None:
            return None
        try:
            return self._nv.nvmlDeviceGetUtilizationRates(self._h).gpu > 0
        except Exception:
            return None

    def power_limit_w(self) -> float | None:
        """The power limit the card enforces, watts (None without NVML)."""
        if self._nv is None:
            return None
        try:
            return self._nv.nvmlDeviceGetEnforcedPowerLimit(self._h) / 1000.0
        except Exception:
            return None


def paired_estimate(base: Sampled, other: Sampled, plan: TimingPlan, seed: int) -> tuple[list[float], stats.Interval]:
    """Two labels' per-round log ratios and their interval at the level the run's looks leave (``plan.interval``)."""
    logs = stats.log_ratios(*base.paired_with(other))
    level = stats.sequential_level(len(logs), plan.min_rounds, plan.batch_rounds)
    return logs, stats.paired_interval(logs, level=level, n_boot=plan.n_boot, seed=seed, method=plan.interval)


def reference_plan(plan: TimingPlan) -> TimingPlan:
    """The plan of a block with nothing to decide (a reference rate): ``reference_rounds`` rounds, no more."""
    return replace(plan, min_rounds=plan.reference_rounds, max_rounds=plan.reference_rounds, rounds=None,
                   overflow_rounds=0)


def launches_for(ms: float, plan: TimingPlan, interleaved: bool = False) -> int:
    """Launches per graph unit: a unit lasts >= ``segment_ms`` when interleaved with its partner, else it is a
    whole sample of >= ``min_sample_ms``."""
    target = plan.segment_ms if interleaved else plan.min_sample_ms
    return max(1, math.ceil(target / max(ms, 1e-4)))


def unit_for(fn, plan: TimingPlan, k: int | None = None, tail=None, interleaved: bool = True) -> Unit:
    """A label's graph unit: ``k`` launches (from a probe when not given) and its estimated duration."""
    ms = launch_ms(fn)
    interleaved = interleaved and plan.design == "interleaved"
    k = k or launches_for(ms, plan, interleaved)
    return Unit(fn, k, k * ms, tail)


def cycles_for(a: Unit, b: Unit, plan: TimingPlan) -> int:
    """A B B A cycles per interleaved sample so that each label runs >= ``min_sample_ms`` in it."""
    return max(1, math.ceil(plan.min_sample_ms / (2 * max(1e-4, min(a.ms, b.ms)))))


def _samplers(units: dict[str, Unit], plan: TimingPlan, compare: list[tuple[str, str]], interleave: bool) -> dict:
    """The graphs a block replays: one per label, or (interleaved) one per compared pair and orientation."""
    if not interleave:
        return {label: GraphSample(u.fn, u.k, u.tail) for label, u in units.items()}
    missing = set(units) - {label for pair in compare for label in pair}
    if missing:
        raise ValueError(f"interleaved timing needs every label in a compared pair: {sorted(missing)}")
    out = {}
    for a, b in compare:
        cycles = cycles_for(units[a], units[b], plan)
        out[(a, b)] = PairGraph(units[a], units[b], cycles)
        out[(b, a)] = PairGraph(units[b], units[a], cycles)
    return out


def _record(s: Sampled, ms: float, pos: int, prev: str | None, reading: tuple) -> None:
    clock, power, throttled = reading
    s.times_ms.append(ms)
    s.positions.append(pos)
    s.predecessors.append(prev)
    s.sm_clock_mhz.append(clock)
    s.power_w.append(power)
    s.throttled.append(throttled)


_CARD_WARM: set[bool] = set()  # non-empty once this process has warmed the card (its first block)


def _warm_up(samplers: dict, seconds: float) -> None:
    """Replay every graph in turn until ``seconds`` have passed (the card settles for all of them alike)."""
    end = time.perf_counter() + seconds
    while True:
        for g in samplers.values():
            g.replay() if isinstance(g, PairGraph) else g.replay_ms()
        if time.perf_counter() >= end:
            return


def _round_units(plan: TimingPlan, labels: list[str], compare, batch: int, seed: int) -> list[list[tuple]]:
    if plan.design in ("pairs", "interleaved") and compare:
        return stats.random_pair_orders(list(compare), batch, seed=seed)
    return [[(label,) for label in o] for o in stats.random_orders(labels, batch, seed=seed)]


def order_batches(plan: TimingPlan, labels: list[str], compare, seed: int):
    """The rounds' orders a block runs, batch by batch (``min_rounds`` first, then ``batch_rounds`` at a time, a
    seed each): what ``time_block`` replays, and how an analysis recovers who ran first in any recorded round."""
    before = 0
    for i, done in enumerate(look_rounds(plan)):
        yield _round_units(plan, labels, compare, done - before, seed + i)
        before = done


def time_block(units: dict[str, Unit], plan: TimingPlan, compare: list[tuple[str, str]], seed: int,
               nvml: Nvml | None = None) -> tuple[dict[str, Sampled], float]:
    """Rounds of every label (or compared pair) in a random order each, until each pair in ``compare`` is sure.

    Returns the samples by label (times per launch) and the GPU seconds the block took. A sustained plan holds
    each arm alone (``gpu.sustained.hold``) in the pairs design for its fixed rounds (``effective``).
    """
    t0 = time.perf_counter()
    nvml = nvml or Nvml()
    plan = effective(plan)
    sustained = plan.regime == SUSTAINED
    interleave = plan.design == "interleaved" and bool(compare)
    samplers = _samplers(units, plan, compare, interleave)
    _warm_up(samplers, plan.warmup_s * len(units) + (0.0 if _CARD_WARM else plan.card_warmup_s))
    _CARD_WARM.add(True)
    per_sample = {label: u.k for label, u in units.items()}
    if interleave:
        for (a, _), g in samplers.items():
            per_sample[a] = units[a].k * g.order.count(0)
    out = {label: Sampled(label, launches_per_sample=per_sample[label]) for label in units}
    done, timed = 0, list(compare)  # the comparisons still timed
    for orders in order_batches(plan, list(units), compare, seed):
        for order in orders:
            prev, pos = None, 0
            for unit in order:
                if compare and not _serves(unit, timed, compare):
                    continue
                if interleave:  # both labels of the pair in one graph: one reading of the card for both
                    times = samplers[unit].replay()
                    reading = nvml.read()
                    for label, ms in zip(unit, times, strict=True):
                        _record(out[label], ms, pos, prev, reading)
                    prev, pos = unit[0], pos + 1  # A B B A: the pair's first label also ran last
                else:
                    for label in unit:
                        if sustained:
                            held = hold(samplers[label].replay_many, units[label].k, nvml.read, plan)
                            _record(out[label], held.ms_per_launch, pos, prev,
                                    (held.sm_clock_mhz, held.power_w, held.throttled))
                            out[label].settle_s.append(held.settle_s)
                        else:
                            ms = samplers[label].replay_ms() / units[label].k
                            _record(out[label], ms, pos, prev, nvml.read())
                        prev, pos = label, pos + 1
                if len(unit) == 2:
                    a, b = unit
                    for x, y in ((a, b), (b, a)):
                        out[x].partners.setdefault(y, []).append(out[x].times_ms[-1])
                        out[x].partner_index.setdefault(y, []).append(len(out[x].times_ms) - 1)
        done += len(orders)
        if not compare:
            if should_stop(done, [], plan):
                break
            continue
        logs = [stats.log_ratios(*out[a].paired_with(out[b])) for a, b in timed]
        widths = look_halfwidths(logs, done, plan, seed) or [math.inf] * len(timed)
        timed = [pair for pair, why in zip(timed, look_stops(done, widths, plan), strict=True) if why is None]
        if not timed:
            break
    return out, time.perf_counter() - t0


def _serves(unit: tuple, timed: list[tuple[str, str]], compare: list[tuple[str, str]]) -> bool:
    """Whether a round's unit is still run: its pair (either way round) is being timed, or, where every label runs
    alone, the label is in a comparison being timed or in none at all."""
    if len(unit) == 2:
        return unit in timed or unit[::-1] in timed
    return any(unit[0] in pair for pair in timed) or not any(unit[0] in pair for pair in compare)


def measured_peak_tflops(dtype: str) -> tuple[float | None, int | None]:
    """Dense matmul rate in this run (one %SOL denominator) and the SM clock it ran at."""
    torch = require_gpu()
    n = 8192
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if dtype.startswith("fp8"):
        if not hasattr(torch, "_scaled_mm"):
            return None, None
        fp8 = torch.float8_e4m3fn  # cuBLASLt has no e5m2 x e5m2; the tensor-core rate is the same
        a8, b8 = a.to(fp8), b.to(fp8).t().contiguous().t()
        one = torch.ones((), device="cuda")

        def op():
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.float16)
    else:
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a16, b16 = a.to(dt), b.to(dt)

        def op():
            return a16 @ b16

    try:
        g = GraphSample(op, launches_for(launch_ms(op), TimingPlan()))
        nvml = Nvml()
        times, clocks = [], []
        for _ in range(10):
            times.append(g.replay_ms() / g.k)
            clocks.append(nvml.read()[0])
    except RuntimeError:
        return None, None
    clock = int(np.median([c for c in clocks if c])) if any(clocks) else None
    return 2.0 * n**3 / (float(np.median(times)) * 1e-3) / 1e12, clock


def sdpa_fn(backend: str, inputs: dict, causal: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    q, k, v = inputs["q"], inputs["k"], inputs["v_logical"]

    def fn():
        with sdpa_kernel([be]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn


def round_readings(base: Sampled, other: Sampled, logs, plan: TimingPlan) -> tuple[list[Reading], list[Reading]]:
    """Each arm's reading in every one of the comparison's ``logs`` rounds (``paired_readings``); rounds that cannot
    be matched to readings read as none."""
    readings = paired_readings(base, other, shared=plan.design == "interleaved")
    if readings is None or len(readings[0]) != len(logs):
        none = [Reading(None, None, False)] * len(logs)
        return none, none
    return readings


def comparison_regime(base: Sampled, other: Sampled, logs, plan: TimingPlan, power_limit_w: float | None) -> Regime:
    """The regime of one comparison's paired rounds (``stats.regime.regime_of`` on ``round_readings``); a
    comparison whose rounds cannot be matched to readings keeps the regime's name and no readings."""
    return regime_of(plan.regime, logs, *round_readings(base, other, logs, plan), power_limit_w)
