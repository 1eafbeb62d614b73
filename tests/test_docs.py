"""docs/: the generated parts are what the code says, and every environment variable ptxprobe reads is documented."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_docs_are_current():
    mod = _generator()
    stale = [str(p.relative_to(ROOT)) for p, text in mod.outputs().items() if p.read_text() != text]
    assert not stale, f"{stale}: run python docs/generate.py"


def test_the_docs_check_can_fail(tmp_path, monkeypatch):
    """A planted change to a generated default, a column, an option, a layout row and a surface name is seen."""
    mod = _generator()
    for page in {"cli.md", *mod.BLOCKS}:  # every page the generator writes
        (tmp_path / page).write_text((ROOT / "docs" / page).read_text())
    monkeypatch.setattr(mod, "DOCS", tmp_path)
    assert mod.main(["--check"]) == 0
    for page, old, new in (("gpu-method.md", "| 0.02 s |", "| 0.2 s |"),
                           ("schema.md", "- `verdict` (str, always set)", "- `verdict` (str)"),
                           ("cli.md", "| `--timeout` | TIMEOUT | `600.0` |", "| `--timeout` | TIMEOUT | `60.0` |"),
                           ("development.md", "| `registry-index` | `kernels`, `triton`, `env` |",
                            "| `registry-index` | `kernels`, `triton` |"),
                           ("api.md", "| `RunDir` | `ptxprobe.runs.rundir.RunDir` |",
                            "| `RunDir` | `ptxprobe.runs.RunDir` |")):
        path = tmp_path / page
        good = path.read_text()
        assert old in good, (page, old)
        path.write_text(good.replace(old, new, 1))
        assert mod.main(["--check"]) == 1, page
        path.write_text(good)


def test_every_environment_variable_ptxprobe_reads_is_documented():
    text = (ROOT / "docs" / "environment.md").read_text()
    read = set()
    for p in (ROOT / "ptxprobe").rglob("*.py"):
        src = p.read_text()
        read |= set(re.findall(r"environ(?:\.get)?\(\s*\"([A-Z_]+)\"", src))
        read |= set(re.findall(r"environ\[\"([A-Z_]+)\"\]", src))
        read |= set(re.findall(r"\"((?:TRITON|CUTE_DSL|PTXPROBE|TORCHINDUCTOR)_[A-Z_]+)\"", src))
    assert read, "found no environment variables: the pattern is wrong"
    missing = sorted(v for v in read if f"`{v}`" not in text)
    assert not missing, missing


def test_docs_link_to_pages_that_exist():
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)", page.read_text()):
            assert (page.parent / target).resolve().exists(), (page.name, target)


def test_every_command_the_parser_offers_runs_a_function_that_exists():
    """Commands are imported when they run (the parser imports none): each name must lead to its function."""
    import argparse
    import importlib

    from ptxprobe.cli import parser as cli_parser

    sub = next(a for a in cli_parser.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    seen = set()
    for name, p in sub.choices.items():
        func = p.get_default("func")
        if isinstance(func, cli_parser._Command):
            module = importlib.import_module(f"ptxprobe.cli.{cli_parser._COMMAND_MODULES.get(func.name, 'commands')}")
            assert callable(getattr(module, func.name, None)), f"{name}: no {func.name}"
            seen.add(name)
        else:
            assert callable(func), name
    assert {"rename-sweep", "capture", "report", "cache"} <= seen


def test_every_test_has_exactly_one_tier_and_a_unit_run_leaves_out_the_tools():
    """A module-level tier plus a test's own (a unit module's GPU test) made ``-m unit`` run ptxas and a GPU test:
    such a test is refused at collection, and a module whose tests differ names its default ``TIER``."""
    from types import SimpleNamespace

    from tests import conftest

    def item(own: list[str], module_marks: list[str], tier: str | None = None):
        marks = [SimpleNamespace(name=n) for n in own + module_marks]

        def add_marker(mark):
            marks.insert(0, SimpleNamespace(name=mark.name, args=getattr(mark, "args", ())))

        return SimpleNamespace(nodeid="t.py::x", module=SimpleNamespace(**({"TIER": tier} if tier else {})),
                               iter_markers=lambda: iter(marks), add_marker=add_marker,
                               get_closest_marker=lambda name: next((m for m in marks if m.name == name), None),
                               marks=marks)

    with pytest.raises(pytest.UsageError, match="exactly one tier.*gpu, unit"):
        conftest.pytest_collection_modifyitems(None, [item(["gpu"], ["unit"])])
    with pytest.raises(pytest.UsageError, match="no tier"):
        conftest.pytest_collection_modifyitems(None, [item([], [])])
    gpu, plain = item(["gpu"], [], tier="unit"), item([], [], tier="unit")
    conftest.pytest_collection_modifyitems(None, [gpu, plain])
    tiers = [[m.name for m in x.marks if m.name in conftest.TIERS] for x in (gpu, plain)]
    assert tiers == [["gpu"], ["unit"]]
    assert [m.args for m in plain.marks if m.name == "timeout"] == [(conftest.TIER_TIMEOUT_S["unit"],)]


def test_every_package_path_the_docs_name_resolves():
    """A dotted ``ptxprobe.…`` path in the README, docs, notebook or kernels names something that exists (the
    notebook named ``ptxprobe.analysis``, a kernel ``ptxprobe.run.CudaKernel``, the method ``ptxprobe.compare``)."""
    import importlib

    def resolves(dotted: str) -> bool:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for part in parts[i:]:
                if not hasattr(obj, part):
                    return False
                obj = getattr(obj, part)
            return True
        return False

    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb")),
             *sorted((ROOT / "kernels").rglob("*.py"))]
    named = {(f.relative_to(ROOT).as_posix(), m.rstrip(".")) for f in files
             for m in re.findall(r"\bptxprobe(?:\.[A-Za-z_]\w*)+", f.read_text())}
    named = {(f, m) for f, m in named if not m.endswith((".py", ".md", ".toml", ".json"))}
    assert len(named) > 20
    assert sorted((f, m) for f, m in named if not resolves(m)) == []
