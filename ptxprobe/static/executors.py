"""Where a static sweep's work runs: emission and ptxas jobs behind one small interface.

The sweep (``static.sweep``) plans, logs and judges; an executor only runs jobs and hands back
what they produced. ``LocalExecutor`` is a spawn process pool on this host (the default);
``static.ray_executor.RayExecutor`` sends the ptxas jobs to a Ray cluster. Either way the
driver alone writes the cache, the resumable log and the outputs, so a sweep resumes the
same whichever executor ran it.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Protocol

from ptxprobe.binary.cubin import kernels_columns
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import CubinError
from ptxprobe.core.proc import install_stop_handler
from ptxprobe.core.stages import stage_key
from ptxprobe.sources import Emitted, KernelSource
from ptxprobe.static.plan import Planned, variant_record
from ptxprobe.toolchain.assemble import Artifact, assemble


class Executor(Protocol):
    """Runs jobs; ``rows_of`` turns a finished assembly job into its log rows (on the driver).

    One assembly job is one ptxas run: the variants it is given share one assembly key (a module of many entries
    renamed at once under one name template), and each gets its row, its entry's facts read from that one cubin.
    """

    description: dict

    def emit(self, source: KernelSource, arch: str, cache: Cache) -> Future: ...

    def assemble(self, planned: tuple[Planned, ...], timeout: float, cache: Cache) -> Future: ...

    def rows_of(self, finished: Future, cache: Cache) -> list[dict]: ...

    def shutdown(self) -> None: ...

    def stop(self) -> None: ...


# --- job bodies (top-level so they pickle) ---------------------------------------------------


def _worker_init() -> None:
    """Pool workers leave Ctrl-C to the parent; SIGTERM from it kills the ptxas they run and ends them at once.

    (Raising in the worker is not enough: the pool's worker loop catches it and takes the next job.)
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_stop_handler(signal.SIGTERM)


def emit_job(source: KernelSource, arch: str, cache_root: str, cache_enabled: bool) -> Emitted:
    return source.emit(arch, Cache(cache_root, cache_enabled))


def assemble_job(planned: tuple[Planned, ...], timeout: float, cache_root: str, cache_enabled: bool) -> list[dict]:
    cache = Cache(cache_root, cache_enabled)
    p = planned[0]
    v = p.variant
    art = assemble(p.ptx, v.arch, p.tool, v.flags, repeat=v.repeat, timeout=timeout, cache=cache)
    return variant_rows(planned, art, cache)


def by_assembly(planned: list[Planned]) -> list[tuple[Planned, ...]]:
    """The variants grouped by what ptxas runs: one job per assembly key, in the order first planned."""
    groups: dict[str, list[Planned]] = {}
    for p in planned:
        groups.setdefault(p.variant.assembly_key, []).append(p)
    return [tuple(g) for g in groups.values()]


def cubin_columns_key(cubin_sha256: str, name: str) -> str:
    return stage_key("cubin-facts", cubin=cubin_sha256, name=name)


def _cubin_columns(art: Artifact, names: list[str], cache: Cache) -> dict[str, dict | CubinError]:
    """kernel_columns of each name, memoised by cubin hash (re-reading ELF files dominates a warm sweep); the
    cubin is read once for all the names it lacks in the cache."""
    out: dict[str, dict | CubinError] = {}
    for name in names:
        hit = cache.get_json("cubin-facts", cubin_columns_key(art.cubin_sha256, name))
        if hit is not None:
            out[name] = hit
    missing = [n for n in dict.fromkeys(names) if n not in out]
    if missing:
        for name, columns in kernels_columns(art.cubin(), missing).items():
            if isinstance(columns, dict):
                cache.put_json("cubin-facts", cubin_columns_key(art.cubin_sha256, name), columns)
            out[name] = columns
    return out


_FACT_COLUMNS = ("text_sha256", "code_sha256", "machine_code_sha256", "machine_code_version", "machine_code_v1_sha256",
                 "text_bytes", "capmerc_bytes", "merc_bytes", "n_instructions", "shared_bytes", "shared_align",
                 "eiattr_registers")


def variant_row(p: Planned, art: Artifact, cache: Cache | None = None) -> dict:
    """The raw result row of one assembly (everything derived later is left out)."""
    return variant_rows((p,), art, cache)[0]


def variant_rows(planned: tuple[Planned, ...], art: Artifact, cache: Cache | None = None) -> list[dict]:
    """The raw result rows of the variants one assembly serves, each entry's facts from its one cubin."""
    cache = cache or Cache()
    columns: dict = {}
    cubin_error = None
    if art.ok:
        try:
            columns = _cubin_columns(art, [q.variant.name for q in planned], cache)
        except (CubinError, OSError) as exc:
            cubin_error = exc
    rows = []
    for p in planned:
        v = p.variant
        row = {
            **variant_record(v),
            "status": art.status,
            "error": art.message,
            "retriable": art.retriable,
            "ptxas_seconds": art.seconds,
            "cached": art.cached,
            "note": art.note,
            "cubin_sha256": art.cubin_sha256,
            **p.extra,
        }
        rep = art.reports.get(v.name)
        for k in ("registers", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "barriers"):
            row[k] = getattr(rep, k) if rep else None
        facts = dict.fromkeys(_FACT_COLUMNS)
        got = cubin_error or columns.get(v.name)
        if isinstance(got, dict):
            facts.update(got)
        elif art.ok:
            row["status"], row["error"] = "bad_cubin", f"ptxas gave a cubin ptxprobe cannot read: {got}"
        row.update(facts)
        rows.append(row)
    return rows


# --- the local process pool ----------------------------------------------------------------


class LocalExecutor:
    """A spawn pool started on the first job (a fully cached sweep starts no process at all).

    Spawned workers are children of this process, so their CPU (and their ptxas's) is in its rusage.
    """

    def __init__(self, jobs: int):
        self.jobs, self.pool = jobs, None
        self.description = {"kind": "local", "jobs": jobs}

    def _submit(self, fn, *args) -> Future:
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=mp.get_context("spawn"),
                                            initializer=_worker_init)
        return self.pool.submit(fn, *args)

    def emit(self, source: KernelSource, arch: str, cache: Cache) -> Future:
        return self._submit(emit_job, source, arch, str(cache.root), cache.enabled)

    def assemble(self, planned: tuple[Planned, ...], timeout: float, cache: Cache) -> Future:
        return self._submit(assemble_job, tuple(planned), timeout, str(cache.root), cache.enabled)

    def rows_of(self, finished: Future, cache: Cache) -> list[dict]:
        return finished.result()

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def stop(self) -> None:
        """Terminate every worker now (each kills its ptxas on SIGTERM), then make sure they are gone."""
        pool = self.pool
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 2.0
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
