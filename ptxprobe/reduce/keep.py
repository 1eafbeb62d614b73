"""``--keep EXPR``: a property of the difference, over the sweep's row fields, evaluated without ``eval``.

An expression is parsed with ``ast`` and only arithmetic, comparisons, ``and``/``or``/``not``, numbers and the
row's numeric fields (and each one's ``baseline_`` twin) are allowed; anything else is refused when the
expression is read, in one line naming what is not allowed, before any assembly.
"""

from __future__ import annotations

import ast
import functools
import operator
from dataclasses import dataclass

from ptxprobe.core.errors import SpecError
from ptxprobe.records.rows import BOOL, FLOAT, INT, STATIC

NUMERIC = tuple(c.name for c in STATIC if c.type in (INT, FLOAT, BOOL))
FIELDS = frozenset(NUMERIC) | frozenset(f"baseline_{n}" for n in NUMERIC if not n.startswith("baseline_"))

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_CALLS = {"abs": abs, "min": min, "max": max}


@dataclass(frozen=True)
class Keep:
    """A checked ``--keep`` expression (its text; the tree is parsed again, memoised)."""

    text: str

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(sorted({n.id for n in ast.walk(_tree(self.text)) if isinstance(n, ast.Name)} - set(_CALLS)))


class _Missing(Exception):
    """A field the row does not have a value for (a failed assembly, a baseline with several values)."""


@functools.lru_cache(maxsize=64)
def _tree(text: str) -> ast.Expression:
    return ast.parse(text, mode="eval")


def _check(node: ast.AST, text: str) -> None:
    allowed = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name,
               ast.Load, ast.Constant, ast.Call, *_BINARY, *_COMPARE, *_UNARY)
    for n in ast.walk(node):
        if not isinstance(n, allowed):
            raise SpecError(f"--keep {text!r}: {type(n).__name__} is not allowed (arithmetic, comparisons, "
                            "and/or/not, numbers, abs/min/max and row fields only)")
        if isinstance(n, ast.Constant) and (isinstance(n.value, str) or n.value is None):
            raise SpecError(f"--keep {text!r}: only numbers are allowed as constants, not {n.value!r}")
        if isinstance(n, ast.Call) and (not isinstance(n.func, ast.Name) or n.func.id not in _CALLS or n.keywords):
            raise SpecError(f"--keep {text!r}: only abs(), min() and max() may be called")
        if isinstance(n, ast.Name) and n.id not in FIELDS and n.id not in _CALLS:
            near = sorted(f for f in FIELDS if n.id in f or f in n.id)[:4]
            hint = f" (did you mean {', '.join(near)}?)" if near else " (fields: the sweep's numeric row columns " \
                                                                     "and their baseline_ twins, docs/schema.md)"
            raise SpecError(f"--keep {text!r}: no row field {n.id!r}{hint}")


def parse_keep(text: str) -> Keep:
    """A ``--keep`` expression, checked (bad syntax, a call, an attribute, an unknown field: SpecError)."""
    if not text or not text.strip():
        raise SpecError("--keep: empty expression")
    try:
        tree = _tree(text.strip())
    except SyntaxError as exc:
        raise SpecError(f"--keep {text!r}: not an expression ({exc.msg})") from None
    _check(tree, text)
    return Keep(text.strip())


def _value(node: ast.AST, row: dict):
    if isinstance(node, ast.Expression):
        return _value(node.body, row)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        v = row.get(node.id)
        if v is None:
            raise _Missing(node.id)
        return v
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_value(node.left, row), _value(node.right, row))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_value(node.operand, row))
    if isinstance(node, ast.BoolOp):
        vals = (_value(v, row) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _value(node.left, row)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, row)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        return _CALLS[node.func.id](*(_value(a, row) for a in node.args))
    raise SpecError(f"--keep: {type(node).__name__} is not allowed")


def holds(keep: Keep | None, row: dict) -> bool:
    """Does the row have the property? No keep: yes; a field without a value, or 0-division: no."""
    if keep is None:
        return True
    try:
        return bool(_value(_tree(keep.text), row))
    except (_Missing, ZeroDivisionError, TypeError):
        return False


def with_baseline_fields(row: dict, baseline_rows: list[dict]) -> dict:
    """The row with ``baseline_<field>`` for every numeric field the baseline's assemblies agree on (the sweep's
    rows carry only baseline_registers and baseline_capmerc_bytes)."""
    out = dict(row)
    for name in NUMERIC:
        key = f"baseline_{name}"
        if name.startswith("baseline_") or out.get(key) is not None:
            continue
        values = {r.get(name) for r in baseline_rows}
        out[key] = values.pop() if len(values) == 1 else None
    return out
