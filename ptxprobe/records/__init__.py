"""The records a run directory holds, as typed, versioned records: the tool's contract with whoever reads a run.

Each is a frozen dataclass (``record.Record``) whose fields say what its file holds and why; ``load(path)`` reads
any of them, of any layout ptxprobe has written, upgrading older ones; ``to_json``/``write`` give the file; the
fields are docs/schema.md. The rows of the static and GPU tables (``results.parquet``, ``runtime.parquet``) are
``rows``' columns; a GPU run's group records (``groups.jsonl``) are ``GroupRecord``s.
"""

from ptxprobe.records.gpu import Calibration, GpuFacts, GroupRecord
from ptxprobe.records.load import RECORDS, load
from ptxprobe.records.manifest import RunManifest
from ptxprobe.records.program import ApplyRecord, ProgramAB, SwappedKernel
from ptxprobe.records.record import DamagedRecord, Record
from ptxprobe.records.reduce import ReduceRecord
from ptxprobe.records.tuned import TunedDocument, TunedKernel

__all__ = ["RECORDS", "ApplyRecord", "Calibration", "DamagedRecord", "GpuFacts", "GroupRecord", "ProgramAB", "Record",
           "ReduceRecord", "RunManifest", "SwappedKernel", "TunedDocument", "TunedKernel", "load"]
