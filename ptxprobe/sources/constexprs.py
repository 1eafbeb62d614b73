"""A spec's constexpr values, checked against how the kernel's body uses each parameter before Triton sees them.

Triton takes any Python value as a constexpr and fails only deep inside code generation, blaming the kernel's
line (``BLOCK = "64"`` in ``tl.arange(0, BLOCK)``: ``AttributeError("'str' object has no attribute 'type'")``).
A spec value is the user's input, so it is refused here with the key, the value and what is expected, read from
the body: a name in ``tl.arange``, ``range`` or a shape takes an integer; one in arithmetic a number; one given
as ``dtype=``, to ``.to()`` or ``tl.cast`` a dtype (a plain ``"fp16"`` there is made the dtype). Strings are
constexprs Triton compiles (``ACT == "relu"``), so a word is kept; a quoted number is refused wherever it is.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

from ptxprobe.core.errors import SpecError
from ptxprobe.sources.offline import _DTYPE_REF, _dtype, constexpr_value

ANY = 'an integer, a float, a bool, a string, or a dtype ({dtype = "fp16"} or "tl.float16")'
_INT_CALLS = {"arange": None, "range": None, "static_range": None}  # every argument is an integer
_SHAPE_ARG = {"zeros": 0, "empty": 0, "full": 0, "reshape": 1, "view": 1, "broadcast_to": 1}  # a shape's position
_DTYPE_ARG = {"to": 0, "cast": 1, "zeros": 1, "empty": 1, "full": 2}  # a dtype's position
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$|^\s*(true|false|True|False)\s*$")


def uses(fn) -> dict[str, tuple[str, str]]:
    """parameter -> (what its uses need: "dtype", "int" or "number"; the expression that needs it)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.fn)))
    except (OSError, TypeError, SyntaxError, AttributeError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    rank = {"dtype": 0, "int": 1, "number": 2}

    def need(node, kind: str, where) -> None:
        if isinstance(node, ast.Name) and rank[kind] < rank.get(found.get(node.id, ("", ""))[0], 3):
            found[node.id] = (kind, ast.unparse(where)[:60])

    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH):
            need(node.left, "number", node)
            need(node.right, "number", node)
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        for k in node.keywords:
            if k.arg == "dtype":
                need(k.value, "dtype", node)
        if name in _DTYPE_ARG and len(node.args) > _DTYPE_ARG[name]:
            need(node.args[_DTYPE_ARG[name]], "dtype", node)
        if name in _INT_CALLS:
            for a in node.args:
                need(a, "int", node)
        if name in _SHAPE_ARG and len(node.args) > _SHAPE_ARG[name]:
            shape = node.args[_SHAPE_ARG[name]]
            for a in shape.elts if isinstance(shape, (ast.List, ast.Tuple)) else ():
                need(a, "int", node)
    return found


def checked(name: str, value, use: tuple[str, str] | None, spec_path) -> object:
    """A spec constexpr as Triton wants it, or refused with the key, the value and what is expected."""
    kind, where = use or ("", "")
    uses_it = f" ({where} uses it)" if where else ""

    def refuse(expected: str):
        return SpecError(f"{spec_path}: constexprs {name} = {value!r}: expected {expected}")

    if isinstance(value, (list, tuple)) or not isinstance(value, (bool, int, float, str, dict, type(None))):
        raise refuse({"int": "an integer", "number": "a number", "dtype": 'a Triton dtype, e.g. "fp16"'}.get(kind, ANY)
                     + uses_it)
    if kind == "dtype":
        if isinstance(value, dict):
            return constexpr_value(name, value)
        if isinstance(value, str):
            m = _DTYPE_REF.match(value.strip())
            try:
                return _dtype(m.group(1) if m else value.strip(), f"constexpr {name}")
            except SpecError:
                pass
        raise refuse(f'a Triton dtype{uses_it}, e.g. "fp16", "bf16", "fp32" or {{dtype = "fp8e5"}}')
    if isinstance(value, str) and _NUMBER.match(value):
        raise refuse(f"{'an integer' if kind == 'int' else 'a number or a bool'}, written without quotes "
                     f"({name} = {value.strip().lower()}){uses_it}")
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise refuse(f"an integer{uses_it}")
    if kind == "number" and not isinstance(value, (int, float)):
        raise refuse(f"a number{uses_it}")
    return constexpr_value(name, value)
