"""NVML read in the background while a program runs (the regime of a program A/B's runs), and the summary of a
stretch of readings that a program run and a held arm (``gpu.sustained``) both keep.

A program arm is a whole process that launches its own kernels, so there is no sample to read the card beside; a
thread reads NVML's SM clock, power, throttle reasons and whether a kernel ran (``program_reader``) every
``PERIOD_S`` while the run lasts, and the run keeps their summary (median clock and power, the share of readings
throttled) over the readings taken while the card was busy: a program's run is mostly host work (imports, a JIT
compile that takes 20 s where its timed launches take 0.1-2 s), and the card idling meanwhile (an H100 at 120 W of
its 700) is not the regime its kernels ran in. All readings count when none was busy. Without NVML nothing is read
and the summary is empty (None), never an error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ptxprobe.stats.regime import median_of

PERIOD_S = 0.05


@dataclass(frozen=True)
class RunReadings:
    """What the card said while one run lasted."""

    sm_clock_mhz: float | None
    power_w: float | None
    throttled_share: float | None
    readings: int

    @property
    def mostly_throttled(self) -> bool:
        return mostly_throttled(self.throttled_share)


NONE = RunReadings(None, None, None, 0)


def mostly_throttled(share: float | None) -> bool:
    """A power or thermal limit held the clock in most of a stretch's readings: its one throttled flag."""
    return bool(share and share > 0.5)


def summarize(readings: list[tuple]) -> RunReadings:
    """NVML's (clock, power, throttled[, busy]) readings over one stretch (a program run, an arm's held window) as
    medians and a share (pure): over the busy readings when the stretch has any that say so."""
    read = [r for r in readings if r[0] is not None or r[1] is not None]
    read = [r for r in read if len(r) > 3 and r[3]] or read
    if not read:
        return NONE
    return RunReadings(median_of(r[0] for r in read), median_of(r[1] for r in read),
                       sum(bool(r[2]) for r in read) / len(read), len(read))


def program_reader(nvml):
    """``Monitor``'s reading for a program run: ``nvml.read()`` (a ``gpu.timing.Nvml``) and whether a kernel ran."""

    def read() -> tuple:
        return (*nvml.read(), nvml.busy())

    return read


class Monitor:
    """``with Monitor(read) as m: ...`` reads ``read()`` every ``period`` seconds on a thread; ``m.result`` then
    holds the run's summary. ``read`` is ``program_reader(Nvml())`` or ``Nvml().read`` (or None: nothing is read)."""

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
