"""The static sweep's ptxas jobs as Ray tasks (``--executor ray``).

Each task needs one CPU, checks that its node has the very ptxas the plan names (by sha256,
installing that release from its wheel if it is missing there), assembles into a private
scratch cache and sends back the row, the cubin bytes and its facts. The driver puts them in
*its* content-addressed cache and log, so keys, resume and outputs are the local executor's.
A task whose worker dies is retried by Ray on another worker; the driver sees one result, so
the log holds one row. Emission (Triton, nvcc) stays in a local pool on the driver: it reads
the user's files, which a remote node may not have.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from ptxprobe.core.cache import Cache, file_store
from ptxprobe.core.cluster import RaySession, require_ray, worker_identity
from ptxprobe.core.errors import ToolMismatch
from ptxprobe.sources import KernelSource
from ptxprobe.static.executors import LocalExecutor, cubin_columns_key, variant_row, variant_rows
from ptxprobe.static.plan import Planned
from ptxprobe.toolchain.assemble import Artifact, assemble
from ptxprobe.toolchain.tools import Tool, discover, identify, install

TASK_RETRIES = 3  # a worker or node lost mid-task: Ray runs the task again elsewhere
TOOL_MISMATCH = "tool_mismatch"
WORKER_LOST = "worker_lost"


@dataclass(frozen=True)
class RemoteAssembly:
    """What one task sends back: enough for the driver to write the cache as if it had run ptxas itself."""

    rows: tuple[dict, ...]  # one per variant that shares the assembly
    artifact: dict
    cubin: bytes | None
    columns: dict | None  # entry name -> its cubin facts
    worker: str


def worker_tool(planned: Tool) -> Tool:
    """This node's ptxas with exactly the plan's sha256: at the plan's path, anywhere known, or freshly installed."""
    at_path = None
    if Path(planned.path).is_file():
        at_path = identify(planned.path, planned.kind, planned.origin)
        if at_path.sha256 == planned.sha256:
            return at_path
    for t in discover((planned.kind,)):
        if t.sha256 == planned.sha256:
            return t
    try:
        for rec in install(planned.version, (planned.kind,)):
            if rec.sha256 == planned.sha256:
                return identify(rec.path, planned.kind, "ptxprobe-cache")
    except Exception:  # noqa: BLE001 (no wheel, no network, not a release: the mismatch below says it)
        pass
    found = f"a different binary (sha256 {at_path.sha256[:12]})" if at_path else "missing"
    raise ToolMismatch(f"worker {worker_identity()}: ptxas {planned.version} sha256 {planned.sha256[:12]} is not "
                       f"here ({planned.path} is {found}, and no installed or installable release matches)")


def unassembled(p: Planned, status: str, why: str) -> tuple[dict, Artifact]:
    """The row (retriable: the node may be fixed, the worker may live next time) of a task that ran no ptxas."""
    v = p.variant
    art = Artifact(status, v.arch, p.tool.version, p.tool.sha256, tuple(v.flags), v.ptx_sha256, None, None, {}, why,
                   0.0)
    return {**variant_row(p, art), "error": why, "retriable": True}, art


def remote_assembly(planned: tuple[Planned, ...], timeout: float) -> RemoteAssembly:
    """The task body: runs on a Ray worker; one ptxas run, a row per variant sharing it."""
    p = planned[0]
    v = p.variant
    try:
        tool = worker_tool(p.tool)
    except ToolMismatch as exc:
        rows, arts = zip(*(unassembled(q, TOOL_MISMATCH, str(exc)) for q in planned), strict=True)
        return RemoteAssembly(tuple(rows), arts[0].to_json(), None, None, worker_identity())
    with tempfile.TemporaryDirectory(prefix="ptxprobe-ray-") as scratch:
        cache = Cache(scratch, enabled=True)  # private: only the driver's cache persists
        art = assemble(p.ptx, v.arch, tool, v.flags, repeat=v.repeat, timeout=timeout, cache=cache)
        rows = tuple(variant_rows(planned, art, cache))
        cubin = art.cubin() if art.ok else None
        columns = {q.variant.name: cache.get_json("cubin-facts", cubin_columns_key(art.cubin_sha256, q.variant.name))
                   for q in planned} if art.ok else None
    art = replace(art, cubin_path=None)
    return RemoteAssembly(rows, art.to_json(), cubin, columns, worker_identity())


def adopt(returned: RemoteAssembly, key: str, cache: Cache) -> list[dict]:
    """Write what a task produced into the driver's cache (cubin, assembly record, cubin facts); give its rows."""
    art = dict(returned.artifact)
    if returned.cubin is not None:
        art["cubin_path"] = str(file_store(cache).put("cubin", art["cubin_sha256"], "kernel.cubin", returned.cubin))
        for name, columns in (returned.columns or {}).items():
            if columns is not None:
                cache.put_json("cubin-facts", cubin_columns_key(art["cubin_sha256"], name), columns)
    if not any(row.get("retriable") for row in returned.rows):
        cache.put_json("assemble", key, art)
    return list(returned.rows)


class RayExecutor:
    """ptxas jobs on a Ray cluster (or a local Ray instance started for this command); emission stays local."""

    def __init__(self, jobs: int, address: str | None = None):
        self.session = RaySession(address, num_cpus=None if address else jobs)
        self.owns_session = not require_ray().is_initialized()  # else a command-level session owns it
        self.ray = self.session.open()
        self.task = self.ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(remote_assembly)
        self.local = LocalExecutor(min(jobs, 2))
        self.refs: dict[Future, object] = {}
        self.planned: dict[Future, tuple[Planned, ...]] = {}
        self.workers: dict[str, int] = {}
        nodes = self.session.nodes()
        self.description = {
            "kind": "ray",
            "address": address or "local",
            "nodes": len(nodes),
            "cpus": int(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)),
        }

    def emit(self, source: KernelSource, arch: str, cache: Cache) -> Future:
        return self.local.emit(source, arch, cache)

    def assemble(self, planned: tuple[Planned, ...], timeout: float, cache: Cache) -> Future:
        ref = self.task.remote(tuple(planned), timeout)
        fut = ref.future()
        self.refs[fut] = ref
        self.planned[fut] = tuple(planned)
        return fut

    def rows_of(self, finished: Future, cache: Cache) -> list[dict]:
        planned = self.planned.pop(finished)
        self.refs.pop(finished, None)
        try:
            returned: RemoteAssembly = finished.result()
        except self.ray.exceptions.RayError as exc:  # every retry's worker died: retriable rows, not a crash
            why = f"the Ray worker was lost {TASK_RETRIES + 1} times: {str(exc).strip().splitlines()[0][:300]}"
            return [unassembled(p, WORKER_LOST, why)[0] for p in planned]
        self.workers[returned.worker] = self.workers.get(returned.worker, 0) + 1
        self.description["tasks_by_node"] = dict(self.workers)
        return adopt(returned, returned.rows[0]["assembly_key"], cache)

    def shutdown(self) -> None:
        self.local.shutdown()
        if self.owns_session:
            self.session.close()

    def stop(self) -> None:
        """Cancel what is queued or running (a running task gets KeyboardInterrupt, which kills its ptxas)."""
        for ref in self.refs.values():
            try:
                self.ray.cancel(ref)
            except Exception:  # noqa: BLE001 (already finished or gone)
                pass
        self.local.stop()
        if self.owns_session:
            self.session.close()

