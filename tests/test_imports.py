"""The package's imports (read from its source by tests/import_graph.py): no circle among module-level imports, and
an import inside a function only where start-up time or a circle needs it."""

from __future__ import annotations

import pytest

from tests import import_graph as graph

pytestmark = pytest.mark.unit


def _circles(top: dict[str, frozenset[str]]) -> list[list[str]]:
    """The package's import circles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for n in sorted(t for t in top.get(m, ()) if t in top and t != m):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(top):
        if m not in index:
            visit(m)
    return out


def test_no_module_imports_back_into_a_circle():
    """(Planted: an edge from a low module back to one that imports it is found as a circle.)"""
    top, _ = graph.parsed()
    assert _circles(top) == []
    low = next(t for t in sorted(top["ptxprobe.cli.parser"]) if t in top)  # a module the parser imports
    planted = {**top, low: top[low] | {"ptxprobe.cli.parser"}}
    assert any(low in c and "ptxprobe.cli.parser" in c for c in _circles(planted))


def test_an_import_inside_a_function_is_there_for_start_up_time_or_a_circle():
    """Every import inside a function would, at the top of its file, load a heavy library the module does not load
    (torch, triton, scipy, pandas, matplotlib, ray, ...) or close a circle; the rest sit at the top. (Planted: a light
    stdlib import and a light package module inside a function are both found movable.)"""
    top, inner = graph.parsed()
    movable = [f"{i.module}:{i.line} {', '.join(i.targets)}" for i in inner if graph.why_inside(i, top) is None]
    assert movable == []
    assert len(inner) > 50  # what the rule keeps: the lazy imports the CLI and the GPU paths rely on
    light = graph.InnerImport("ptxprobe.cli.render", 1, ("json",))
    assert graph.why_inside(light, top) is None
    module = graph.InnerImport("ptxprobe.reports.html", 1, ("ptxprobe.core.errors",))
    assert graph.why_inside(module, top) is None
    heavy = graph.InnerImport("ptxprobe.core.errors", 1, ("torch",))
    assert graph.why_inside(heavy, top) == "torch: a heavy library"


def _imported_tops(path) -> set[str]:
    """The top-level names of every module a file imports, anywhere in it (ast)."""
    import ast

    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    return tops


def test_the_study_and_the_tools_tests_stay_apart():
    """Nothing under experiments/ imports the tests (what a study script needs of ours is in the package); no test of
    the tool imports experiments/ (only tests/study/ read the study). Seen failing on bench_ray.py's import of the
    tests' Ray cluster before it moved into the package (``core.cluster.local_cluster``)."""
    root = graph.PACKAGE.parent
    study = [p for p in sorted((root / "experiments").rglob("*.py")) if "tests" in _imported_tops(p)]
    tool_tests = [p for p in sorted((root / "tests").glob("*.py")) if "experiments" in _imported_tops(p)]
    assert not study, f"experiments/ imports tests: {[str(p.relative_to(root)) for p in study]}"
    assert not tool_tests, f"tool tests import experiments: {[str(p.relative_to(root)) for p in tool_tests]}"


def _package_imports(path) -> set[str]:
    """The ptxprobe modules a file imports, anywhere in it (ast)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "ptxprobe"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ptxprobe":
            found |= {f"{node.module}.{a.name}" if node.module == "ptxprobe" else node.module for a in node.names}
    return found


def test_the_study_uses_the_package_through_its_declared_surface():
    """experiments/ imports ptxprobe.api and ptxprobe.records alone (what it needs beyond the calls is declared in
    api.SURFACE, documented in docs/api.md), and every name declared there resolves. Seen failing on a study module
    importing ptxprobe.stats directly."""
    from ptxprobe import api

    root = graph.PACKAGE.parent
    outside = {str(p.relative_to(root)): sorted(m for m in _package_imports(p) if m not in ("ptxprobe.api",
               "ptxprobe.records") and not m.startswith("ptxprobe.records."))
               for p in sorted((root / "experiments").rglob("*.py"))}
    assert not {p: m for p, m in outside.items() if m}, "experiments/ imports the package outside its surface"
    assert all(getattr(api, name) is not None for name in api.SURFACE)
    assert set(api.__all__) == {*api.CALLS, *api.SURFACE}

