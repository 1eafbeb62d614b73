"""``load(path)``: any record a run directory holds, of any layout, as its typed record (older layouts upgraded)."""

from __future__ import annotations

import json
from pathlib import Path

from ptxprobe.records.gpu import Calibration, GpuFacts
from ptxprobe.records.manifest import RunManifest, is_run_manifest
from ptxprobe.records.program import ApplyRecord, ProgramAB
from ptxprobe.records.record import DamagedRecord, Record
from ptxprobe.records.reduce import ReduceRecord
from ptxprobe.records.tuned import TunedDocument

RECORDS: tuple[type[Record], ...] = (TunedDocument, ApplyRecord, ProgramAB, ReduceRecord, RunManifest, Calibration,
                                     GpuFacts)
BY_FILE = {r.FILE: r for r in RECORDS}


def load(path: str | Path) -> Record:
    """The record in ``path`` (a file, or a directory holding one record file), by its file name; DamagedRecord
    (bad input, exit 2) for a file that is not one, or one ptxprobe cannot read, the key and the fault named."""
    path = Path(path)
    if path.is_dir():
        held = [path / name for name in BY_FILE if (path / name).is_file()]
        if len(held) != 1:
            raise DamagedRecord(f"{path}: holds {'no' if not held else len(held)} record files ("
                                f"{', '.join(BY_FILE)}); name the file")
        path = held[0]
    kind = BY_FILE.get(path.name)
    if kind is None:
        raise DamagedRecord(f"{path}: not a record file ptxprobe writes ({', '.join(BY_FILE)})")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedRecord(f"{path}: not a {path.name} ptxprobe can read ({exc})") from exc
    if kind is RunManifest and not is_run_manifest(doc):
        raise DamagedRecord(f"{path}: a manifest.json with neither an experiment nor a schema_version: no run's "
                            "manifest (a benchmark's own)")
    return kind.from_json(doc, str(path))
