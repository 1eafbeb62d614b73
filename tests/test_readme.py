"""The README's quick start is what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_two_commands_and_ci_runs_the_test_one():
    cmds = quick_start_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds)
    assert "ptxprobe rename-sweep" in cmds[0] and "pytest" in cmds[1]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == cmds[1]


def test_readme_names_every_cli_command():
    from ptxprobe.cli import build_parser

    text = (ROOT / "README.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"ptxprobe {name}" in text, name


def test_readme_findings_and_columns_are_what_the_committed_data_and_schema_say():
    import subprocess
    import sys

    script = ROOT / "experiments" / "findings" / "render.py"
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_findings_check_can_fail(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_findings", ROOT / "experiments" / "findings" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (ROOT / "README.md").read_text()
    assert mod.render(text) == text
    tampered = text.replace("| sm_90a | 12.4.131 | 100% |", "| sm_90a | 12.4.131 | 90% |")
    assert tampered != text and mod.render(tampered) != tampered


def test_the_timing_defaults_the_readme_states_are_the_codes():
    """The GPU measurement section names default values; they must be TimingPlan's, not remembered ones."""
    from ptxprobe.gpu.timing import TimingPlan

    p = TimingPlan()
    text = " ".join((ROOT / "README.md").read_text().split())
    for stated in (f"`warmup_s` ({p.warmup_s:g} s)", f"`card_warmup_s` ({p.card_warmup_s:g} s)",
                   f"reaches the target ({p.target_halfwidth * 100:g} %)",
                   f"`ceiling_halfwidth` ({p.ceiling_halfwidth * 100:g} %)",
                   f"`overflow_rounds` more ({p.overflow_rounds};",
                   f"(`reference_rounds`, {p.reference_rounds})"):
        assert stated in text, stated
    from ptxprobe.reports import repro

    assert f"`[run] between_run_sd`, {repro.BETWEEN_RUN_SD * 100:g} % unless the run states one" in text
