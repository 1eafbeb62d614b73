"""What a Python library ships as kernels, counted from its wheel's source: every function decorated as a GPU kernel
(``@triton.jit``, ``@gluon.jit``, ``@cute.kernel``, under whatever name the module imported them), so that the
source functions a cell's driver reached are stated against all the library ships. The wheel is read as a zip and
its modules parsed with ``ast``, never imported or copied; a decorator is recognised by its dotted name (a call's
function for ``@triton.jit(repr=…)``): the last part ``jit`` under ``triton``, ``tl`` or a bare ``jit`` imported
from Triton, ``gluon.jit``, ``cute.kernel``.
"""

from __future__ import annotations

import ast
import zipfile
from collections import Counter
from pathlib import Path

KINDS = ("triton.jit", "gluon.jit", "cute.kernel")


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it stands for (``from triton import jit`` -> ``jit: triton.jit``)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    return names


def kind_of(decorator: str, imports: dict[str, str]) -> str | None:
    """The kernel kind a decorator's dotted name makes, resolved through the module's imports, or None."""
    head, _, rest = decorator.partition(".")
    full = ".".join(p for p in (imports.get(head, head), rest) if p)
    if full.endswith("gluon.jit"):
        return "gluon.jit"
    if full.endswith("cute.kernel"):
        return "cute.kernel"
    if full in ("triton.jit", "triton.language.jit", "triton.runtime.jit.jit") or full.endswith("triton.jit"):
        return "triton.jit"
    return None


def decorated_kernels(wheel: Path) -> dict[str, list[str]]:
    """Per kernel kind, the ``module:function`` of every function the wheel's Python decorates so."""
    found: dict[str, list[str]] = {k: [] for k in KINDS}
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if not name.endswith(".py"):
                continue
            try:
                tree = ast.parse(z.read(name))
            except SyntaxError:
                continue
            imports = _imports(tree)
            module = name[:-3].replace("/", ".").removesuffix(".__init__")
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    kinds = {kind_of(_dotted(d), imports) for d in node.decorator_list} - {None}
                    for kind in kinds:
                        found[kind].append(f"{module}:{node.name}")
    return found


def coverage(wheel: Path) -> dict:
    """The counts a cell's source functions are stated against, by kind, and the files read."""
    kernels = decorated_kernels(wheel)
    return {"file": wheel.name, "decorated": {k: len(v) for k, v in kernels.items()},
            "modules_with_kernels": len({f.split(":")[0] for v in kernels.values() for f in v}),
            "functions": kernels, "names_repeated": sum(n - 1 for n in Counter(
                f.split(":")[1] for v in kernels.values() for f in v).values() if n > 1)}
