"""A run directory: the resumable log, its lock, the manifest and the derived outputs.

The log (``variants.jsonl``, ``runtime.jsonl``) is append-only, one JSON record per
line, fsynced. A finished run may keep it gzip-compressed (``variants.jsonl.gz``, see ``runs.rundir``);
appends after that go to a new plain file, read after the compressed part. Only the *last* line may be
torn (an interruption mid-write); a bad line anywhere else means the file was damaged, and that is an
error, not something to skip.
A directory holds one experiment and one writer at a time (``flock`` on ``.lock``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import importlib.metadata as md
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ptxprobe import __version__
from ptxprobe.core.cache import atomic_write, sha256_file
from ptxprobe.core.errors import DamagedLog, RunDirBusy, SpecError, output_failure

LOG, RESULTS_JSONL, RESULTS_PARQUET, MANIFEST = "variants.jsonl", "results.jsonl", "results.parquet", "manifest.json"
RUNTIME_LOG, RUNTIME_PARQUET = "runtime.jsonl", "runtime.parquet"
GROUPS_LOG, CALIBRATION, GPU_INFO = "groups.jsonl", "calibration.json", "gpu.json"
RUNTIME_TABLE_DROPS = ("times_ms", "samples")  # raw per-round times stay in the log, not in runtime.parquet
LOCK = ".lock"
GZ = ".gz"
# the layout of a run directory, recorded in its manifest; runs without one are the old layout (1), where the
# derived tables (results.jsonl/.parquet, runtime.parquet) sit beside the logs or, in some, replace them
SCHEMA_VERSION = 2


def compressed(path: Path) -> Path:
    """The gzip-compressed copy of a run file (``variants.jsonl`` -> ``variants.jsonl.gz``)."""
    return path.with_name(path.name + GZ)


def read_log(path: Path) -> list[dict]:
    """Every record of a log, its compressed part (``.gz``) first; a torn last line is dropped, any other bad
    line raises DamagedLog."""
    path = Path(path)
    rows: list[dict] = []
    if compressed(path).exists():
        rows += _records(compressed(path), gzip.decompress(compressed(path).read_bytes()))
    if path.exists():
        rows += _records(path, path.read_bytes())
    return rows


def _records(path: Path, data: bytes) -> list[dict]:
    rows: list[dict] = []
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            last = all(not rest.strip() for rest in lines[i + 1 :])
            if last and not data.endswith(b"\n"):
                continue  # cut by an interruption: that variant simply runs again
            raise DamagedLog(f"{path}: line {i + 1} is not valid JSON ({exc.msg}); the log is damaged") from exc
    return rows


def read_run_json(run_dir: str | Path, name: str, *, optional: bool = False) -> dict | None:
    """One JSON file of a run directory; ``optional``: None when the run has none (a static run has no calibration)."""
    path = Path(run_dir) / name
    if optional and not path.exists():
        return None
    return json.loads(path.read_text())


def drop_torn_tail(log: Path) -> None:
    """An interruption mid-write leaves a partial last line: cut it so appends start clean."""
    if not log.exists() or log.stat().st_size == 0:
        return
    data = log.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with open(log, "r+b") as f:
        f.truncate(keep)


CHEAP_ASSEMBLY_S = 0.1  # an assembly quicker than this is about as cheap to make again as to fsync (a few ms)


def worth_syncing(row: dict) -> bool:
    """Whether a variant's row is fsynced when logged: one that cost ptxas work, unless that work was under
    ``CHEAP_ASSEMBLY_S`` (a Triton library's hundreds of small kernels spent a tenth of their sweep in fsync); a
    row from the cache never, one whose cost is unknown always. Every row is written and flushed either way, so an
    interrupt or a killed process loses none; only a machine crash can lose the unsynced ones, cheap to redo."""
    if row.get("cached"):
        return False
    seconds = row.get("ptxas_seconds")
    return seconds is None or seconds >= CHEAP_ASSEMBLY_S


def append_records(f, records: list[dict], durable: bool = True) -> None:
    """Append (and fsync when ``durable``: a record that cost work survives a crash right after; one served from
    the cache is as cheap to make again as to keep, so a warm sweep does not wait on the disk for it)."""
    f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    f.flush()
    if durable:
        os.fsync(f.fileno())


def refuse_foreign(out: Path) -> None:
    """A sweep writes into a new or empty directory or a run directory (one with a manifest or a variant log; an
    interrupted start holds only ``inputs/`` and dotfiles): never among a user's own files."""
    if not out.is_dir() or (out / MANIFEST).exists() or (out / LOG).exists() or compressed(out / LOG).exists():
        return
    foreign = sorted(p.name for p in out.iterdir() if not p.name.startswith(".") and p.name != "inputs")
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SpecError(f"-o {out}: not a ptxprobe run directory and not empty (it holds {shown}); give a new or "
                        "empty directory")


def prepare_dir(out: Path) -> Path:
    """Create the output directory, or say clearly why it cannot be used."""
    if out.exists() and not out.is_dir():
        raise SpecError(f"output {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise output_failure(out, exc, "output directory ") from None
    return out


@contextlib.contextmanager
def writing_to(out: Path):
    """Within: a full disk or a file system gone read-only under ``out`` is said with the path (what was appended
    to the log is kept, a torn last line is dropped on resume, and the result files are replaced whole or not)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        raise output_failure(out, exc) from None


def remove_if_unused(out: Path) -> None:
    """A directory this command created and wrote nothing into (bad input found before any work) goes again."""
    with contextlib.suppress(OSError):
        (out / LOCK).unlink(missing_ok=True)
        out.rmdir()


@dataclass
class DirLock:
    """An exclusive, non-blocking lock on a run directory (released when the process exits, however)."""

    path: Path
    fd: int | None = None

    def __enter__(self) -> DirLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            self.fd = None
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise RunDirBusy(
                    f"{self.path.parent} is in use by another ptxprobe run (pid {holder}); "
                    "wait for it or choose another -o"
                ) from None
            raise
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def lock_dir(out: Path) -> DirLock:
    return DirLock(out / LOCK)


def check_same_experiment(out: Path, identity: dict) -> None:
    """A run directory holds one experiment: refuse to mix another one into it."""
    path = out / MANIFEST
    if not path.exists():
        return
    try:
        recorded = json.loads(path.read_text()).get("experiment_identity")
    except (OSError, json.JSONDecodeError):
        return
    if recorded and recorded != identity:
        raise SpecError(
            f"{out} holds experiment {recorded.get('name')!r} ({_sources_text(recorded)}); this is "
            f"{identity.get('name')!r} ({_sources_text(identity)}): use another -o, or --fresh to replace it"
        )


def _sources_text(identity: dict) -> str:
    srcs = identity.get("user_sources") or []
    return ", ".join(srcs) if srcs else "registered kernels"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())


def write_parquet(path: Path, rows: list[dict], drop: tuple[str, ...] = ()) -> None:
    """Rows as a parquet table, typed by pyarrow's JSON reader: converting Python rows any other way makes pyarrow
    import pandas (a third of a warm sweep's time). Strings stay strings (the reader would make timestamps of
    ISO dates), a column of NaN stays float, columns keep the rows' key order, and nothing half-written
    is left beside the table."""
    import pyarrow as pa
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r if k not in drop))
    text = "".join(json.dumps({k: r[k] for k in keys if k in r}, default=_plain) + "\n" for r in rows).encode()
    strings = {k for r in rows for k, v in r.items() if isinstance(v, str) and k in keys}
    table = pa_json.read_json(
        pa.BufferReader(text), read_options=pa_json.ReadOptions(block_size=len(text) + 1),
        parse_options=pa_json.ParseOptions(explicit_schema=pa.schema([(k, pa.string()) for k in sorted(strings)]),
                                           unexpected_field_behavior="infer")).select(keys)
    floats = {k for r in rows for k, v in r.items() if isinstance(v, float)}
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type) and field.name in floats:
            table = table.set_column(i, field.name, table.column(i).cast(pa.float64()))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:  # nothing half-written is left beside the table
        tmp.unlink(missing_ok=True)
        raise


def _plain(value):
    """A numpy scalar as the Python number it holds (anything else a row should not hold: refused)."""
    if hasattr(value, "item") and not hasattr(value, "__len__"):
        return value.item()
    raise TypeError(f"a table cell of type {type(value).__name__} cannot be written: {value!r}")


def package_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def build_manifest(exp, identity: dict, tools: list, argv: list[str], started: float, counts: dict,
                   inputs: dict | None = None, kernel_sources: dict | None = None) -> dict:
    """What a run directory was made from: command, experiment, inputs' and tools' hashes, host."""
    exp_file = exp.source
    return {
        "schema_version": SCHEMA_VERSION,
        "ptxprobe_version": __version__,
        "command": argv,
        "experiment": exp.to_json(),
        "experiment_identity": identity,
        "experiment_sha256": sha256_file(exp_file) if exp_file and Path(exp_file).exists() else None,
        "kernel_sources": kernel_sources or {},
        "inputs": inputs or {},
        "tools": [t.to_dict() for t in tools],
        "python": sys.version.split()[0],
        "triton": package_version("triton"),
        # Triton's knobs change the PTX it emits (TRITON_DEFAULT_FP_FUSION's default flips in 3.10): as set here
        "triton_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TRITON_")},
        "torch": package_version("torch"),
        "host": {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count(),
                 "node": platform.node()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": time.time() - started,
        "counts": counts,
    }
