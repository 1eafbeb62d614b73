"""Timing on the GPU: CUDA-graph samples in a random order every round, stopped when the answer is sure.

The design (validated on simulated rounds in tests/test_design_stats.py):

* a sample is one replay of a CUDA graph of k back-to-back launches lasting >= ``min_sample_ms``
  (k from a probe of the baseline, the same k for every label of a block); the L2 regime is
  *warm, back to back*: no flush, each launch finds what the previous one left (documented;
  it is the same for every label);
* every round runs each label once in a fresh random order; position and predecessor are kept;
* blocks are timed apart: the name comparison never shares rounds with SDPA or a planted control;
* warm-up by time (``warmup_s`` per label) before the first round;
* NVML's SM clock, power and throttle reasons are read with every sample, throttled samples flagged;
* rounds come in batches until every comparison's 95 % half-width is <= ``target_halfwidth``
  or ``max_rounds`` is reached.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import stats
from .device import require_gpu

THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # SW power cap, HW slowdown, SW/HW thermal, HW power brake


DESIGNS = ("pairs", "rounds")


@dataclass(frozen=True)
class TimingPlan:
    design: str = "pairs"  # pairs: each compared pair back to back; rounds: every label once per round
    min_sample_ms: float = 10.0
    warmup_s: float = 1.0  # per label, before the first round
    batch_rounds: int = 10
    min_rounds: int = 20
    max_rounds: int = 80
    target_halfwidth: float = 0.001
    margin: float = 0.005  # TOST equivalence margin on the throughput ratio
    n_boot: int = 2000
    seed: int = 0
    rounds: int | None = None  # the old design's keys, still read from committed experiments: rounds caps max_rounds
    reps: int | None = None
    warmup: int | None = None
    flush_bytes: int | None = None

    @property
    def round_cap(self) -> int:
        return self.rounds if self.rounds else self.max_rounds


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

    def paired_with(self, other: Sampled) -> tuple[list[float], list[float]]:
        """(this label's, the other's) times as a comparison pairs them round by round."""
        return stats.pair_series(self.label, self.times_ms, self.partners, other.label, other.times_ms,
                                 other.partners)

    def measurement(self) -> stats.Measurement:
        return stats.Measurement(self.label, tuple(self.times_ms))

    def to_json(self) -> dict:
        return {"times_ms": self.times_ms, "positions": self.positions, "predecessors": self.predecessors,
                "sm_clock_mhz": self.sm_clock_mhz, "power_w": self.power_w, "throttled": self.throttled,
                "launches_per_sample": self.launches_per_sample,
                **({"partners": self.partners} if self.partners else {})}


class Nvml:
    """NVML readings for device 0 (absent NVML: every reading is None, nothing fails)."""

    def __init__(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv, self._h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
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


class GraphSample:
    """``k`` launches of ``fn`` (then ``tail``, if given) captured once as a CUDA graph, replayed per sample."""

    def __init__(self, fn, k: int, tail=None):
        torch = require_gpu()
        self.k = k
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # loads modules and settles allocations before capture
            fn()
            if tail:
                tail()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for _ in range(k):
                fn()
            if tail:
                tail()
        self._start, self._end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def replay_ms(self) -> float:
        """Wall time of one replay (all k launches), milliseconds."""
        torch = require_gpu()
        self._start.record()
        self.graph.replay()
        self._end.record()
        torch.cuda.synchronize()
        return self._start.elapsed_time(self._end)


def launch_ms(fn, repeats: int = 5) -> float:
    """One launch's time, from a short eager probe (the median of ``repeats``)."""
    torch = require_gpu()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def launches_for(ms: float, plan: TimingPlan) -> int:
    return max(1, math.ceil(plan.min_sample_ms / max(ms, 1e-4)))


def time_block(graphs: dict[str, GraphSample], plan: TimingPlan, compare: list[tuple[str, str]], seed: int,
               nvml: Nvml | None = None) -> tuple[dict[str, Sampled], float]:
    """Rounds of every label in a random order each, until each (base, other) pair in ``compare`` is sure.

    Returns the samples by label (times per launch) and the GPU seconds the block took.
    """
    t0 = time.perf_counter()
    nvml = nvml or Nvml()
    labels = list(graphs)
    for label in labels:  # warm-up by time, interleaved so the card settles for all of them
        end = time.perf_counter() + plan.warmup_s
        while time.perf_counter() < end:
            graphs[label].replay_ms()
    out = {label: Sampled(label, launches_per_sample=graphs[label].k) for label in labels}
    rng_seed = seed
    done = 0
    while done < plan.round_cap:
        batch = min(plan.batch_rounds if done >= plan.min_rounds else plan.min_rounds - done, plan.round_cap - done)
        paired = plan.design == "pairs" and compare
        rounds = (stats.random_pair_orders(list(compare), batch, seed=rng_seed) if paired
                  else [[(label,) for label in o] for o in stats.random_orders(labels, batch, seed=rng_seed)])
        for order in rounds:
            prev, pos = None, 0
            for unit in order:
                for label in unit:
                    ms = graphs[label].replay_ms()
                    clock, power, throttled = nvml.read()
                    s = out[label]
                    s.times_ms.append(ms / graphs[label].k)
                    s.positions.append(pos)
                    s.predecessors.append(prev)
                    s.sm_clock_mhz.append(clock)
                    s.power_w.append(power)
                    s.throttled.append(throttled)
                    prev, pos = label, pos + 1
                if len(unit) == 2:
                    a, b = unit
                    out[a].partners.setdefault(b, []).append(out[a].times_ms[-1])
                    out[b].partners.setdefault(a, []).append(out[b].times_ms[-1])
        rng_seed += 1
        done += batch
        level = stats.sequential_level(done, plan.min_rounds, plan.batch_rounds)
        if done >= plan.min_rounds and all(
            stats.half_width(stats.paired_interval(stats.log_ratios(*out[a].paired_with(out[b])),
                                                   level=level, n_boot=500, seed=seed)) <= plan.target_halfwidth
            for a, b in compare
        ):
            break
    return out, time.perf_counter() - t0


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
