"""``tune`` as one plan: the request resolved (sources, space, output), the static sweep of every candidate, the
pruning, and on a GPU the race of every kernel; ``DIR/tuned.json`` written from the records.

The static sweep is the sweep (``static.sweep.run_sweep`` into ``DIR/static``, resumable and cached) over the
space's names x ptxas x flags, one assembly each; a GPU re-assembles the timed PTX (cache hits) and races it.
Without a GPU the answer is the pruning alone, and says so.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import NoGpu, SpecError, ToolNotFound
from ptxprobe.gpu.device import device_arch, gpu_info
from ptxprobe.gpu.plan import plan_groups, run_config
from ptxprobe.gpu.sustained import sustained_seconds
from ptxprobe.gpu.timing import effective
from ptxprobe.records.tuned import TunedDocument
from ptxprobe.runs.request import SweepPlan, SweepRequest, UserKernels, plan_sweep
from ptxprobe.static.experiment import override
from ptxprobe.stats.regime import SUSTAINED
from ptxprobe.toolchain.tools import CUDA_RELEASE, discover, install, nvcc_ptxas, select_ptxas, version_matches
from ptxprobe.tune.answer import NUMERICS_MODES, document, interrupted, static_answer, write_tuned
from ptxprobe.tune.proof import ProofPlan
from ptxprobe.tune.prune import candidates_from_rows, prune
from ptxprobe.tune.race import RacePlan
from ptxprobe.tune.space import DEFAULT_OPTION_SETS, TuneSpace, build_space

STATIC_DIR = "static"
NOT_RACED_INTERRUPTED = "not raced: interrupted"  # the note of a kernel an interrupted race did not reach
RACE_INTERRUPTED = ("interrupted during the race or its proof: the kernels raced by then keep the rungs they "
                    "completed (unproven: yours stays), the rest their static answers")
_SPACE_AXES = ("names", "ptxas", "flags", "repeat", "max_repeat")


@dataclass(frozen=True, kw_only=True)
class TuneRequest:
    """``tune`` as asked for: the sources (as a sweep takes them), the space's axes, the gate, the race, where."""

    out: str
    experiment: str = "default"
    axes: Mapping[str, object] = field(default_factory=dict)  # typed axis values (the CLI reads -s into them)
    kernels: UserKernels = field(default_factory=UserKernels)
    names: tuple[str, ...] | None = None
    ptxas: tuple[str, ...] | None = None  # releases besides the user's own (None: every installed one)
    option_sets: tuple[tuple[str, ...], ...] = DEFAULT_OPTION_SETS  # yours (none) first; the CLI reads --options
    numerics: str = "bitwise"
    race: RacePlan = field(default_factory=RacePlan)
    run: bool | None = None  # None: race on a GPU when one is visible; False: static pruning only
    jobs: int | None = None
    timeout: float = 600.0
    use_cache: bool = True
    fresh: bool = False
    regime: str | None = None  # the proof's regime (burst, sustained; None: the experiment's own); races are bursts


@dataclass(frozen=True)
class TunePlan:
    sweep: SweepPlan  # the static sweep of every candidate (its experiment carries the space's axes)
    space: TuneSpace
    out: Path
    request: TuneRequest


def plan_tune(req: TuneRequest) -> TunePlan:
    """Resolve a request; bad input (an empty space, an unknown gate, axes set twice) refused before any work."""
    if req.numerics not in NUMERICS_MODES:
        raise SpecError(f"--numerics {req.numerics!r}: choose {' or '.join(NUMERICS_MODES)}")
    clash = [a for a in req.axes if a in _SPACE_AXES]
    if clash:
        raise SpecError(f"-s {clash[0]}=...: tune sets names, ptxas and flags itself (use --names, --ptxas, "
                        "--options)")
    given = [s for s in req.ptxas or () if s.strip()]
    user_ptxas = "nvcc" if req.kernels.cu else "triton"
    out = Path(req.out)
    sweep = plan_sweep(SweepRequest(experiment=req.experiment, axes=req.axes, kernels=req.kernels,
                                    out=str(out / STATIC_DIR), jobs=req.jobs, timeout=req.timeout,
                                    use_cache=req.use_cache, fresh=req.fresh,
                                    run=req.run, names_set_later=True, regime=req.regime))
    user_flags = tuple(sweep.experiment.flags[0])
    space = build_space(req.names, user_ptxas, tuple(given) if req.ptxas is not None else None,
                        req.option_sets, user_flags)
    exp = override(sweep.experiment, space.sweep_axes())
    return TunePlan(replace(sweep, experiment=exp), space, out, req)


@dataclass(frozen=True)
class TuneOutcome:
    doc: TunedDocument
    path: Path
    interrupted: bool
    emit_errors: tuple[str, ...]
    static_only_reason: str | None  # why nothing was raced (no GPU, --no-run), None when a GPU raced


def install_missing(entries: tuple[str, ...] | None, notify=lambda text: None) -> list[str]:
    """``--install``: the releases named in ``--ptxas`` that no installed ptxas matches, installed from their pip
    wheels (``ptxprobe toolchain install``) before anything is planned; the versions installed."""
    have = [t.version for t in discover(("ptxas",))]
    wanted = [e.strip() for e in entries or () if re.fullmatch(CUDA_RELEASE, e.strip())]
    missing = [v for v in dict.fromkeys(wanted) if not any(version_matches(h, v) for h in have)]
    for v in missing:
        notify(f"installing ptxas {v} (its pip wheel)")
        install(v, ("ptxas",))
    return missing


def user_ptxas_sha(space: TuneSpace, archs: set[str]) -> dict[str, str]:
    """The sha256 of the user's own ptxas per arch (its configuration is the first name with it, no options)."""
    return {arch: select_ptxas(arch, space.ptxas[0])[0].sha256 for arch in archs}


def static_pruning(plan: TunePlan, cache: Cache, progress: bool = False):
    """The static sweep of every candidate and its pruning: (the sweep's outcome, (kernel, arch) -> Pruned, the
    ptxas binaries by sha256 with where they live)."""
    from ptxprobe.static.sweep import run_sweep

    req = plan.request
    outcome = run_sweep(plan.sweep.experiment, plan.sweep.out, jobs=req.jobs, cache=cache, timeout=req.timeout,
                        progress=progress, argv=sys.argv, fresh=req.fresh)
    rows = list(outcome.rows)
    by_kernel = candidates_from_rows(rows, plan.space, user_ptxas_sha(plan.space, {r["arch"] for r in rows}))
    ptxas = {r["ptxas_sha256"]: {"version": r["ptxas_version"]} for r in rows}
    _ptxas_paths(ptxas)
    return outcome, {key: prune(cands) for key, cands in by_kernel.items()}, ptxas


def run_tune(plan: TunePlan, progress: bool = False, notify=lambda text: None) -> TuneOutcome:
    """The static sweep, the pruning, and the race on a GPU when there is one; tuned.json written."""
    req = plan.request
    cache = Cache(enabled=req.use_cache)
    outcome, static, ptxas = static_pruning(plan, cache, progress)
    records: list[dict] = []
    gpu_info, why_static, race_interrupted = None, static_only(outcome, req.run), False
    if why_static is None:
        try:
            gpu_info, records, race_interrupted = _race_on_gpu(plan, cache, notify)
        except NoGpu as exc:
            why_static = f"{exc}".replace("static results only", "static pruning only")
    timed = {(r["kernel"], r["arch"]) for r in records}
    untimed = {"note": NOT_RACED_INTERRUPTED} if race_interrupted else None
    records += [static_answer(p, untimed) for key, p in static.items() if key not in timed]
    return finish(plan, outcome, ptxas, records, gpu=gpu_info, why_static=why_static,
                  race_interrupted=race_interrupted, race_plan=None if gpu_info is None else asdict(req.race),
                  numerics=req.numerics)


def static_only(outcome, run: bool | None) -> str | None:
    """Why a tune answers by static pruning alone (an interrupted sweep, --no-run), before any race; None: race."""
    if outcome.interrupted:
        return "interrupted"
    return "--no-run: static pruning only" if run is False else None


def finish(plan: TunePlan, outcome, ptxas: dict, records: list[dict], *, gpu: dict | None, why_static: str | None,
           race_interrupted: bool, race_plan: dict | None, numerics: str, program: dict | None = None) -> TuneOutcome:
    """The last stage of every tune, of sources or of a program: tuned.json from the kernels' records (``program``:
    what a program tune adds about its program), written; the outcome the CLI renders."""
    doc = document(records, space=plan.space.to_json(), ptxas=ptxas, gpu=gpu, static_dir=str(plan.sweep.out),
                   note=why_static or (RACE_INTERRUPTED if race_interrupted else ""), race_plan=race_plan,
                   argv=list(sys.argv), numerics=numerics, program=program)
    path = write_tuned(plan.out, doc)
    return TuneOutcome(doc, path, outcome.interrupted or race_interrupted, tuple(outcome.emit_errors), why_static)


def gpu_facts(info: dict | None = None) -> dict | None:
    """The GPU a tune ran on as tuned.json keeps it: these facts of ``info``, or of this machine's first GPU (None
    without one: a program tune needs no GPU of ptxprobe's own)."""
    if info is None:
        try:
            info = gpu_info(0)
        except NoGpu:
            return None
    return {k: info.get(k) for k in ("gpu", "arch", "driver", "torch", "cuda_runtime")}


def _ptxas_paths(ptxas: dict) -> None:
    """Where each ptxas binary of the answer lives on this machine (apply assembles with it again)."""
    found = list(discover(("ptxas",)))
    try:
        found.append(nvcc_ptxas())
    except ToolNotFound:  # no CUDA toolkit here: no --cu source was swept either
        pass
    for t in found:
        if t.sha256 in ptxas:
            ptxas[t.sha256].update(path=t.path, origin=t.origin)


def _race_on_gpu(plan: TunePlan, cache: Cache, notify) -> tuple[dict, list[dict], bool]:
    """Every kernel of the GPU's arch, at every problem its [run] table or launch spec gives, raced; whether an
    interrupt (Ctrl-C) ended it (the kernels raced by then keep their answers, the rest their static ones)."""
    from ptxprobe.tune.gpu import tune_group

    arch = device_arch(0)  # NoGpu without one
    info = gpu_info(0)
    cfg = run_config(getattr(plan.sweep.experiment, "run", None))
    exp = replace(plan.sweep.experiment, ptxas=(plan.space.ptxas[0],))  # one group per source and problem
    groups, notes = plan_groups(exp, cfg, arch)
    for note in notes:
        notify(note)
    if groups and cfg.timing.regime == SUSTAINED:  # the proof's cost, said before anything is timed
        first = ProofPlan.after(plan.request.race)
        per = [sustained_seconds(effective(cfg.timing), 1, n)[0] for n in (first.first_rounds, first.max_rounds)]
        notify(f"sustained proofs: each arm held {cfg.timing.hold_s:g} s after at least {cfg.timing.settle_s:g} s of "
               f"settling, every round; about {per[0]}-{per[1]} GPU s per kernel proven ({first.first_rounds} to "
               f"{first.max_rounds} rounds), on top of its race in bursts")
    if not groups:
        raise NoGpu(f"nothing to time on this GPU ({arch}): the kernels are built for other archs or have no "
                    "[launch] table; static pruning only")
    records: list[dict] = []
    for g in groups:
        notify(f"racing {g.group_id}")
        try:
            rec = tune_group(g, plan.space, cfg, plan.request.race, plan.request.numerics, info, cache, log=notify)
        except KeyboardInterrupt:  # before this kernel's first rung: it keeps its static answer
            return gpu_facts(info), records, True
        records.append(rec)
        if interrupted(rec):  # in its race or its proof: the kernels after it keep their static answers
            return gpu_facts(info), records, True
    return gpu_facts(info), records, False

