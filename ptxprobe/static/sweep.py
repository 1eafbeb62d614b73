"""Running a static sweep: emit each source once per arch, rename, assemble (``static.executors``), log, derive.

Every finished assembly is appended to ``variants.jsonl`` at once, so an interrupted sweep
loses nothing and a re-run skips what is there (hangs and outside kills are retried).
``results.jsonl``/``results.parquet`` are derived from the log rows of *this* plan and
rewritten at the end, for the user: nothing reads them back (``runs.rundir.RunDir`` derives the rows from
the log, which a finished run may keep compressed). Ctrl-C stops the executor at once: the workers'
ptxas process groups are killed, and the outputs and manifest are still written for what finished.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError, ToolFailed, ToolNotFound
from ptxprobe.core.inputs import drop_kept_since, keep_inputs, kept_contents
from ptxprobe.core.store import (
    LOG,
    RESULTS_JSONL,
    RESULTS_PARQUET,
    append_records,
    build_manifest,
    check_same_experiment,
    compressed,
    drop_torn_tail,
    lock_dir,
    prepare_dir,
    read_log,
    refuse_foreign,
    remove_if_unused,
    worth_syncing,
    write_jsonl,
    write_parquet,
    writing_to,
)
from ptxprobe.ptx.rename import apply_template
from ptxprobe.records.manifest import RunManifest
from ptxprobe.sources import Emitted, KernelSource, left_out, sources_of
from ptxprobe.sources.launch import check_against_source
from ptxprobe.sources.registry import kernel_source_hashes
from ptxprobe.sources.triton import runtime_params
from ptxprobe.static.adaptive import more_runs
from ptxprobe.static.executors import Executor, LocalExecutor, by_assembly, variant_rows
from ptxprobe.static.experiment import Experiment
from ptxprobe.static.plan import Planned, plan_emitted
from ptxprobe.static.ray_executor import RayExecutor
from ptxprobe.static.verdicts import SAME_CODE, comparable_code, derive, failures
from ptxprobe.toolchain.assemble import cached_artifact, flag_file_digests
from ptxprobe.toolchain.tools import Tool, discover

RETRIED_STATUSES = ("timeout",)


# --- the sweep -----------------------------------------------------------------------------


def experiment_identity(exp: Experiment, sources: list[KernelSource]) -> dict:
    """What makes a run directory's experiment the same one (axes may grow; the inputs may not change kind)."""
    return {
        "name": exp.name,
        "user_sources": sorted(s.label for s in sources if s.kind != "registered"),
    }


ROW_OF_AXIS = {"archs": "arch", "names": "name_template", "dtypes": "dtype"}  # axis -> the row field it sets


def check_not_narrower(out: Path, exp: Experiment, logged: list[dict]) -> None:
    """A re-run into a run directory may grow its axes, not drop values its log holds rows of: its results and
    manifest would then describe fewer variants than the log (a value that never got a row, e.g. a ptxas that
    hung, may be swapped)."""
    dropped = {}
    for axis, key in ROW_OF_AXIS.items():
        keep = {str(v) for v in exp.axis(axis)}
        held = sorted({str(r[key]) for r in logged if r.get(key) is not None} - keep)
        if held:
            dropped[axis] = held
    if dropped:
        said = "; ".join(f"{axis} {', '.join(vals)}" for axis, vals in sorted(dropped.items()))
        raise SpecError(f"{out} holds a wider sweep of this experiment (this one drops {said}): "
                        "use another -o, or --fresh to replace it")


@dataclass
class SweepOutcome:
    out_dir: Path
    rows: list[dict]
    ran: int
    skipped: int
    wall_seconds: float
    ptxas_seconds: float
    interrupted: bool = False
    emit_errors: list[str] = field(default_factory=list)
    planned: int = 0  # variants planned (an interrupted sweep may not have planned every kernel yet)
    to_emit: int = 0  # kernel builds (source × arch) not finished when it stopped
    left_out: list[dict] = field(default_factory=list)  # what the kernels do not support of the axes (narrowed)
    from_cache: int = 0  # of ``ran``: rows served by the content-addressed cache, no ptxas run

    @property
    def emitted_all(self) -> bool:
        return self.to_emit == 0

    @property
    def failed(self) -> list[dict]:
        return failures(self.rows)


EXECUTORS = ("local", "ray")


def make_executor(kind: str, jobs: int, ray_address: str | None = None) -> Executor:
    """The executor a command asked for (``--executor``, ``--ray-address``)."""
    if kind == "local":
        if ray_address:
            raise SpecError("--ray-address goes with --executor ray")
        return LocalExecutor(jobs)
    if kind == "ray":
        return RayExecutor(jobs, ray_address)
    raise SpecError(f"unknown executor {kind!r} (choose from {', '.join(EXECUTORS)})")


def run_sweep(
    exp: Experiment,
    out_dir: str | os.PathLike,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
    timeout: float = 600.0,
    progress: bool = True,
    argv: list[str] | None = None,
    fresh: bool = False,
    max_variants: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> SweepOutcome:
    """Run (or resume) a sweep into ``out_dir`` (ptxas jobs on this host, or on Ray with ``executor="ray"``)."""
    started = time.time()
    cache = cache or Cache()
    sources = sources_of(exp, cache)  # a bad input fails here, before any work
    for template in exp.names:  # so does a name template that cannot make a PTX identifier
        apply_template(template, "kernel")
    left = left_out(exp)
    identity = experiment_identity(exp, sources)
    created = not Path(out_dir).exists()
    refuse_foreign(Path(out_dir))
    out = prepare_dir(Path(out_dir))
    with writing_to(out), lock_dir(out):
        log = out / LOG
        if fresh:
            for path in (log, compressed(log), out / RESULTS_JSONL, out / RESULTS_PARQUET):
                path.unlink(missing_ok=True)
        else:
            check_same_experiment(out, identity)
        drop_torn_tail(log)
        logged = {r["variant_id"]: r for r in read_log(log)}
        check_not_narrower(out, exp, list(logged.values()))
        if any(r["status"] == "ok" and SAME_CODE not in r for r in logged.values()):
            raise SpecError(f"{out} was recorded by an older ptxprobe (its rows have no {SAME_CODE}): "
                            "re-run with --fresh, or use another -o")
        tools = discover()
        state = _SweepState(exp, cache, tools, timeout, logged, max_variants)
        kept: dict = {}
        had = kept_contents(out)
        try:
            kept = keep_inputs(out, sources, exp.archs, cache)  # before any work: an interrupted run has them too
            pool = make_executor(executor, jobs or os.cpu_count() or 1, ray_address)
            state.execute(sources, log, pool, progress)
        except BaseException:
            if not state.ran:  # bad input found before any work: nothing to keep, the directory is as it was
                drop_kept_since(out, had)
                if created:
                    remove_if_unused(out)
                raise
            _write_outputs(out, exp, identity, tools, argv, started, state, sources, logged, kept, left)
            raise
        _write_outputs(out, exp, identity, tools, argv, started, state, sources, logged, kept, left)
    return SweepOutcome(out, state.derived, state.ran, state.skipped, time.time() - started, state.ptxas_seconds,
                        state.interrupted, state.emit_errors, len(state.planned_ids), state.to_emit, left,
                        state.from_cache)


def _write_outputs(out: Path, exp, identity: dict, tools, argv, started: float, state, sources, logged: dict,
                   kept: dict, left: list[dict]) -> None:
    """results.jsonl/.parquet and the manifest, for the rows of this plan that are in the log."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C cannot cut the write-out
    try:
        derived = derive(comparable_code([logged[i] for i in state.planned_ids if i in logged]))
        write_jsonl(out / RESULTS_JSONL, derived)
        write_parquet(out / RESULTS_PARQUET, derived)
        counts = {
            "rows": len(derived),
            "ran_this_time": state.ran,
            "from_cache": state.from_cache,
            "skipped_done": state.skipped,
            "by_status": dict(Counter(r["status"] for r in derived)),
            "interrupted": state.interrupted,
            "emit_errors": state.emit_errors,
            "executor": state.executor,
        }
        inputs = {s.label: {**s.identity(), **kept.get(s.label, {})} for s in sources}  # files: core.inputs
        files = {p: d for flags in exp.flags for p, d in flag_file_digests(flags).items()}
        if files:  # control files (--apply-controls) are opaque inputs: recorded by content
            inputs["ptxas_flag_files"] = files
        manifest = build_manifest(exp, identity, tools, argv or sys.argv, started, counts, inputs,
                                  kernel_sources=kernel_source_hashes())
        RunManifest.of({**manifest, "left_out": left}, str(out / RunManifest.FILE)).write(out)
        state.derived = derived
    finally:
        signal.signal(signal.SIGINT, previous)


class _SweepState:
    """The mutable bookkeeping of one sweep execution (planned ids, counters, the pool's futures)."""

    def __init__(self, exp, cache: Cache, tools: list[Tool], timeout: float, logged: dict, max_variants):
        self.exp, self.cache, self.tools, self.timeout = exp, cache, tools, timeout
        self.logged = logged
        self.max_variants = max_variants
        self.planned_ids: list[str] = []
        self.ran = self.skipped = self.from_cache = 0
        self.ptxas_seconds = 0.0
        self.interrupted = False
        self.emit_errors: list[str] = []
        self.pending: dict[Future, tuple | str] = {}  # emit jobs: (source, arch); assembly jobs: the assembly key
        self.inflight: dict[str, list[Planned]] = {}  # assembly key -> variants waiting on that ptxas run
        self.assemblies_run: set[str] = set()  # ptxas runs this sweep made (a module's entries share one)
        self.groups: dict[tuple, dict] = {}  # verdict group -> its source, variants and what is still pending
        self.group_of: dict[str, tuple] = {}
        self.derived: list[dict] = []
        self.executor: dict = {}
        self.to_emit = 0

    def execute(self, sources: list[KernelSource], log: Path, pool: Executor, progress: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn())
        jobs_list = [(s, a) for s in sources for a in s.build_archs(self.exp.archs)]
        self.to_emit = len(jobs_list)
        self.pool = pool
        self.log_path, self.logf = log, None
        try:
            with Progress(*cols, disable=not progress, transient=False, redirect_stdout=False,
                          console=Console(stderr=True)) as bar:  # stdout holds the answer (or the JSON) alone
                self.bar = bar
                self.t_emit = bar.add_task("emit PTX", total=len(jobs_list))
                self.t_asm = bar.add_task("ptxas: entry variants", total=None)
                for src, arch in jobs_list:
                    hit = self._cached_emit(src, arch)
                    if hit is not None:
                        bar.advance(self.t_emit)
                        self.to_emit -= 1
                        self._submit_variants(pool, src, hit)
                    else:
                        self.pending[pool.emit(src, arch, self.cache)] = (src, arch)
                while self.pending:
                    finished, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
                    for f in finished:
                        job = self.pending.pop(f)
                        if isinstance(job, str):  # an assembly: its rows, then whoever waited on the same one
                            for row in pool.rows_of(f, self.cache):
                                self._record(row)
                            self._served(job)
                            continue
                        bar.advance(self.t_emit)
                        self.to_emit -= 1
                        try:
                            emitted = f.result()
                        except (ToolFailed, ToolNotFound) as exc:  # the compiler failed: say so, go on
                            self.emit_errors.append(f"{job[0].label} for {job[1]}: {exc}")
                            continue
                        self._submit_variants(pool, job[0], emitted)
            pool.shutdown()
        except KeyboardInterrupt:
            self.interrupted = True
            pool.stop()
        except BaseException:  # bad input found while building: stop everything, say it
            pool.stop()
            raise
        finally:
            self.executor = dict(pool.description)
            if self.logf is not None:
                self.logf.close()

    def _cached_emit(self, src: KernelSource, arch: str) -> Emitted | None:
        if not self.cache.enabled:
            return None
        return src.emit(arch, self.cache, only_cached=True)

    def _done(self, vid: str) -> bool:
        row = self.logged.get(vid)
        return row is not None and not row.get("retriable") and row.get("status") not in RETRIED_STATUSES

    def _submit_variants(self, pool, src: KernelSource, emitted: Emitted) -> None:
        launch = src.launch()
        if launch is not None:  # the spec must fit the entry's own parameters: checked before any assembly

            runtime = _runtime_params(src)
            for entry in emitted.swept_entries:
                check_against_source(launch, emitted.ptx, entry, src.kind, runtime)
        self._schedule(pool, plan_emitted(self.exp, src, emitted, self.tools, self.cache), src, emitted)

    def _schedule(self, pool, planned: list[Planned], src: KernelSource, emitted: Emitted) -> None:
        if self.max_variants is not None:
            planned = planned[: max(0, self.max_variants - len(self.planned_ids))]
        for p in planned:  # every variant is pending before any is served: a group is judged only when whole
            vid = p.variant.variant_id
            self.planned_ids.append(vid)
            group = self.groups.setdefault(p.variant.group, {"src": src, "emitted": emitted, "pending": set(),
                                                             "ids": {}, "planned": {}})
            group["ids"][vid] = p.variant
            group["planned"].setdefault(p.variant.name_template, p)  # what another repeat of this name assembles
            group["pending"].add(vid)
            self.group_of[vid] = p.variant.group
        self.bar.update(self.t_asm, total=len(self.planned_ids))
        self._dispatch(pool, planned)

    def _dispatch(self, pool, planned: list[Planned]) -> None:
        """Serve what the log or the cache holds; run the rest, one ptxas job per distinct assembly (a module's
        entries renamed at once share one)."""
        for job in by_assembly(planned):
            todo = []
            for p in job:
                if self._done(p.variant.variant_id):
                    self.skipped += 1
                    self.bar.advance(self.t_asm)
                    self._finished(p.variant.variant_id)
                else:
                    todo.append(p)
            if not todo:
                continue
            v = todo[0].variant
            hit = cached_artifact(todo[0].ptx, v.arch, todo[0].tool, v.flags, repeat=v.repeat, cache=self.cache)
            if hit is not None:  # a cache hit is served here: no process hop
                for row in variant_rows(tuple(todo), hit, self.cache):
                    self._record(row)
            elif v.assembly_key in self.inflight:  # the same ptxas run is under way: served when it ends
                self.inflight[v.assembly_key] += todo
            else:
                self.inflight[v.assembly_key] = []
                self.pending[pool.assemble(tuple(todo), self.timeout, self.cache)] = v.assembly_key

    def _served(self, key: str) -> None:
        """Variants that waited on an assembly another job ran: their rows from the cache it filled (run again
        when it left nothing there, a hang or an outside kill)."""
        waiting = self.inflight.pop(key, [])
        if waiting:
            self._dispatch(self.pool, waiting)

    def _finished(self, vid: str) -> None:
        """A variant is in the log: when its group is complete, extend it if its verdict is not yet sure."""
        key = self.group_of.get(vid)
        group = self.groups.get(key)
        if group is None:
            return
        group["pending"].discard(vid)
        if group["pending"] or self.exp.max_repeat <= 0:
            return
        outputs: dict[str, Counter] = {}
        runs: dict[str, int] = {}
        baseline = self.exp.names[0]
        for gid, v in group["ids"].items():
            row = self.logged.get(gid)
            runs[v.name_template] = runs.get(v.name_template, 0) + 1
            if row is not None and row["status"] == "ok":
                outputs.setdefault(v.name_template, Counter())[row[SAME_CODE]] += 1
        base = outputs.get(baseline, Counter())
        need = more_runs(base, {t: c for t, c in outputs.items() if t != baseline}, runs, baseline,
                         self.exp.confidence, self.exp.max_repeat)
        if not need:
            return
        extra = [replace(p, variant=replace(p.variant, repeat=runs[t]))  # the same PTX, its next repeat index
                 for t, p in group["planned"].items() if t in need]
        self._schedule(self.pool, extra, group["src"], group["emitted"])

    def _record(self, row: dict) -> None:
        row["run_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if self.logf is None:  # the log appears with the first result, not before
            self.logf = open(self.log_path, "a")  # noqa: SIM115 (closed in execute)
        append_records(self.logf, [row], durable=worth_syncing(row))
        self.logged[row["variant_id"]] = row
        self.ran += 1
        self.from_cache += bool(row["cached"])
        if not row["cached"] and row["assembly_key"] not in self.assemblies_run:  # a shared run counted once
            self.assemblies_run.add(row["assembly_key"])
            self.ptxas_seconds += row["ptxas_seconds"] or 0.0
        self.bar.advance(self.t_asm)
        self._finished(row["variant_id"])


def _runtime_params(src: KernelSource) -> list[str]:
    """A Triton function's launch parameters (its PTX entry has hidden extra ones); empty for other kinds."""
    if src.kind != "triton":
        return []

    fn, sp, _ = src.loaded()
    return runtime_params(fn, sp)


def default_out_dir(exp: Experiment) -> Path:
    """``runs/<experiment>``, or for a sweep of user files ``runs/<their names>``: never mixed with another."""
    if exp.has_user_kernels and not exp.families.kernels:
        items = [*exp.ptx_files, *exp.cu_files, *exp.cubin_files, *exp.lib_files, *exp.triton_functions]
        stems = [Path(item.path.split(":")[0]).stem or "kernel" for item in items]  # a Triton function: its module
        label = "-".join(dict.fromkeys(stems))[:80]
        return Path("runs") / f"user-{label}"
    return Path("runs") / exp.name
