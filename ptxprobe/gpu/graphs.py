"""What one timing sample replays: CUDA graphs of a label's launches, alone or interleaved with another label's.

A ``Unit`` is what a label launches per graph unit (``k`` launches, then an optional tail such as a
planted delay). ``GraphSample`` replays one label's unit and times the replay with two events.
``PairGraph`` interleaves two labels' units A B B A (per cycle) in one graph with a timing event
between units, recorded *inside* the graph (``external`` events): both labels run in the same
stretch of the card's clock, which on a power-capped card wanders within milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ptxprobe.gpu.device import require_gpu


@dataclass(frozen=True)
class Unit:
    """``k`` launches of ``fn`` then ``tail`` (if any); ``ms`` is the unit's estimated duration."""

    fn: Callable
    k: int
    ms: float
    tail: Callable | None = None

    def launch(self) -> None:
        for _ in range(self.k):
            self.fn()
        if self.tail:
            self.tail()


def _settle(units: list[Unit]) -> None:
    """Run each unit once on a side stream before capture: modules load and allocations settle."""
    torch = require_gpu()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for u in units:
            u.fn()
            if u.tail:
                u.tail()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()


class GraphSample:
    """``k`` launches of ``fn`` (then ``tail``, if given) captured once as a CUDA graph, replayed per sample."""

    def __init__(self, fn, k: int, tail=None):
        torch = require_gpu()
        self.k = k
        unit = Unit(fn, k, 0.0, tail)
        _settle([unit])
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            unit.launch()
        self._start, self._end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def replay_ms(self) -> float:
        """Wall time of one replay (all k launches), milliseconds."""
        return self.replay_many(1)

    def replay_many(self, n: int) -> float:
        """Wall time of ``n`` replays queued back to back (one sync: the card is not left idle between them)."""
        torch = require_gpu()
        self._start.record()
        for _ in range(n):
            self.graph.replay()
        self._end.record()
        torch.cuda.synchronize()
        return self._start.elapsed_time(self._end)


def abba(cycles: int) -> list[int]:
    """Which of two labels runs each unit of an interleaved sample: 0 1 1 0 per cycle (linear drift cancels)."""
    return [0, 1, 1, 0] * cycles


class PairGraph:
    """Two labels' units interleaved A B B A per cycle in one CUDA graph, a timing event between any two units.

    ``replay()`` gives each label's time per launch over its units of that replay.
    """

    def __init__(self, first: Unit, second: Unit, cycles: int):
        torch = require_gpu()
        self.units = (first, second)
        self.order = abba(cycles)
        _settle([first, second])
        try:
            self.events = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(len(self.order) + 1)]
        except TypeError as exc:  # torch before external events
            raise RuntimeError("the interleaved design needs torch.cuda.Event(external=True) (torch >= 2.8); "
                               "set [run.timing] design = \"pairs\"") from exc
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.events[0].record()
            for i, who in enumerate(self.order):
                self.units[who].launch()
                self.events[i + 1].record()

    def replay(self) -> tuple[float, float]:
        """(first, second) label's milliseconds per launch in this replay."""
        torch = require_gpu()
        self.graph.replay()
        torch.cuda.synchronize()
        spans = np.array([self.events[i].elapsed_time(self.events[i + 1]) for i in range(len(self.order))])
        return tuple(per_launch(spans, self.order, [u.k for u in self.units]))  # type: ignore[return-value]


def per_launch(spans, order: list[int], k: tuple[int, int] | list[int]) -> list[float]:
    """Each label's summed unit times over its number of launches (pure: tested on CPU)."""
    spans = np.asarray(spans, dtype=float)
    who = np.asarray(order)
    return [float(spans[who == i].sum() / (k[i] * np.count_nonzero(who == i))) for i in (0, 1)]


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
