"""The public Python API: a rename sweep, a run directory, and callables compared on the GPU.

    from ptxprobe import api

    outcome = api.sweep("default", out="runs/mine", archs="sm_90a", repeat=1)
    run = api.open_run(outcome.out_dir)
    block = api.compare({"mine": mine, "theirs": theirs})

Every heavy import (the sweep's toolchain, pandas, torch) happens inside the call that needs it, so that
``from ptxprobe import api`` stays cheap. docs/api.md documents the records and the errors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ptxprobe.static.experiment import Experiment, load_experiment, override, parse_assignment

if TYPE_CHECKING:
    from ptxprobe.core.cache import Cache
    from ptxprobe.gpu.compare import Callables, TimedBlock, Timing
    from ptxprobe.gpu.timing import TimingPlan
    from ptxprobe.runs.rundir import RunDir
    from ptxprobe.static.experiment import Experiment
    from ptxprobe.static.sweep import SweepOutcome

__all__ = ["compare", "make_experiment", "open_run", "sweep", "time_callable", "time_callables"]


def _axis_value(axis: str, value) -> object:
    """An axis given to ``make_experiment``: a string read as ``-s axis=...`` reads it (``kernels=""`` is none,
    ``names="{base},cutlass_{base}"`` two templates, ``flags="-O3;-O0 -lineinfo"`` two flag sets); lists, numbers
    and booleans as they are (a flag set given as one string is split at spaces)."""
    if isinstance(value, str):
        return parse_assignment(f"{axis}={value}")[1]
    if axis == "flags" and isinstance(value, Iterable):
        return [f.split() if isinstance(f, str) else list(f) for f in value]
    return list(value) if isinstance(value, Iterable) and not isinstance(value, dict) else value


def make_experiment(experiment: str | os.PathLike | Experiment | None = "default", **overrides) -> Experiment:
    """An experiment (a shipped name, a TOML path, or an Experiment) with axes overridden as ``-s axis=values``
    would (``archs="sm_90a"``, ``names=["{base}", "cutlass_{base}"]``, ``repeat=1``, ``ptx_files=[path]``)."""
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
    return override(exp, {k: _axis_value(k, v) for k, v in overrides.items()}) if overrides else exp


def sweep(experiment: str | os.PathLike | Experiment | None = "default", out: str | os.PathLike | None = None, *,
          jobs: int | None = None, fresh: bool = False, progress: bool = False, cache: Cache | None = None,
          executor: str = "local", ray_address: str | None = None, **overrides) -> SweepOutcome:
    """Run (or resume) a static rename sweep into ``out`` (default: where the CLI puts it, ``runs/<experiment>``)
    and return its outcome (``out_dir``, ``rows``, ``ran``, ``skipped``, ``failed``...). ``overrides`` are axes, as in
    ``make_experiment``; ``executor="ray"`` joins the cluster at ``ray_address`` (None: a local Ray instance for
    this sweep). Raises ``SpecError`` for a bad experiment or axis, ``ToolNotFound`` without ptxas,
    ``RunDirBusy`` when another process writes ``out``."""
    from ptxprobe.static.sweep import default_out_dir, run_sweep

    exp = make_experiment(experiment, **overrides)
    return run_sweep(exp, out if out is not None else default_out_dir(exp), jobs=jobs, cache=cache,
                     progress=progress, fresh=fresh, executor=executor, ray_address=ray_address)


def open_run(path: str | os.PathLike) -> RunDir:
    """A run directory of any age and layout (a static sweep, a GPU run, or both) through one object: its rows
    (``static_rows()``, ``runtime_rows()``, ``static_table()``...) and files. See ``ptxprobe.runs.rundir``.
    Raises ``FileNotFoundError`` when ``path`` is no directory."""
    from ptxprobe.runs.rundir import RunDir

    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such run directory")
    return RunDir(path)


def compare(fns: Callables, *, baseline: str | None = None, rounds: int | None = None,
            plan: TimingPlan | None = None, **plan_fields) -> TimedBlock:
    """Two or more zero-argument callables timed against the baseline on the GPU, the sweep's way
    (``ptxprobe.gpu.compare.compare``). Raises ``NoGpu`` without a CUDA GPU."""
    from ptxprobe.gpu.compare import compare as run

    return run(fns, baseline=baseline, rounds=rounds, plan=plan, **plan_fields)


def time_callables(fns: Callables, *, rounds: int = 10, plan: TimingPlan | None = None,
                   **plan_fields) -> dict[str, Timing]:
    """Each callable's per-launch times, rounds in random order (``ptxprobe.gpu.compare.time_callables``)."""
    from ptxprobe.gpu.compare import time_callables as run

    return run(fns, rounds=rounds, plan=plan, **plan_fields)


def time_callable(fn: Callable[[], object], *, label: str | None = None, rounds: int = 10,
                  plan: TimingPlan | None = None, **plan_fields) -> Timing:
    """One callable's per-launch times (``ptxprobe.gpu.compare.time_callable``)."""
    from ptxprobe.gpu.compare import time_callable as run

    return run(fn, label=label, rounds=rounds, plan=plan, **plan_fields)
