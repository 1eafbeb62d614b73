"""Callables compared on the GPU with the sweep's own timing design, and timed alone for a throughput.

``compare`` is the public A/B: two or more zero-argument callables (each launches GPU work on the current
stream; CUDA-graph capturable), the first the baseline. It times them exactly as a sweep times names
(``gpu.timing``): one number of launches per unit so that every unit lasts >= ``segment_ms``, each pair
with the baseline interleaved A B B A in one CUDA graph, pairs in a fresh random order each round, each
comparison timed until its interval is narrow enough (the look-adjusted signed-rank interval of the Hodges-Lehmann
ratio), and ``stats.paired.decide`` with the +-0.5 % equivalence margin. ``time_callables`` times labels
once per round in a random order (no comparison): a throughput, what a benchmark table needs.

The records split as ``torch.utils.benchmark`` does: the plan (``TimingPlan``) is the spec; ``Timing``
(raw per-launch times of one label) and ``Comparison`` (a verdict on two labels) are the measurements.
``judge`` is the pure step from Timings to Comparisons (tested on CPU with synthetic rounds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.graphs import Unit, launch_ms
from ptxprobe.gpu.timing import (
    Nvml,
    Sampled,
    TimingPlan,
    comparison_regime,
    effective,
    launches_for,
    look_halfwidths,
    look_rounds,
    paired_estimate,
    reference_plan,
    stop_reason,
    time_block,
    unit_for,
)
from ptxprobe.stats import paired as stats
from ptxprobe.stats import serial
from ptxprobe.stats.regime import Regime


@dataclass(frozen=True)
class Timing:
    """One label's raw samples: the time per launch of every sample, in the order they ran.

    A sample is one graph replay's units of this label (``launches_per_sample`` launches in all). In an
    interleaved or paired block ``partners`` keeps, per label it was paired with, this label's times from
    those pairs (what a comparison pairs round by round; the baseline of several pairs has several)."""

    label: str
    times_ms: tuple[float, ...]
    launches_per_sample: int = 1
    sm_clock_mhz: tuple[int | None, ...] = ()
    throttled: tuple[bool, ...] = ()
    partners: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    power_w: tuple[float | None, ...] = ()
    partner_index: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, s: Sampled) -> Timing:
        return cls(s.label, tuple(s.times_ms), s.launches_per_sample, tuple(s.sm_clock_mhz), tuple(s.throttled),
                   {k: tuple(v) for k, v in s.partners.items()}, tuple(s.power_w),
                   {k: tuple(v) for k, v in s.partner_index.items()})

    @property
    def n(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return stats.median_ms(self.times_ms)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: this label's own sample-to-sample noise."""
        return stats.spread(self.times_ms)

    @property
    def throttled_samples(self) -> int:
        return int(sum(self.throttled))

    def per_second(self, amount: float) -> float:
        """``amount`` (FLOPs, bytes) per launch over the median launch time, per second."""
        return amount / (self.median_ms * 1e-3)

    def sampled(self) -> Sampled:
        """Back to the timing module's record, whose pairing ``paired_estimate`` reads."""
        return Sampled(self.label, list(self.times_ms), sm_clock_mhz=list(self.sm_clock_mhz),
                       power_w=list(self.power_w), throttled=list(self.throttled),
                       launches_per_sample=self.launches_per_sample,
                       partners={k: list(v) for k, v in self.partners.items()},
                       partner_index={k: list(v) for k, v in self.partner_index.items()})

    def to_json(self) -> dict:
        return {**asdict(self), "times_ms": list(self.times_ms),
                "partners": {k: list(v) for k, v in self.partners.items()},
                "partner_index": {k: list(v) for k, v in self.partner_index.items()}, "median_ms": self.median_ms}


@dataclass(frozen=True)
class Comparison:
    """``other`` against ``baseline``: the throughput ratio (baseline's time over other's: > 1 means ``other`` is
    faster) with its interval at ``level``, the decision, and how the block ended (``stopped_by``: ``target``,
    ``ceiling``, ``cap``, or None when the rounds were given rather than run to a look of the stopping rule)."""

    baseline: str
    other: str
    ratio: float
    low: float
    high: float
    level: float
    verdict: str
    rounds: int
    p_value: float
    margin: float
    interval: str
    stopped_by: str | None
    q_value: float | None = None  # Benjamini-Hochberg over this call's comparisons (the verdict is gated by it)
    ratio_of_means: float | None = None  # mean baseline time / mean other time over the paired rounds
    lag1: float | None = None  # lag-1 autocorrelation of the per-round log ratios (the interval allows for it)
    regime: Regime | None = None  # the clock, throttling and power of the paired rounds, and the clock slope

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def to_json(self) -> dict:
        return {**asdict(self), "half_width": self.half_width}


@dataclass(frozen=True)
class TimedBlock:
    """What ``compare`` measured: every label's Timing, each label's Comparison with the baseline, the plan."""

    baseline: str
    timings: Mapping[str, Timing]
    comparisons: tuple[Comparison, ...]
    plan: TimingPlan
    gpu_seconds: float
    power_limit_w: float | None = None

    def comparison(self, other: str) -> Comparison:
        for c in self.comparisons:
            if c.other == other:
                return c
        raise KeyError(f"{other!r} was not compared with {self.baseline!r}")

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "timings": {k: t.to_json() for k, t in self.timings.items()},
                "comparisons": [c.to_json() for c in self.comparisons], "plan": asdict(self.plan),
                "gpu_seconds": self.gpu_seconds, "power_limit_w": self.power_limit_w}


def judge(timings: Mapping[str, Timing], baseline: str, plan: TimingPlan,
          power_limit_w: float | None = None) -> tuple[Comparison, ...]:
    """Every other label against ``baseline`` from raw samples alone (pure): the paired log ratios and
    interval of ``timing.paired_estimate``, the signed-rank p-value, Benjamini-Hochberg over this call's
    comparisons (the block), ``stats.decide`` with that q, the stopping rule's reason at these rounds, and the
    regime of the paired rounds (``timing.comparison_regime``)."""
    plan = effective(plan)
    base = timings[baseline].sampled()
    others = [label for label in timings if label != baseline]
    estimates = [paired_estimate(base, timings[o].sampled(), plan, plan.seed) for o in others]
    done = min((len(logs) for logs, _ in estimates), default=0)
    stopped = (stop_reason(done, look_halfwidths([logs for logs, _ in estimates], done, plan, plan.seed), plan)
               if done in look_rounds(plan) else None)
    p = [stats.paired_pvalue(logs, plan.interval) for logs, _ in estimates]
    q = stats.bh_qvalues(p)
    return tuple(Comparison(baseline, o, iv.estimate, iv.low, iv.high, iv.level, stats.decide(iv, plan.margin, qo),
                            len(logs), po, plan.margin, plan.interval, stopped, qo,
                            stats.ratio_of_means(*base.paired_with(timings[o].sampled())), serial.lag1(logs),
                            comparison_regime(base, timings[o].sampled(), logs, plan, power_limit_w))
                 for o, (logs, iv), po, qo in zip(others, estimates, p, q, strict=True))


Callables = Mapping[str, Callable[[], object]] | Sequence[Callable[[], object]]


def labelled(fns: Callables) -> dict[str, Callable[[], object]]:
    """Labels for the callables: a mapping's keys, else each function's ``__name__`` (made unique)."""
    if isinstance(fns, Mapping):
        return dict(fns)
    out: dict[str, Callable[[], object]] = {}
    for i, fn in enumerate(fns):
        name = getattr(fn, "__name__", "") or f"fn{i}"
        out[name if name not in out and name != "<lambda>" else f"{name.strip('<>')}#{i}"] = fn
    return out


def compare(fns: Callables, *, baseline: str | None = None, rounds: int | None = None,
            plan: TimingPlan | None = None, **plan_fields) -> TimedBlock:
    """Time two or more zero-argument callables against ``baseline`` (default: the first) on the GPU.

    ``plan`` (default ``TimingPlan()``: the sweep's interleaved, adaptive design) with ``plan_fields``
    replaced (``min_sample_ms=...``, ``design="rounds"``, ``seed=...``); ``rounds`` fixes the number of
    rounds (no adaptive stopping). Raises ``NoGpu`` without a CUDA GPU, ``ValueError`` for fewer than two
    callables or an unknown baseline."""
    fns = labelled(fns)
    baseline = next(iter(fns), "") if baseline is None else baseline
    if len(fns) < 2 or baseline not in fns:
        raise ValueError(f"compare needs two or more callables and a baseline among them (got {list(fns)}, "
                         f"baseline {baseline!r})")
    plan = replace(plan or TimingPlan(), **plan_fields)
    if rounds is not None:
        plan = reference_plan(replace(plan, reference_rounds=rounds, sustained_rounds=rounds))
    require_gpu()
    plan = effective(plan)  # a sustained plan times whole samples of the pairs design
    interleaved = plan.design == "interleaved"
    # one number of launches for all: enough that the shortest callable's unit lasts its minimum
    ms = {label: launch_ms(fn) for label, fn in fns.items()}
    k = max(launches_for(m, plan, interleaved) for m in ms.values())
    units = {label: Unit(fn, k, k * ms[label]) for label, fn in fns.items()}
    pairs = [(baseline, label) for label in fns if label != baseline]
    nvml = Nvml()
    limit = nvml.power_limit_w()
    samples, seconds = time_block(units, plan, pairs, plan.seed, nvml)
    timings = {label: Timing.of(s) for label, s in samples.items()}
    return TimedBlock(baseline, timings, judge(timings, baseline, plan, limit), plan, seconds, limit)


def time_callables(fns: Callables, *, rounds: int = 10, plan: TimingPlan | None = None,
                   **plan_fields) -> dict[str, Timing]:
    """Each callable's time per launch over ``rounds`` rounds, every label once per round in a fresh random
    order, each sample a CUDA graph of launches lasting >= ``min_sample_ms`` (a throughput, no decision)."""
    plan = reference_plan(replace(plan or TimingPlan(), reference_rounds=rounds, sustained_rounds=rounds,
                                  **plan_fields))
    require_gpu()
    units = {label: unit_for(fn, plan, interleaved=False) for label, fn in labelled(fns).items()}
    samples, _ = time_block(units, plan, [], plan.seed)
    return {label: Timing.of(s) for label, s in samples.items()}


def time_callable(fn: Callable[[], object], *, label: str | None = None, rounds: int = 10,
                  plan: TimingPlan | None = None, **plan_fields) -> Timing:
    """One callable's Timing (``time_callables`` of one label)."""
    label = label or getattr(fn, "__name__", "fn")
    return time_callables({label: fn}, rounds=rounds, plan=plan, **plan_fields)[label]
