"""The wheel is the tool: every package folder of ptxprobe and the shipped kernels are in it, the study is not."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(built_wheel) -> list[str]:
    return zipfile.ZipFile(built_wheel).namelist()


def test_every_package_folder_of_the_tool_is_in_the_wheel(wheel_names):
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "ptxprobe").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0] for n in wheel_names if n.endswith("/__init__.py")}
    assert folders <= shipped, f"listed nowhere in pyproject's packages: {sorted(folders - shipped)}"
    assert "ptxprobe/reports/templates/index.html.j2" in wheel_names
    assert "ptxprobe/experiments/default.toml" in wheel_names
    kernels = {p.name for p in (ROOT / "kernels").rglob("*") if p.suffix in (".py", ".cu")}
    assert kernels <= {n.rsplit("/", 1)[-1] for n in wheel_names if n.startswith("ptxprobe_kernels/")}


def test_the_study_stays_out_of_the_wheel(wheel_names):
    tops = {n.split("/", 1)[0] for n in wheel_names}
    assert tops == {"ptxprobe", "ptxprobe_kernels", "ptxprobe-0.1.0.dist-info"}
    study = [n for n in wheel_names if "h200_" in n or "/analysis" in n or "findings" in n or "results/" in n]
    assert study == []
