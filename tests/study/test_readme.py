"""The study's generated files are what its committed runs say: FINDINGS.md and experiments/README.md are
experiments/findings/render.py's output over experiments/results/, docs/figures/ its drawings, and each check fails on
a planted change; the index sends every finding to runs that exist; FINDINGS.md names no work items. (The README's
own checks: tests/test_readme.py.)"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from experiments.findings import index

ROOT = Path(__file__).resolve().parents[2]


def _render_module():
    """experiments/findings/render.py loaded afresh (a script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("findings_render", ROOT / "experiments" / "findings" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.study
def test_findings_are_what_the_committed_data_say(monkeypatch, tmp_path):
    """FINDINGS.md is render.py's output over experiments/results/, and the check fails on a planted change."""
    mod = _render_module()
    text = (ROOT / "FINDINGS.md").read_text()
    new = mod.render()
    assert new == text, "FINDINGS.md is stale: run python experiments/findings/render.py"
    assert index.render(new, mod.RUN) == index.README.read_text(), \
        "experiments/README.md is stale: run python experiments/findings/render.py"
    tampered = text.replace("| sm_90a | 12.4.131 | 100% |", "| sm_90a | 12.4.131 | 90% |")
    assert tampered != text
    (tmp_path / "FINDINGS.md").write_text(tampered)
    monkeypatch.setattr(mod, "FINDINGS", tmp_path / "FINDINGS.md")
    monkeypatch.setattr(mod, "render", lambda: new)
    monkeypatch.setattr("sys.argv", ["render.py", "--check"])
    assert mod.main() == 1


@pytest.mark.study
def test_the_study_index_sends_every_finding_to_runs_that_exist_and_commands_that_run_now():
    """experiments/README.md: every run FINDINGS names is indexed under its section and exists; the folders it
    describes are the study's folders, no more, no less; every command it gives for now names files of the tree, save
    the one run whose definition left it (planted: a script moved without its MOVED entry is named as gone, and a
    folder added without a description fails the folder check)."""
    mod = _render_module()
    text = (ROOT / "FINDINGS.md").read_text()
    secs = index.sections(text, mod.RUN)
    assert len(secs) >= 6 and sum(len(r) for _, r in secs) >= 40
    readme = index.README.read_text()
    for title, runs in secs:
        part = readme.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        assert all(f"`{r}`" in part and (ROOT / "experiments" / "results" / r).is_dir() for r in runs), title
    folders = {p.name for p in (ROOT / "experiments").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == set(index.FOLDERS)
    gone = set()
    for _, runs in secs:
        for r in runs:
            m = ROOT / "experiments" / "results" / r / "manifest.json"
            for c in index.recorded_commands(json.loads(m.read_text()) if m.exists() else {}):
                gone.update(index.gone(index.now(c)))
    assert gone == {"experiments/ptxas_matrix.toml"}
    assert index.gone("bash experiments/gpu/h200_tune.sh program") == []
    assert index.gone(index.now("bash experiments/h200_tune.sh program")) == []
    assert index.gone("bash experiments/h200_tune.sh program") == ["experiments/h200_tune.sh"]


@pytest.mark.study
def test_findings_figures_are_what_the_committed_data_draw(monkeypatch, tmp_path):
    """docs/figures/*.svg (one per FINDINGS.md question) are render.py's drawings, byte for byte, and the check
    fails on a planted change in one of them."""
    mod = _render_module()
    figs = mod.render_figures()
    assert len(figs) == len(mod.FIGURE_LIST) == 5 and figs == mod.render_figures(), "the figures are not deterministic"
    text = (ROOT / "FINDINGS.md").read_text()
    for name, svg in figs.items():
        assert (ROOT / "docs" / "figures" / name).read_bytes() == svg.encode(), f"docs/figures/{name} is stale"
        assert f"](docs/figures/{name})" in text
        assert len(svg.encode()) < 150_000
    (tmp_path / "FINDINGS.md").write_text(text)
    for name, svg in figs.items():
        (tmp_path / name).write_bytes(svg.encode())
    monkeypatch.setattr(mod, "FINDINGS", tmp_path / "FINDINGS.md")
    monkeypatch.setattr(mod, "FIGURES", tmp_path)
    monkeypatch.setattr(mod, "render", lambda: text)
    monkeypatch.setattr(mod, "render_figures", lambda: figs)
    monkeypatch.setattr("sys.argv", ["render.py", "--check"])
    assert mod.main() == 0
    svg = (tmp_path / "speed.svg").read_text()
    assert "±0.5 %" in svg
    (tmp_path / "speed.svg").write_text(svg.replace("±0.5 %", "±0.6 %"))
    assert mod.main() == 1


@pytest.mark.unit
def test_findings_name_no_work_items():
    """FINDINGS.md speaks of designs and runs, not of issue numbers or rounds of work."""
    text = (ROOT / "FINDINGS.md").read_text()
    for pattern in (r"\bissue \d", r"\bround \d\b", r"\btoday", r"\bround[34]\b"):
        assert not re.search(pattern, text, re.I), pattern


@pytest.mark.unit
def test_every_command_an_experiment_file_writes_plans_as_written(tmp_path):
    """The commands in the study's experiment headers (``# ptxprobe rename-sweep -e ... --run``), as the study's
    index reads them (``index.header_commands``), parse and plan as written from the repository root, without
    running: a definition named by a bare name that stopped resolving when the files moved (``experiment file not
    found: h200_design``), or one naming a kernel file that is not where it says, is refused here."""
    import os
    import shlex

    from ptxprobe.cli.parser import build_parser
    from ptxprobe.cli.sweep_cmd import request_from_args
    from ptxprobe.runs.request import plan_sweep

    commands = [(toml.name, shlex.split(c.split("ptxprobe rename-sweep", 1)[1]))
                for toml in sorted(index.DEFINITIONS.glob("*.toml")) for c in index.header_commands(toml)
                if "ptxprobe rename-sweep" in c]
    assert len(commands) >= 15
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for name, argv in commands:
            args = build_parser().parse_args(["rename-sweep", *argv, "-o", str(tmp_path / name)])
            plan_sweep(request_from_args(args))  # SpecError (exit 2) for an experiment that does not resolve
    finally:
        os.chdir(cwd)
