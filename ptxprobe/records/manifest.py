"""``manifest.json``: what a run directory was made from (command, experiment, inputs' and tools' hashes, host).

Layout 1 has no ``schema_version``. Its experiment's first GPU design had one slowed control (``slow_control``,
``slow_fraction``), now per-group calibration (``calibrate``), and accepted timing keys it never used (``reps``,
``warmup``, ``flush_bytes``); both are read in today's words. A benchmark's own manifest.json, with neither an
experiment nor a ``schema_version``, is no run's manifest: it is read for what it says and nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxprobe.core.store import SCHEMA_VERSION
from ptxprobe.records.record import DamagedRecord, Json, Record, doc, json_type, required

OLD_LAYOUT = 1  # a manifest without schema_version
SUPERSEDED_TIMING_KEYS = ("reps", "warmup", "flush_bytes")  # accepted, never used, by the first GPU design
KEPT_FILE_KEYS = ("path", "kept", "tree", "role")  # what ``core.inputs.stage`` reads of each kept input file


@dataclass(frozen=True, kw_only=True)
class RunManifest(Record):
    """A run directory's manifest: enough to say what made the run and to make it again (``ptxprobe repro``)."""

    FILE = "manifest.json"
    SCHEMA_VERSION = SCHEMA_VERSION
    VERSIONED = True

    ptxprobe_version: str | None = doc("the ptxprobe that ran it")
    command: tuple[str, ...] | str | None = doc("the command line (layout 1 may hold it as one string)")
    experiment: Json = required("the experiment as parsed: kernels, names, archs, ptxas, flags, run table")
    experiment_identity: Json = doc("what the experiment's content key covers")
    experiment_sha256: str | None = doc("the experiment file's sha256 (null: built in, or given on the command line)")
    kernel_sources: Json = doc("each kernel source's file hashes")
    inputs: Json = doc("the user's input files the run kept (copies under inputs/), by label")
    tools: tuple[Json, ...] = doc("every tool: kind, path, release, sha256, origin", default=())
    python: str | None = doc("Python release")
    triton: str | None = doc("Triton release (null: none)")
    triton_env: Json = doc("TRITON_* variables as set (they change the PTX Triton emits)")
    torch: str | None = doc("torch release (null: none)")
    host: Json = doc("platform, machine, CPUs, node")
    started: str | None = doc("UTC start")
    finished: str | None = doc("UTC end")
    wall_seconds: float | None = doc("wall seconds")
    counts: Json = doc("variants by status")
    left_out: tuple[Json, ...] = doc("kernels or combinations left out and why", default=())

    @classmethod
    def upgrade(cls, doc: dict, version: int, where: str) -> dict:
        return upgraded_manifest(checked_manifest(doc, where))


def is_run_manifest(doc) -> bool:
    """A run's manifest (an experiment, or a layout number), not a benchmark's own manifest.json."""
    return isinstance(doc, dict) and ("experiment" in doc or "schema_version" in doc)


def read_manifest(doc, where) -> dict:
    """``doc`` (manifest.json as parsed) as today's readers take it: a run's manifest checked and upgraded (its
    layout number kept), a benchmark's as it is; DamagedRecord names the file and the fault."""
    if not isinstance(doc, dict):
        raise DamagedRecord(f"{where}: {json_type(doc)}, not a manifest (expected a JSON object)")
    if not is_run_manifest(doc):
        return doc
    return {**RunManifest.checked(doc, str(where)),  # absent keys stay absent: readers' .get(key, default) hold
            "schema_version": doc.get("schema_version", OLD_LAYOUT)}  # the layout it was recorded in


def checked_manifest(doc: dict, where) -> dict:
    """A run's manifest refused, the file and the fault named, where its nested parts are not what readers take
    (report and repro both read manifests through this, so both refuse the same ones)."""
    names = (doc.get("experiment") or {}).get("names") if isinstance(doc.get("experiment"), dict) else None
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise DamagedRecord(f"{where}: \"experiment\".\"names\" is {json_type(names)}, expected a list of name "
                            "templates")
    for key, kind in (("experiment", dict), ("inputs", dict), ("kernel_sources", dict), ("counts", dict)):
        if doc.get(key) is not None and not isinstance(doc[key], kind):
            raise DamagedRecord(f"{where}: \"{key}\" is {json_type(doc[key])}, expected an object")
    for n, tool in enumerate(doc.get("tools") or []):
        if not isinstance(tool, dict):
            raise DamagedRecord(f"{where}: \"tools\"[{n}] is {json_type(tool)}, expected an object")
    for label, rec in (doc.get("inputs") or {}).items():
        if not isinstance(rec, dict):
            raise DamagedRecord(f"{where}: \"inputs\".\"{label}\" is {json_type(rec)}, expected an object")
        files = rec.get("files")
        if files is None or label == "ptxas_flag_files":  # flag files: {path: digest}
            continue
        if not isinstance(files, list):
            raise DamagedRecord(f"{where}: \"inputs\".\"{label}\".\"files\" is {json_type(files)}, expected a list")
        for i, f in enumerate(files):
            bad = [k for k in KEPT_FILE_KEYS if not isinstance(f, dict) or not isinstance(f.get(k), str)]
            if bad:
                raise DamagedRecord(f"{where}: \"inputs\".\"{label}\".\"files\"[{i}] has no {', '.join(bad)} "
                                    "(each kept file records its path, kept copy, tree and role)")
    return doc


def upgraded_manifest(manifest: dict) -> dict:
    """A recorded manifest whose experiment reads with the experiment parser: the first GPU design's single slowed
    control becomes per-group calibration, and the timing keys it accepted without using are dropped."""
    run = (manifest.get("experiment") or {}).get("run")
    if not run:
        return manifest
    run = {k: v for k, v in run.items() if k != "slow_fraction"}
    if "slow_control" in run:
        run["calibrate"] = bool(run.pop("slow_control"))
    if "timing" in run:
        run["timing"] = without_superseded_timing(run["timing"])
    return {**manifest, "experiment": {**manifest["experiment"], "run": run}}


def without_superseded_timing(plan: dict) -> dict:
    """A timing plan without the keys the first GPU design accepted and never used."""
    return {k: v for k, v in plan.items() if k not in SUPERSEDED_TIMING_KEYS}
