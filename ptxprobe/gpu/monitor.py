"""NVML read in the background while a program runs: the regime of a program A/B's runs.

A program arm is a whole process that launches its own kernels, so there is no sample to read the card beside; a
thread reads NVML's SM clock, power and throttle reasons every ``PERIOD_S`` while the run lasts, and the run keeps
their summary (median clock and power, the share of readings throttled). Without NVML nothing is read and the
summary is empty (None), never an error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

PERIOD_S = 0.05


@dataclass(frozen=True)
class RunReadings:
    """What the card said while one run lasted."""

    sm_clock_mhz: float | None
    power_w: float | None
    throttled_share: float | None
    readings: int


NONE = RunReadings(None, None, None, 0)


def summarize(readings: list[tuple]) -> RunReadings:
    """NVML's (clock, power, throttled) readings of one run as medians and a share (pure)."""
    clocks = [r[0] for r in readings if r[0] is not None]
    powers = [r[1] for r in readings if r[1] is not None]
    read = [r for r in readings if r[0] is not None or r[1] is not None]
    if not read:
        return NONE
    return RunReadings(float(np.median(clocks)) if clocks else None, float(np.median(powers)) if powers else None,
                       sum(bool(r[2]) for r in read) / len(read), len(read))


class Monitor:
    """``with Monitor(read) as m: ...`` reads ``read()`` every ``period`` seconds on a thread; ``m.result`` then
    holds the run's summary. ``read`` is ``gpu.timing.Nvml().read`` (or None: nothing is read)."""

    def __init__(self, read, period: float = PERIOD_S):
        self._read, self._period = read, period
        self._stop = threading.Event()
        self._seen: list[tuple] = []
        self._thread: threading.Thread | None = None
        self.result = NONE

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._seen.append(self._read())
            self._stop.wait(self._period)

    def __enter__(self) -> Monitor:
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.result = summarize(self._seen)
