"""``tune -o DIR -- python prog.py``: a whole program tuned by its own measure, kernel by kernel.

The program is run once with the capture knobs (``capture.program``): every Triton and CuTe DSL kernel it compiles
is kept as PTX. Those PTX files are the sources of the static sweep (names x ptxas x options, ``tune.run``'s
``static_pruning``), pruned to distinct machine codes. Captured kernels have no launch spec, so they cannot be
timed alone: the race's ``measure`` runs the whole program instead, each contender's cubins swapped in by the
capture hook (``capture.swap``, the other kernels left as the user has them), every round each arm once in a
fresh random order, the paired log ratio of the user's arm's measure (its wall time, or ``--metric``) over the
contender's. A first round is the gate: a configuration the program fails with, or that the hook cannot swap in,
is left out with the program's own words. The race's choice is then proven on program runs the race never saw
(``tune.proof``; kept apart as ``proof_calls``), and that decides. The answer is ``tuned.json`` as ``tune`` writes
it, so ``apply`` and the program A/B that ``tune`` ends with take it unchanged.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ptxprobe.capture.ab import MIN_ROUNDS, Run, resolution_floor, run_rounds, to_resolution
from ptxprobe.capture.program import CUTE_FRONTEND, CapturedKernel, run_program
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError, ToolFailed
from ptxprobe.gpu.timing import Nvml
from ptxprobe.runs.request import UserKernels
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import PROGRAM, Regime, regime_of
from ptxprobe.tune.answer import (
    adjusted_over_kernels,
    chosen,
    interrupted,
    kernel_answer,
    static_answer,
)
from ptxprobe.tune.apply import Assembler, build_swap, program_env, write_arm
from ptxprobe.tune.proof import Proof, proved
from ptxprobe.tune.prune import Candidate, Pruned, arranged, prune
from ptxprobe.tune.race import RacePlan, race
from ptxprobe.tune.run import (
    NOT_RACED_INTERRUPTED,
    TuneOutcome,
    TuneRequest,
    finish,
    gpu_facts,
    plan_tune,
    static_only,
    static_pruning,
)
from ptxprobe.tune.space import TuneSpace

CAPTURE_DIR, ARMS_DIR = "capture", "arms"
PROGRAM_GATE = "program"  # the gate's name in tuned.json: the program's own checks, and the hook's swap
SWAPPABLE = ("triton", "gluon", CUTE_FRONTEND)  # the frontends whose kernels capture.swap loads in the program


@dataclass(frozen=True)
class ProgramRace:
    """How the program is raced: its command, measure and time limit; the race's rounds."""

    argv: tuple[str, ...]
    metric: str | None
    timeout: float
    plan: RacePlan
    seed: int = 0
    arch: str | None = None  # a CuTe DSL program's target, pinned (CUTE_DSL_ARCH)


def program_race_plan(rounds: int, prefer: str) -> RacePlan:
    """The race of a program: ``MIN_ROUNDS`` rounds first (fewer give no usable interval; the race raises it to
    what its number of codes needs, ``stats.decisive_rounds``), then successive halving up to ``rounds`` per
    contender, aiming at the ±0.5 % the proof needs."""
    first = MIN_ROUNDS
    return RacePlan(first_rounds=first, eta=2, growth=1, max_rounds=max(first, rounds),
                    target_halfwidth=stats.EQUIVALENCE_MARGIN, prefer=prefer)


def captured_sources(argv: list[str], out: Path, timeout: float, arch: str | None = None
                     ) -> tuple[list, UserKernels]:
    """Run the program once with the capture knobs: its kernels, and their PTX files as the sweep's sources."""
    kernels, _ = run_program(argv, out / CAPTURE_DIR, timeout, arch)
    files = tuple(dict.fromkeys(str((out / CAPTURE_DIR / k.ptx).resolve()) for k in kernels))
    return kernels, UserKernels(ptx=files)


def race_program(static: dict[tuple, Pruned], kernels: list, assembler: Assembler, race_: ProgramRace, out: Path,
                 cache: Cache, log=lambda text: None) -> tuple[list[dict], bool]:
    """Each captured kernel with something to race, raced inside the program: its tuned.json records, and whether
    an interrupt (Ctrl-C) ended the race (the kernels raced by then keep the rungs they completed)."""
    records: list[dict] = []
    items = list(static.items())
    for i, ((_, _arch), pruned) in enumerate(items):
        if pruned.user is None:
            raise ToolFailed(f"{pruned.kernel}: your own configuration did not assemble (see the static sweep)")
        k = _captured(pruned, kernels)
        contenders = [c for c in pruned.distinct if not c.is_user]
        target = {"entry": pruned.user.name, "source_kind": "program"}
        if k is not None and k.frontend not in SWAPPABLE and contenders:
            log(f"{k.entry[:60]}: {k.frontend} kernels are not raced (the capture hook swaps {', '.join(SWAPPABLE)} "
                "kernels only); its distinct codes are in tuned.json")
            target["note"] = f"not raced: the capture hook cannot swap a {k.frontend} kernel into the program"
        if k is not None and not contenders:  # one machine code: yours, with nothing to race (the program not run)
            records.append(kernel_answer(pruned, race([], _never), nums={}, gate={}, numerics=PROGRAM_GATE,
                                         gpu_seconds=0.0, wall_seconds=0.0, prefer=race_.plan.prefer,
                                         target={**target, "group_id": k.entry, "entry": k.entry,
                                                 "ptx_sha256": k.ptx_sha256, "frontend": k.frontend}))
            continue
        if k is None or "note" in target:
            records.append(static_answer(pruned, target))
            continue
        try:
            rec = _race_kernel(pruned, contenders, k, assembler, race_, out, cache, log)
        except KeyboardInterrupt:  # before its arms were built: this kernel and the rest keep their static answers
            return records + _static_records([p for _, p in items[i:]], NOT_RACED_INTERRUPTED), True
        records.append(rec)
        if interrupted(rec) or rec.get("note") == NOT_RACED_INTERRUPTED:
            return records + _static_records([p for _, p in items[i + 1:]], NOT_RACED_INTERRUPTED), True
    return records, False


def _never(labels, rounds):  # the measure of a race with nothing in it
    raise AssertionError("nothing to measure")


def _static_records(pruned: list[Pruned], note: str | None = None) -> list[dict]:
    """Program kernels answered by static pruning alone (no race ran: --no-run, or an interrupt; ``note`` says so)."""
    return [static_answer(p, {"entry": p.user.name if p.user else None, "source_kind": "program",
                              **({"note": note} if note else {})}) for p in pruned]


def loadable(pruned: Pruned, kernels: list[CapturedKernel], space: TuneSpace) -> Pruned:
    """A CuTe DSL kernel's host code finds it by its own name, so only names of that length can be loaded into the
    program (``binary.symbols.respelled``): the others are pruned as not loadable before representatives are chosen,
    and a code they share with a loadable candidate is raced under that one."""
    k = _captured(pruned, kernels) if pruned.user is not None else None
    if k is None or k.frontend != CUTE_FRONTEND:
        return pruned
    own = len(pruned.user.name)
    cands = arranged([*pruned.distinct, *(pc.candidate for pc in pruned.pruned)], space)
    return prune(cands, lambda c: None if len(c.name) == own else
                 f"{len(c.name)} characters where the DSL's own name has {own}: its host code looks the kernel up by "
                 "that name")


def _captured(pruned: Pruned, kernels: list):
    """The captured kernel a pruned source is: its PTX file (the sweep labels a PTX file by its name) and entry;
    one entry compiled in several specialisations is several files, each raced on its own."""
    for k in kernels:
        if k.entry == pruned.user.name and pruned.kernel.split(":")[0] == Path(k.ptx).name:
            return k
    return next((k for k in kernels if k.entry == pruned.user.name), None)


def program_arms(pruned: Pruned, contenders: list[Candidate], k, assembler: Assembler, out: Path, cache: Cache
                 ) -> tuple[Path, dict[str, str], dict, dict[str, str]]:
    """Each configuration assembled from the captured PTX into an arm the capture hook swaps into the program:
    (the arms' folder, label -> arm id, label -> arm, label -> why it cannot be loaded). The user's must load;
    every arm's machine code must be the one the static sweep pruned."""
    ptx = (out / CAPTURE_DIR / k.ptx).read_text()
    arms_dir = out / ARMS_DIR / k.ptx_sha256[:12]
    ids = {c.label: f"c{i}" for i, c in enumerate([pruned.user, *contenders])}
    arms, unswappable = {}, {}
    for c in [pruned.user, *contenders]:
        try:
            swap = build_swap(ptx, k.entry, k.ptx_sha256, {"config": c.to_json(), "ptx_sha256": k.ptx_sha256},
                              "config", assembler, arms_dir, cache, k.frontend)
        except SpecError as exc:  # the name found outside the cubin's string tables (``loadable`` prunes the lengths)
            if c.is_user:
                raise
            unswappable[c.label] = f"cannot be loaded into the program: {exc}"
            continue
        if not swap.verified:  # the program's PTX is the swept one: ptxas must give the code that was pruned
            raise ToolFailed(f"{k.entry}: assembled again as {c.label}, ptxas gave other machine code than the "
                             "static sweep's")
        arms[c.label] = write_arm(ids[c.label], [swap], arms_dir)
    return arms_dir, ids, arms, unswappable


def _race_kernel(pruned: Pruned, contenders: list[Candidate], k, assembler: Assembler, race_: ProgramRace, out: Path,
                 cache: Cache, log) -> dict:
    started = time.perf_counter()
    arms_dir, ids, arms, unswappable = program_arms(pruned, contenders, k, assembler, out, cache)
    contenders = [c for c in contenders if c.label not in unswappable]
    env = program_env(arms_dir, race_.arch)
    seconds, calls = [0.0], []  # every call's runs, the gate's first: what the standings are computed from
    proof_calls: list = []  # the proof's runs, apart: rounds the race never saw

    def rounds_of(labels, n, into=calls):
        chosen = [arms[pruned.user.label], *(arms[x] for x in labels)]
        key = f"{k.entry}#{len(calls)}" if into is calls else f"{k.entry}#proof{len(into)}"
        runs: list[Run] = []
        into.append(runs)  # each run kept as it finishes: an interrupt loses none of them
        try:
            run_rounds(list(race_.argv), chosen, arms_dir, n, race_.timeout, race_.metric,
                       seed=stats.stable_seed(race_.seed, key), env_extra=env, log=log, runs=runs)
        finally:
            seconds[0] += sum(r.seconds for r in runs)
        return runs

    def program_runs() -> dict:
        return {"arms": {i: label for label, i in ids.items()}, "user_arm": user_id,
                "calls": [[asdict(r) for r in c] for c in calls],
                "proof_calls": [[asdict(r) for r in c] for c in proof_calls]}

    gate_runs = rounds_of([c.label for c in contenders], 1)
    failed = {r.arm: r.note or "no measure" for r in gate_runs if r.value is None}
    user_id = ids[pruned.user.label]
    if user_id in failed:
        raise ToolFailed(f"the program failed with your own configuration of {k.entry} swapped in: {failed[user_id]}")
    gate = {c.label: f"the program with it: {failed[ids[c.label]]}" for c in contenders if ids[c.label] in failed}
    gate.update(unswappable)
    racing = [c.label for c in contenders if c.label not in gate]
    log(f"{k.entry}: {len(pruned.distinct)} distinct codes, {len(racing)} pass the program's own run")

    def measure(labels, n, into=calls):
        runs = rounds_of(labels, n, into)
        bad = next((r for r in runs if r.value is None), None)
        if bad is not None:
            raise ToolFailed(f"the program failed in the {'race' if into is calls else 'proof'} (arm {bad.arm}, "
                             f"round {bad.round + 1}): {bad.note}")
        logs = paired_logs({(r.arm, r.round): r.value for r in runs}, user_id)
        return {x: logs[ids[x]] for x in labels}

    target = {"group_id": k.entry, "source_kind": "program", "entry": k.entry, "ptx_sha256": k.ptx_sha256,
              "frontend": k.frontend, "command": list(race_.argv), "metric": race_.metric or "wall seconds"}
    try:
        result = race(racing, measure, race_.plan)
    except KeyboardInterrupt:  # before the first rung ended: no standings, but the runs that finished are kept
        return {**static_answer(pruned, {**target, "note": NOT_RACED_INTERRUPTED, "program_runs": program_runs()}),
                "gpu_seconds": seconds[0]}
    choice = chosen(result, {c.label: c for c in pruned.distinct}, pruned.user, race_.plan.prefer)
    proof, cut = proved(choice, result, race_.plan, lambda labels, n: measure(labels, n, proof_calls), log)
    target["program_runs"] = runs_kept = program_runs()
    if proof is not None:  # an interval narrower than the metric's printed digits, widened to their rounding
        proof = to_printed_digits(proof, proof_pairs(runs_kept["proof_calls"], user_id, ids[proof.label]),
                                  race_.plan.margin)
    regime = (proof_regime(runs_kept["proof_calls"], user_id, ids[proof.label], Nvml().power_limit_w())
              if proof is not None else None)
    return kernel_answer(pruned, result, nums={}, gate=gate, numerics=PROGRAM_GATE, gpu_seconds=seconds[0],
                         wall_seconds=time.perf_counter() - started, prefer=race_.plan.prefer, target=target,
                         proof=proof, proof_interrupted=cut, regime=regime)


def proof_pairs(proof_calls: list[list[dict]], user_arm: str, arm: str) -> list[tuple[Run, Run]]:
    """A program tune's proof as its kept runs give it: (yours, ``arm``'s) run of every round both measured."""
    pairs = []
    for call in proof_calls:
        by = {(r["arm"], r["round"]): Run(**r) for r in call}
        for (a, rnd), run in sorted(by.items()):
            mine = by.get((user_arm, rnd))
            if a == arm and mine and run.value and mine.value:
                pairs.append((mine, run))
    return pairs


def to_printed_digits(proof: Proof, pairs: list[tuple[Run, Run]], margin: float) -> Proof:
    """The proof with its interval widened to what the metric's printed digits can resolve
    (``capture.ab.to_resolution``), its p raised and its verdict taken again; unchanged where the digits suffice."""
    iv, p = to_resolution(stats.Interval(proof.ratio, proof.low, proof.high, proof.level), proof.p_value,
                          resolution_floor(pairs))
    if (iv.low, iv.high) == (proof.low, proof.high):
        return proof
    return replace(proof, low=iv.low, high=iv.high, p_value=p, verdict=stats.decide(iv, margin))


def proof_regime(proof_calls: list[list[dict]], user_arm: str, arm: str, power_limit_w: float | None) -> Regime | None:
    """The regime of a program tune's proof: its runs of ``arm`` paired round by round with yours, each with what the
    card said while it ran (``capture.ab.Run``'s readings; runs recorded before them read as none)."""
    pairs = proof_pairs(proof_calls, user_arm, arm)
    logs = [math.log(mine.value / run.value) for mine, run in pairs]
    return (regime_of(PROGRAM, logs, [m.reading() for m, _ in pairs], [r.reading() for _, r in pairs], power_limit_w)
            if logs else None)


def run_program_tune(req: TuneRequest, race_: ProgramRace, progress: bool = False,
                     notify=lambda text: None) -> TuneOutcome:
    """Capture, sweep and prune the program's kernels, race each inside the program; tuned.json written."""
    out = Path(req.out)
    cache = Cache(enabled=req.use_cache)
    kernels, sources = captured_sources(list(race_.argv), out, race_.timeout, race_.arch)
    notify(f"the program compiled {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}: "
           + ", ".join(k.entry[:60] for k in kernels[:4])
           + (" ..." if len(kernels) > 4 else ""))
    plan = plan_tune(replace(req, kernels=sources, run=False))
    outcome, static, ptxas = static_pruning(plan, cache, progress)
    static = {key: loadable(p, kernels, plan.space) for key, p in static.items()}
    assembler = Assembler(ptxas, tuple(plan.space.user_flags))
    why_static = static_only(outcome, req.run)
    records, race_interrupted = (
        race_program(static, kernels, assembler, race_, out, cache, notify) if why_static is None
        else (_static_records(list(static.values())), False))
    records = adjusted_over_kernels(records, race_.plan.margin)  # the program's kernels are one family
    return finish(plan, outcome, ptxas, records, gpu=gpu_facts(), why_static=why_static,
                  race_interrupted=race_interrupted, race_plan=None if why_static else asdict(race_.plan),
                  numerics=PROGRAM_GATE, program={"command": list(race_.argv),
                                                  "metric": race_.metric or "wall seconds",
                                                  "capture": str(out / CAPTURE_DIR)})


def race_logs(rec: dict) -> dict[str, list[float]]:
    """A program-raced kernel's per-round log ratios (yours over the contender) by contender label, from the runs
    its record keeps (the gate call left out): what its standings were computed from."""
    pr = rec["program_runs"]
    logs: dict[str, list[float]] = {}
    for runs in pr["calls"][1:]:
        for arm, x in paired_logs({(r["arm"], r["round"]): r["value"] for r in runs}, pr["user_arm"]).items():
            logs.setdefault(pr["arms"][arm], []).extend(x)
    return logs


def paired_logs(values: dict[tuple[str, int], float], user_arm: str) -> dict[str, list[float]]:
    """One call's program runs ((arm, round) -> measure) as each other arm's log(yours / its), round by round:
    what the race's ``measure`` returns and what the kept runs give again."""
    rounds = sorted({r for _, r in values})
    arms = sorted({a for a, _ in values} - {user_arm})
    return {a: [math.log(values[(user_arm, r)] / values[(a, r)]) for r in rounds] for a in arms}
