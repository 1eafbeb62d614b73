"""Tests that re-run a committed study run need the Triton that made it: its PTX is what the run recorded.

Under another release (CI's second job runs the suite with the newest Triton) they skip, saying so; CI's main job
runs them with the recorded release.
"""

from __future__ import annotations

import importlib.metadata as md
import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
RANGE_RECORD = RESULTS / "2026-12-03-cpu-triton-range" / "summary.json"


def recorded_triton(run: Path | None = None) -> str | None:
    """The Triton ``run`` was made with (its manifest), or the study's reference release when no run is named."""
    if run is None:
        return json.loads(RANGE_RECORD.read_text())["reference"]
    return json.loads((run / "manifest.json").read_text()).get("triton")


def triton_version() -> str:
    return md.version("triton")


def needs_recorded_triton(run: Path | None = None) -> None:
    """Skip, saying why, when the installed Triton is not the one the committed run was made with."""
    want, have = recorded_triton(run), triton_version()
    if want and have != want:
        pytest.skip(f"re-runs a committed run made with Triton {want}; Triton {have} is installed, whose PTX and "
                    "bundled ptxas differ")
