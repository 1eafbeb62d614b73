"""The public Python API: a rename sweep, a run directory, and callables compared on the GPU.

    from ptxprobe import api

    outcome = api.sweep("default", out="runs/mine", archs="sm_90a", repeat=1)
    run = api.open_run(outcome.out_dir)
    block = api.compare({"mine": mine, "theirs": theirs})

Every heavy import (the sweep's toolchain, pandas, torch) happens inside the call that needs it, so that
``from ptxprobe import api`` stays cheap. docs/api.md documents the records and the errors.

Beyond these calls, ``SURFACE`` declares what else of the package a script may use (our own study, under
experiments/, imports nothing else): the statistics, run directories, toolchain, PTX and cubin readers, the GPU
timing and calibration, tune's race, each by the name it is exported under, loaded when first asked for
(``from ptxprobe.api import stats, RunDir``). docs/api.md lists them, generated from this table.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ptxprobe.runs.request import SweepRequest, plan_sweep
from ptxprobe.static.experiment import Experiment, load_experiment, parse_assignment

if TYPE_CHECKING:
    from ptxprobe.core.cache import Cache
    from ptxprobe.gpu.compare import Callables, TimedBlock, Timing
    from ptxprobe.gpu.timing import TimingPlan
    from ptxprobe.runs.rundir import RunDir
    from ptxprobe.static.experiment import Experiment
    from ptxprobe.static.sweep import SweepOutcome

CALLS = ["compare", "make_experiment", "open_run", "sweep", "time_callable", "time_callables"]
# name -> "module" (the same name there), "module:attr" (exported under another name), "module:" (the module itself)
SURFACE: dict[str, str] = {
    # stats
    "EQUIVALENCE_MARGIN": "ptxprobe.stats.paired", "FASTER": "ptxprobe.stats.paired",
    "IDENTICAL_CODE": "ptxprobe.stats.paired", "Interval": "ptxprobe.stats.paired", "SLOWER": "ptxprobe.stats.paired",
    "VERDICT_RULE": "ptxprobe.stats.paired", "clock_slope": "ptxprobe.stats.regime",
    "cp_lower": "ptxprobe.stats.bounds", "cp_upper": "ptxprobe.stats.bounds", "serial": "ptxprobe.stats.serial:",
    "stats": "ptxprobe.stats.paired:",
    # runs
    "RunDir": "ptxprobe.runs.rundir",
    # core
    "Cache": "ptxprobe.core.cache", "KernelItem": "ptxprobe.core.items", "MANIFEST": "ptxprobe.core.store",
    "atomic_write": "ptxprobe.core.cache",
    "local_cluster": "ptxprobe.core.cluster", "problem_label": "ptxprobe.core.display",
    "read_log": "ptxprobe.core.store", "run_tool": "ptxprobe.core.proc", "sha256_file": "ptxprobe.core.cache",
    "sha256_text": "ptxprobe.core.cache",
    # toolchain
    "assemble": "ptxprobe.toolchain.assemble", "ptxas_argv": "ptxprobe.toolchain.assemble",
    "discover": "ptxprobe.toolchain.tools",
    "find_tool": "ptxprobe.toolchain.tools", "scan_ptxas": "ptxprobe.toolchain.scan:scan",
    "select_ptxas": "ptxprobe.toolchain.tools", "toolchain": "ptxprobe.toolchain.tools:",
    "triton_ptxas": "ptxprobe.toolchain.tools", "version_key": "ptxprobe.toolchain.tools",
    # ptx
    "TRIGGER": "ptxprobe.ptx.rename", "brace_span": "ptxprobe.ptx.text",
    "own_identifier": "ptxprobe.ptx.mangling", "trigger_origin": "ptxprobe.ptx.mangling",
    "apply_template": "ptxprobe.ptx.rename", "entries_of": "ptxprobe.ptx.text",
    "entry_of": "ptxprobe.ptx.text", "entry_params": "ptxprobe.ptx.text", "loops_of": "ptxprobe.ptx.plant",
    "pruned_to": "ptxprobe.ptx.text", "jit_reaches": "ptxprobe.ptx.text",
    "rename_entries": "ptxprobe.ptx.rename", "rename_entry": "ptxprobe.ptx.rename",
    # binary
    "Listing": "ptxprobe.binary.sass", "diff_listings": "ptxprobe.binary.diff", "disassemble": "ptxprobe.binary.sass",
    "parse_nvdisasm": "ptxprobe.binary.sass", "read_cubin": "ptxprobe.binary.cubin",
    # sources
    "Problem": "ptxprobe.sources.registry", "RegisteredSource": "ptxprobe.sources",
    "STAGE": "ptxprobe.sources.library", "extract_library": "ptxprobe.sources.library:extract",
    "family": "ptxprobe.sources.registry", "registry": "ptxprobe.sources.registry:", "sources_of": "ptxprobe.sources",
    "specialize": "ptxprobe.sources.triton",
    # static
    "DIFFERS": "ptxprobe.static.verdicts", "arch_order": "ptxprobe.static.verdicts",
    "experiment_from_dict": "ptxprobe.static.experiment", "load_experiment": "ptxprobe.static.experiment",
    "override": "ptxprobe.static.experiment", "recorded_axes": "ptxprobe.static.experiment",
    "run_sweep": "ptxprobe.static.sweep",
    # gpu
    "AA_LABELS": "ptxprobe.gpu.calibrate", "CLOCK_STEP_MHZ": "ptxprobe.gpu.sustained",
    "CRITERIA": "ptxprobe.gpu.calibrate", "CudaKernel": "ptxprobe.gpu.launchers", "Nvml": "ptxprobe.gpu.timing",
    "PairGraph": "ptxprobe.gpu.graphs", "GpuRunConfig": "ptxprobe.gpu.plan", "SIZE_RULE": "ptxprobe.gpu.calibrate",
    "Sampled": "ptxprobe.gpu.timing", "TimingPlan": "ptxprobe.gpu.timing", "Unit": "ptxprobe.gpu.graphs",
    "cubin_for": "ptxprobe.gpu.launchers", "device_arch": "ptxprobe.gpu.device", "gpu_info": "ptxprobe.gpu.device",
    "launch_ms": "ptxprobe.gpu.graphs", "look_halfwidths": "ptxprobe.gpu.timing",
    "look_rounds": "ptxprobe.gpu.timing", "look_stops": "ptxprobe.gpu.timing",
    "names_compared": "ptxprobe.gpu.calibrate",
    "order_batches": "ptxprobe.gpu.timing", "paired_readings": "ptxprobe.gpu.timing",
    "plant_delivered": "ptxprobe.gpu.calibrate",
    "pooled_calibration": "ptxprobe.gpu.calibrate:pooled", "registered_workload": "ptxprobe.gpu.workload",
    "run_config": "ptxprobe.gpu.plan", "stop_reason": "ptxprobe.gpu.timing",
    "summarize_calibration": "ptxprobe.gpu.calibrate:summarize", "time_block": "ptxprobe.gpu.timing",
    "triton_compiled": "ptxprobe.gpu.launchers", "unit_for": "ptxprobe.gpu.timing",
    "with_cubin": "ptxprobe.gpu.launchers",
    # capture
    "ProgramRun": "ptxprobe.capture.ab:Run", "compare_program_runs": "ptxprobe.capture.ab:compare",
    # tune
    "CONFIRMED": "ptxprobe.tune.proof", "Candidate": "ptxprobe.tune.prune", "RACED_FAMILY": "ptxprobe.tune.race",
    "RacePlan": "ptxprobe.tune.race", "RaceResult": "ptxprobe.tune.race", "Standing": "ptxprobe.tune.race",
    "chosen": "ptxprobe.tune.answer", "compare_arms": "ptxprobe.tune.apply", "judged": "ptxprobe.tune.race",
    "prediction_check": "ptxprobe.tune.apply", "proved": "ptxprobe.tune.proof",
    "race_candidates": "ptxprobe.tune.race:race", "race_logs": "ptxprobe.tune.program",
    "rung_level": "ptxprobe.tune.race", "standing": "ptxprobe.tune.race",
    # reduce
    "holds": "ptxprobe.reduce.keep", "parse_keep": "ptxprobe.reduce.keep",
    "ptx_structure": "ptxprobe.reduce.remains:structure", "with_baseline_fields": "ptxprobe.reduce.keep",
    # reports
    "repro": "ptxprobe.reports.repro:",
}
__all__ = [*CALLS, *SURFACE]


def surface_target(name: str) -> tuple[str, str | None]:
    """(module, attribute) a surface name stands for; attribute None: the module itself."""
    spec = SURFACE[name]
    if ":" not in spec:
        return spec, name
    module, _, attr = spec.partition(":")
    return module, attr or None


def __getattr__(name: str):
    """A surface name, imported when first asked for (``from ptxprobe.api import stats`` loads ptxprobe.stats.paired
    then, not when ``ptxprobe.api`` is imported)."""
    if name not in SURFACE:
        raise AttributeError(f"module 'ptxprobe.api' has no attribute {name!r}")
    module, attr = surface_target(name)
    value = importlib.import_module(module)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *SURFACE})


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
    would (``archs="sm_90a"``, ``names=["{base}", "cutlass_{base}"]``, ``repeat=1``, ``ptx_files=[path]`` or
    ``[KernelItem(path, entry, spec)]``). Your own kernels without ``names`` get the names the command line gives
    them: where their symbols already hold the trigger, the trigger-free spelling as the baseline
    (``runs.request.names_for_triggered_entries``)."""
    return plan_sweep(_request(experiment, overrides)).experiment


def _request(experiment, overrides: dict, **fields) -> SweepRequest:
    """The static sweep the API asks for, as the command line would ask for it (``runs.request.plan_sweep`` then
    checks it and chooses the names the CLI chooses)."""
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
    return SweepRequest(experiment=exp, axes={k: _axis_value(k, v) for k, v in overrides.items()}, run=False,
                        **fields)


def sweep(experiment: str | os.PathLike | Experiment | None = "default", out: str | os.PathLike | None = None, *,
          jobs: int | None = None, fresh: bool = False, progress: bool = False, cache: Cache | None = None,
          executor: str = "local", ray_address: str | None = None, **overrides) -> SweepOutcome:
    """Run (or resume) a static rename sweep into ``out`` (default: where the CLI puts it, ``runs/<experiment>``)
    and return its outcome (``out_dir``, ``rows``, ``ran``, ``skipped``, ``failed``...). ``overrides`` are axes, as in
    ``make_experiment``; ``executor="ray"`` joins the cluster at ``ray_address`` (None: a local Ray instance for
    this sweep). Raises ``SpecError`` for a bad experiment or axis, ``ToolNotFound`` without ptxas,
    ``RunDirBusy`` when another process writes ``out``."""
    from ptxprobe.static.sweep import default_out_dir, run_sweep

    plan = plan_sweep(_request(experiment, overrides, use_cache=cache is None or cache.enabled))
    exp = plan.experiment
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
