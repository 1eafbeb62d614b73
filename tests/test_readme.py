"""The README's quick start is what CI runs, and the README stays short and links the docs (FINDINGS.md, the study's
index and figures, generated from the committed runs: tests/study/test_readme.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


@pytest.mark.unit
def test_two_commands_and_ci_runs_the_test_one():
    cmds = quick_start_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds)
    assert "ptxprobe rename-sweep" in cmds[0] and "pytest" in cmds[1]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == cmds[1]


@pytest.mark.unit
def test_readme_names_every_cli_command():
    from ptxprobe.cli import build_parser

    text = (ROOT / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"ptxprobe {name}" in text, name


@pytest.mark.unit
def test_readme_is_short_and_links_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in text, page.name
    assert "FINDINGS.md" in text
