"""The README's quick start is what CI runs."""

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


@pytest.mark.study
def test_findings_are_what_the_committed_data_say(monkeypatch, tmp_path):
    """FINDINGS.md is render.py's output over experiments/results/, and the check fails on a planted change."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("findings_render", ROOT / "experiments" / "findings" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (ROOT / "FINDINGS.md").read_text()
    new = mod.render()
    assert new == text, "FINDINGS.md is stale: run python experiments/findings/render.py"
    from experiments.findings import index

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
    import importlib.util
    import json

    from experiments.findings import index

    spec = importlib.util.spec_from_file_location("findings_render", ROOT / "experiments" / "findings" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
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
    import importlib.util

    spec = importlib.util.spec_from_file_location("findings_render", ROOT / "experiments" / "findings" / "render.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    figs = mod.render_figures()
    assert len(figs) == 4 and figs == mod.render_figures(), "the figures are not deterministic"
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
    import re

    text = (ROOT / "FINDINGS.md").read_text()
    for pattern in (r"\bissue \d", r"\bround \d\b", r"\btoday", r"\bround[34]\b"):
        assert not re.search(pattern, text, re.I), pattern


@pytest.mark.unit
def test_readme_is_short_and_links_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in text, page.name
    assert "FINDINGS.md" in text
