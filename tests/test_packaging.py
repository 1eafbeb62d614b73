"""The wheel is the tool: every package folder of ptxprobe and the shipped kernels are in it, the study is not."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    """The wheel built from a copy of what the build reads (a build/ left in the checkout would leak into it)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("ptxprobe", "kernels"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (wheel,) = out.glob("ptxprobe-*.whl")
    return zipfile.ZipFile(wheel).namelist()


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
