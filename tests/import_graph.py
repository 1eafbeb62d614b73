"""The package's imports read from its source (ast): which module imports which at module level, and which imports
sit inside functions. What ``tests/test_imports.py`` holds the package to: an import inside a function is there only
because start-up time needs it (it would pull a heavy library into a module that does not load one) or because at
module level it would close a circle; any other belongs at the top of the file."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ptxprobe"
# libraries whose import costs start-up time (or needs a GPU stack): a module may import them inside a function
HEAVY = frozenset({"torch", "triton", "scipy", "pandas", "pyarrow", "matplotlib", "ray", "jinja2", "nbclient",
                   "nbformat", "capstone", "elftools", "cxxfilt", "cupy", "cuda", "cutlass", "rich", "pynvml",
                   "multiprocessing", "concurrent", "ctypes", "numpy"})


@dataclass(frozen=True)
class InnerImport:
    module: str  # where the import is (ptxprobe.x.y)
    line: int
    targets: tuple[str, ...]  # the modules it imports (ptxprobe.x.z, or a library's top-level name)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, where: str) -> tuple[str, ...]:
    mods = modules()
    if isinstance(node, ast.Import):
        return tuple(a.name if a.name.startswith("ptxprobe") else a.name.split(".")[0] for a in node.names)
    base = node.module or ""
    if node.level:
        pkg = where.split(".") if mods[where].name == "__init__.py" else where.split(".")[:-1]
        pkg = pkg[:len(pkg) - node.level + 1]
        base = ".".join([*pkg, base] if base else pkg)
    if not base.startswith("ptxprobe"):
        return (base.split(".")[0],)
    return tuple(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING" or (
        isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")


@cache
def parsed() -> tuple[dict[str, frozenset[str]], tuple[InnerImport, ...]]:
    """(module -> the modules it imports at module level, every import inside a function)."""
    top: dict[str, frozenset[str]] = {}
    inner: list[InnerImport] = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        stack = list(tree.body)
        while stack:  # module level, including inside if/try blocks (not TYPE_CHECKING: never run)
            node = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, name))
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                stack += node.body + node.orelse
            elif isinstance(node, ast.Try):
                stack += node.body + node.orelse + node.finalbody + [x for h in node.handlers for x in h.body]
        top[name] = frozenset(found)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        inner.append(InnerImport(name, node.lineno, _targets(node, name)))
    return top, tuple(sorted(set(inner), key=lambda i: (i.module, i.line)))


def closure(start: str, top: dict[str, frozenset[str]]) -> set[str]:
    """Every module (and library) loading ``start`` loads, through module-level imports (a package's
    ``__init__`` loads before its modules)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in top]
        todo += list(top.get(m, ()))
    return seen


def why_inside(imp: InnerImport, top: dict[str, frozenset[str]]) -> str | None:
    """Why this import may not move to the top of its file: a heavy library it (or what it loads) brings that the
    module does not load already, or the circle it would close; None when nothing stops it."""
    have = closure(imp.module, top)
    for target in imp.targets:
        if not target.startswith("ptxprobe"):
            if target in HEAVY and target not in have:
                return f"{target}: a heavy library"
            continue
        brought = closure(target, top)
        if imp.module in brought:
            return f"{target}: would close a circle"
        heavy = sorted((brought - have) & HEAVY)
        if heavy:
            return f"{target}: loads {', '.join(heavy)}"
    return None
