"""What the CuTe DSL drivers say about each call: its arguments as plain JSON, and how many PTX files it left.

Imported by the drivers beside it (a driver runs as a script, its folder first on the path)."""

from __future__ import annotations

import os
from dataclasses import asdict, is_dataclass
from pathlib import Path


def plain(value):
    """A config or shape as JSON can hold it: dataclasses as dicts, tuples as lists, anything else by its text."""
    if is_dataclass(value):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def ptx_count() -> int:
    """PTX files in the CuTe DSL's dump folder and below. ``ptxprobe capture`` moves each compile's PTX into a folder
    of its own as the compile returns (the DSL names a dump after the function and its arguments as printed, so two
    compiles that differ only in the kernel object's own fields, quack's rotary ``conjugate``, would write one
    file)."""
    dump = os.environ.get("CUTE_DSL_DUMP_DIR")
    return sum(1 for _ in Path(dump).rglob("*.ptx")) if dump and os.path.isdir(dump) else 0
