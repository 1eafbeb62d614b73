"""A run directory of any age, read through one object: ``RunDir(path)``.

What a run keeps are its records: the variant log (``variants.jsonl``), the GPU samples
(``runtime.jsonl``) and group records (``groups.jsonl``), ``manifest.json``, ``calibration.json``,
``gpu.json`` and the explain inputs. A log may be gzip-compressed (``variants.jsonl.gz``). Everything
else is derived and rebuilt on read: the static rows are ``static.verdicts.derive`` of the variant log,
the GPU rows ``gpu.dispatch.with_q_values`` of the runtime log. ``compact`` turns a finished run into
the committed layout (compressed logs, no derived tables); ``rebuild`` writes the tables again::

    python3 -m ptxprobe.runs.rundir compact RUN_DIR...
    python3 -m ptxprobe.runs.rundir rebuild RUN_DIR...

``manifest.json``'s ``schema_version`` names the layout; runs without one are the old layout, where some
directories kept only ``results.parquet`` (then those rows are the record) or ``results.jsonl``.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from functools import cached_property
from pathlib import Path

import pandas as pd

from ptxprobe.core.cache import atomic_write
from ptxprobe.core.errors import PtxprobeError
from ptxprobe.core.store import (
    CALIBRATION,
    GPU_INFO,
    GROUPS_LOG,
    LOCK,
    LOG,
    MANIFEST,
    RESULTS_JSONL,
    RESULTS_PARQUET,
    RUNTIME_LOG,
    RUNTIME_PARQUET,
    RUNTIME_TABLE_DROPS,
    compressed,
    drop_torn_tail,
    read_log,
    write_parquet,
)
from ptxprobe.records.gpu import Calibration, GpuFacts, GroupRecord
from ptxprobe.records.manifest import OLD_LAYOUT, read_manifest
from ptxprobe.records.program import ProgramAB
from ptxprobe.records.record import Record
from ptxprobe.static.verdicts import CODE_VERSION, SAME_CODE_V1, comparable_code, derive

# ``ptxprobe capture`` writes what it captured, the rename sweep of it in ``sweep/`` and its program A/B in ``ab/``
CAPTURED, CAPTURE_SWEEP, PROGRAM_AB = "captured.json", "sweep", f"ab/{ProgramAB.FILE}"
LOGS = (LOG, RUNTIME_LOG, GROUPS_LOG)
DERIVED = (RESULTS_JSONL, RESULTS_PARQUET, RUNTIME_PARQUET)
COMPRESSED_SUFFIXES = (".jsonl", ".csv")  # what ``compact`` gzips (logs, explain's ncu CSVs)


class RunDir:
    """One run directory (a static sweep, a GPU run, or both), whatever its age and layout.

    Rows come back as lists of dicts (``static_rows``, ``runtime_rows``) or DataFrames
    (``static_table``, ``runtime_table``); files by name through ``json``, ``text``, ``log``, a compressed
    copy standing in for a missing plain one.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # --- files --------------------------------------------------------------------------------

    def file(self, name: str) -> Path | None:
        """The file holding ``name`` (relative to the run directory): itself, else its ``.gz``, else None."""
        p = self.path / name
        for cand in (p, compressed(p)):
            if cand.is_file():
                return cand
        return None

    def has(self, name: str) -> bool:
        return self.file(name) is not None

    def bytes(self, name: str) -> bytes:
        p = self.file(name)
        if p is None:
            raise PtxprobeError(f"{self.path}: no {name}")
        data = p.read_bytes()
        return gzip.decompress(data) if p.name.endswith(".gz") and not name.endswith(".gz") else data

    def text(self, name: str) -> str:
        return self.bytes(name).decode()

    def json(self, name: str, *, optional: bool = False) -> dict | None:
        """A JSON file; ``optional``: None when the run has none (a static run has no calibration)."""
        if optional and not self.has(name):
            return None
        try:
            return json.loads(self.bytes(name))
        except json.JSONDecodeError as exc:
            raise PtxprobeError(f"{self.path / name}: not valid JSON ({exc})") from exc

    def log(self, name: str) -> list[dict]:
        """Every record of a log (compressed part first, then what was appended since)."""
        return read_log(self.path / name)

    # --- what the run is ------------------------------------------------------------------------

    @cached_property
    def manifest(self) -> dict:
        """manifest.json ({} when the directory has none), its recorded experiment in the keys the parser reads."""
        doc = self.json(MANIFEST, optional=True)
        return read_manifest(doc, self.path / MANIFEST) if doc is not None else {}

    @property
    def schema_version(self) -> int:
        return int(self.manifest.get("schema_version", OLD_LAYOUT))

    @property
    def calibration(self) -> dict | None:
        """calibration.json as recorded (checked against ``records.Calibration``); None: no GPU run."""
        return self._checked(Calibration, CALIBRATION)

    @property
    def gpu(self) -> dict | None:
        """gpu.json as recorded (checked against ``records.GpuFacts``); None: no GPU run."""
        return self._checked(GpuFacts, GPU_INFO)

    def _checked(self, record: type[Record], name: str) -> dict | None:
        doc = self.json(name, optional=True)
        return None if doc is None else record.checked(doc, str(self.path / name))

    @property
    def variants(self) -> list[dict]:
        """The variant log's records as ptxas produced them (no verdicts)."""
        return self.log(LOG)

    @property
    def groups(self) -> list[dict]:
        """The GPU run's group records (timing plan, A/A, planted controls, orders)."""
        where = str(self.path / GROUPS_LOG)
        return [GroupRecord.checked(g, where) for g in self.log(GROUPS_LOG)]

    @property
    def runtime_log(self) -> list[dict]:
        """The runtime log's rows as measured (raw per-round times, no q-values)."""
        return self.log(RUNTIME_LOG)

    @property
    def has_static(self) -> bool:
        return any(self.has(n) for n in (LOG, RESULTS_PARQUET, RESULTS_JSONL))

    @property
    def has_runtime(self) -> bool:
        return self.has(RUNTIME_LOG)

    @property
    def is_capture(self) -> bool:
        """A ``ptxprobe capture`` directory: the captured kernels, their sweep in ``sweep/``, perhaps an A/B."""
        return self.has(CAPTURED) and (self.path / CAPTURE_SWEEP).is_dir()

    def static_part(self) -> RunDir:
        """The run directory holding the static rows: a capture's ``sweep/``, else this one."""
        return RunDir(self.path / CAPTURE_SWEEP) if self.is_capture else self

    def program_ab(self) -> dict | None:
        """A capture's whole-program A/B (``ab/ab.json``), its comparisons derived again from the recorded runs
        under today's rule (a run of three rounds reads as too few); None when the run has none."""
        doc = self.json(PROGRAM_AB, optional=True)
        if doc is None:
            return None
        from ptxprobe.capture.ab import Run, calibration_failed, compare

        rec = ProgramAB.from_json(doc, str(self.path / PROGRAM_AB)).to_json()
        rows = compare([Run(**r) for r in rec["runs"]])
        return {**rec, "comparisons": rows, "calibration_failed": calibration_failed(rows)}

    # --- rows ---------------------------------------------------------------------------------

    def static_rows(self) -> list[dict]:
        """Static rows with baseline comparisons and verdicts, derived from the variant log; an old-layout
        run without a log gives its recorded results.parquet (or results.jsonl) rows."""
        if self.has(LOG):
            return derive(with_machine_code(self.variants))
        if self.schema_version == OLD_LAYOUT and self.has(RESULTS_PARQUET):
            return with_machine_code(_records(self._recorded_static_table()))
        if self.schema_version == OLD_LAYOUT and self.has(RESULTS_JSONL):
            return with_machine_code(self.log(RESULTS_JSONL))
        return []

    def static_table(self) -> pd.DataFrame:
        """``static_rows`` as the DataFrame results.parquet holds."""
        if not self.has(LOG) and self.schema_version == OLD_LAYOUT and self.has(RESULTS_PARQUET):
            return self._recorded_static_table()
        return _table(self.static_rows())

    def runtime_rows(self) -> list[dict]:
        """GPU rows with their q-values (Benjamini-Hochberg over the run), raw per-round times included."""
        from ptxprobe.gpu.dispatch import with_q_values

        return with_q_values(self.runtime_log)

    def runtime_table(self, *, raw_times: bool = False) -> pd.DataFrame:
        """``runtime_rows`` as the DataFrame runtime.parquet holds (``raw_times``: keep the per-round times)."""
        return _table(self.runtime_rows(), () if raw_times else RUNTIME_TABLE_DROPS)

    def _recorded_static_table(self) -> pd.DataFrame:
        return pd.read_parquet(self.file(RESULTS_PARQUET))

    # --- layout -------------------------------------------------------------------------------

    def rebuild(self) -> list[Path]:
        """Write the derived tables (results.parquet, runtime.parquet) from the logs; returns what was written."""
        written = []
        if self.has(LOG):
            write_parquet(self.path / RESULTS_PARQUET, self.static_rows())
            written.append(self.path / RESULTS_PARQUET)
        if self.has_runtime:
            write_parquet(self.path / RUNTIME_PARQUET, self.runtime_rows(), drop=RUNTIME_TABLE_DROPS)
            written.append(self.path / RUNTIME_PARQUET)
        return written

    def compact(self) -> None:
        """The committed layout: logs and explain CSVs gzip-compressed, derived tables removed (an old-layout
        run whose only record is results.parquet keeps it). The manifest is left as recorded."""
        for log in LOGS:
            if (self.path / log).exists():
                _gzip_in_place(self.path / log)
        explain = self.path / "explain"
        for p in sorted(explain.rglob("*")) if explain.is_dir() else ():
            if p.is_file() and p.suffix in COMPRESSED_SUFFIXES:
                _gzip_in_place(p)
        for name in DERIVED:
            if not (name == RESULTS_PARQUET and not self.has(LOG)):
                (self.path / name).unlink(missing_ok=True)
        (self.path / LOCK).unlink(missing_ok=True)  # a finished run's lock file says nothing


MACHINE_CODE, RECORDED_CODE = "machine_code_sha256", "code_sha256"

def same_code_columns(rows: list[dict], new: list[dict]) -> tuple[str, str]:
    """(the column that meant "the same machine code" when ``rows`` were recorded, the column of the ``new`` rows
    that means the same): runs from before ``machine_code_sha256`` existed judged by ``code_sha256`` (the
    instructions); runs of its version 1 (no ``machine_code_version``) meet newer rows' ``machine_code_v1_sha256``."""
    ok = [r for r in rows if r.get("status") == "ok"]
    if not all(MACHINE_CODE in r for r in ok):
        return RECORDED_CODE, RECORDED_CODE
    newer = [r for r in new if r.get("status") == "ok" and r.get(CODE_VERSION)]
    if all(CODE_VERSION in r for r in ok) or not newer:
        return MACHINE_CODE, MACHINE_CODE
    return MACHINE_CODE, SAME_CODE_V1


def with_machine_code(rows: list[dict]) -> list[dict]:
    """Rows recorded before ``machine_code_sha256`` existed keep their own "same machine code" (``code_sha256``),
    and rows of several versions of it are compared on the oldest (``static.verdicts.comparable_code``), so their
    verdicts derive as they were recorded."""
    return comparable_code([r if MACHINE_CODE in r or RECORDED_CODE not in r else {**r, MACHINE_CODE: r[RECORDED_CODE]}
                            for r in rows])


def run_dirs(root: str | os.PathLike) -> list[RunDir]:
    """Every run directory under ``root`` (a directory with a manifest or a variant/runtime log)."""
    found = set()
    for p in Path(root).rglob("*"):
        name = p.name.removesuffix(".gz")
        if p.is_file() and name in (MANIFEST, LOG, RUNTIME_LOG, RESULTS_PARQUET) and p.parent.name != "explain":
            found.add(p.parent)
    return [RunDir(p) for p in sorted(found)]


def _table(rows: list[dict], drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """Rows as a DataFrame typed the way a Parquet round trip types it (what the tables on disk gave)."""
    import pyarrow as pa

    df = pd.DataFrame(rows)
    df = df.drop(columns=[c for c in drop if c in df.columns])
    return pa.Table.from_pandas(df, preserve_index=False).to_pandas() if len(df.columns) else df


def _records(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as dicts, missing values as None."""
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _gzip_in_place(path: Path) -> None:
    """Replace ``path`` by ``path.gz``, bytes unchanged; lines appended after an earlier compaction join it."""
    drop_torn_tail(path)
    gz = compressed(path)
    data = (gzip.decompress(gz.read_bytes()) if gz.exists() else b"") + path.read_bytes()
    atomic_write(compressed(path), gzip.compress(data, compresslevel=9, mtime=0))
    path.unlink()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] not in ("compact", "rebuild"):
        print("usage: python3 -m ptxprobe.runs.rundir compact|rebuild RUN_DIR...", file=sys.stderr)
        return 2
    for d in args[1:]:
        rd = RunDir(d)
        if args[0] == "compact":
            rd.compact()
        else:
            for p in rd.rebuild():
                print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
