"""The sustained regime: each arm of a comparison held alone on the card for seconds, timed once its clock settles.

The default (burst) design interleaves both codes within milliseconds inside one CUDA graph, so both run under the
one clock of the moment: exact for what the code does per cycle, blind to what a code gives back as clock when it
draws more power at the card's limit. Held alone for seconds, each arm finds its own clock: that is the throughput
a long-running job sees. A round of a sustained block runs each compared pair's two arms one after the other (who
goes first at random, as every design does); each arm replays its graph until its SM clock settles (``settle_s`` at
least, ``settle_max_s`` at most: the medians of the last two ``SETTLE_WINDOW_MS`` windows within one clock step or
``SETTLE_TOLERANCE``), then for ``hold_s`` of GPU time, and its sample is that window's time per launch. Time is
counted in the GPU's own milliseconds (the replays' event times), so a simulated card runs the same code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ptxprobe.gpu.monitor import summarize

SETTLE_WINDOW_MS = 200.0
CLOCK_STEP_MHZ = 15.0  # the SM clock's step as NVML reports it on Hopper
SETTLE_TOLERANCE = 0.005  # or this share of the clock, when larger than one step
BATCH_MS = 50.0  # replays queued between two syncs (and two NVML readings) while an arm is held


@dataclass(frozen=True)
class Held:
    """One arm held: its time per launch over the timed window and what the card said meanwhile."""

    ms_per_launch: float
    sm_clock_mhz: int | None  # median over the timed window's readings
    power_w: float | None
    throttled: bool  # a power or thermal limit held the clock in most of the window's readings (one a batch)
    settle_s: float  # GPU seconds replayed before the window (the clock settling)
    replays: int


def settled(window_clocks: list[float]) -> bool:
    """The clock has settled: the last two windows' median clocks within one step or ``SETTLE_TOLERANCE``."""
    if len(window_clocks) < 2:
        return False
    a, b = window_clocks[-2], window_clocks[-1]
    return abs(a - b) <= max(CLOCK_STEP_MHZ, SETTLE_TOLERANCE * max(a, b))


def hold(replay: Callable[[int], float], k: int, read: Callable[[], tuple], plan) -> Held:
    """Replay one arm's graph (``k`` launches a replay; ``replay(n)`` queues n replays and returns their GPU
    milliseconds) until its clock settles, then for ``plan.hold_s`` of GPU time. Replays go in batches of about
    ``BATCH_MS`` with one sync and one NVML reading (``read()``: clock, power, throttled) per batch, so the card is
    held busy rather than left idle between short replays."""
    first = replay(1)
    if not first > 0:
        raise RuntimeError(f"sustained: a replay of {k} launches took {first} ms; nothing to hold")
    n = max(1, math.ceil(BATCH_MS / first))
    spent, windows, window, window_ms = first, [], [], first
    while spent < plan.settle_max_s * 1e3:
        ms = replay(n)
        spent += ms
        window_ms += ms
        clock = read()[0]
        if clock is not None:
            window.append(clock)
        if window_ms >= SETTLE_WINDOW_MS:
            if window:
                windows.append(float(np.median(window)))
            window, window_ms = [], 0.0
            if spent >= plan.settle_s * 1e3 and (settled(windows) or not windows):
                break
    total, replays, readings = 0.0, 0, []
    while total < plan.hold_s * 1e3 or replays == 0:
        total += replay(n)
        replays += n
        readings.append(read())
    seen = summarize(readings)
    clock = seen.sm_clock_mhz
    return Held(total / (replays * k), None if clock is None else int(round(clock)), seen.power_w,
                seen.mostly_throttled, spent / 1e3, replays)


def sustained_seconds(plan, pairs: int, rounds: int) -> tuple[float, float]:
    """The GPU seconds a sustained block of ``pairs`` compared pairs over ``rounds`` rounds takes: (at least,
    at most), the clock settling at once or only at ``settle_max_s``. What a command states before it runs."""
    per_arm = (plan.settle_s + plan.hold_s, max(plan.settle_s, plan.settle_max_s) + plan.hold_s)
    return tuple(math.ceil(rounds * pairs * 2 * s) for s in per_arm)  # type: ignore[return-value]
