"""What a Triton function's body says about its parameters, read from its source without running it: which
pointers it loads from and stores to, the element type it stores (a cast the code writes, or the type the value is
computed in), which names are integers, how many grid axes it uses. ``spec init`` guesses a spec from it."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from ptxprobe.sources.launch import TRITON_TORCH


@dataclass
class Usage:
    """What a Triton function's body says about its parameters."""

    loaded: set = field(default_factory=set)  # bases of tl.load addresses
    stored: dict = field(default_factory=dict)  # bases of tl.store addresses -> element type stored, or None
    cast: set = field(default_factory=set)  # the stored bases whose type is a cast the code writes
    integers: set = field(default_factory=set)  # names in range/cdiv/comparisons/address offsets
    grid_dims: int = 1  # tl.program_id axes used


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _base(expr) -> str | None:
    """The pointer an address expression starts from: ``x_ptr`` in ``x_ptr + offs * stride``."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _base(expr.left) or (_base(expr.right) if isinstance(expr.op, ast.Add) else None)
    if isinstance(expr, ast.Call) and _call_name(expr) in ("advance", "make_block_ptr") and expr.args:
        return _base(expr.args[0])
    return None


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_TL_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64", "int32": "i32",
             "int64": "i64", "int8": "i8", "float8e5": "fp8e5", "float8e4nv": "fp8e4nv"}
_FP32_CALLS = {"dot", "sum", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "softmax", "fma"}  # fp32 results


def _tl_type(node) -> str | None:
    """fp16 for ``tl.float16`` (or a name Triton's types spell)."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return _TL_TYPES.get(name, name if name in TRITON_TORCH else None)


def _cast_type(value) -> str | None:
    """fp16 of ``acc.to(tl.float16)``: a cast the code writes, which decides what is stored."""
    if isinstance(value, ast.Call) and _call_name(value) == "to" and value.args:
        return _tl_type(value.args[0])
    return None


def _value_type(value, types: dict[str, str]) -> str | None:
    """The element type an expression has as far as the code says: a cast, ``tl.zeros(..., dtype=)``, a ``tl.dot``
    or a reduction (fp32 accumulators), or the type of a local it is computed from."""
    cast = _cast_type(value)
    if cast:
        return cast
    if isinstance(value, ast.Name):
        return types.get(value.id)
    if isinstance(value, ast.Call):
        name = _call_name(value)
        dtype = next((k.value for k in value.keywords if k.arg == "dtype"), None)
        if name in ("zeros", "full", "arange") and dtype is not None:
            return _tl_type(dtype)
        if name in _FP32_CALLS:
            return "fp32"
    if isinstance(value, (ast.BinOp, ast.Call, ast.UnaryOp)):
        return next((types[n] for n in _names(value) if n in types), None)
    return None


def _local_types(func) -> tuple[dict[str, str], dict[str, str]]:
    """(each local's element type where the code says it, the locals assigned an explicit cast): assignments in
    source order, a few passes so a value computed from a later-typed local is typed too."""
    types: dict[str, str] = {}
    casts: dict[str, str] = {}
    assigns = [n for n in ast.walk(func) if isinstance(n, (ast.Assign, ast.AugAssign))]
    for _ in range(3):
        for node in assigns:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
                node, "target", None)
            if isinstance(target, ast.Name) and target.id not in types:
                t = _value_type(node.value, types)
                if t:
                    types[target.id] = t
                    if _cast_type(node.value):
                        casts[target.id] = t
    return types, casts


def _stored(node: ast.Call, types: dict[str, str], casts: dict[str, str]) -> tuple[str | None, bool]:
    """(the element type ``tl.store(p, value)`` stores, whether the code casts it): fp16 of ``acc.to(tl.float16)``
    or of a local assigned so; else the type the value is computed in (a guess: a store converts to the pointer's
    type)."""
    value = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "value"), None)
    if value is None:
        return None, False
    cast = _cast_type(value) or (casts.get(value.id) if isinstance(value, ast.Name) else None)
    return (cast, True) if cast else (_value_type(value, types), False)


def usage_of(source: str) -> Usage:
    """Read a function's source for how it uses its parameters (a local alias of a pointer counts as it)."""
    func = next(n for n in ast.walk(ast.parse(textwrap.dedent(source))) if isinstance(n, ast.FunctionDef))
    alias = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            b = _base(node.value)
            if b and b != node.targets[0].id:
                alias[node.targets[0].id] = b

    def root(name):
        for _ in range(8):
            if name not in alias:
                break
            name = alias[name]
        return name

    u = Usage()
    types, casts = _local_types(func)
    for node in ast.walk(func):
        if isinstance(node, ast.Compare):
            u.integers |= _names(node)
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name in ("load", "store", "make_block_ptr", "make_tensor_descriptor") or name.startswith("atomic_"):
            addr = node.args[0] if node.args else next((k.value for k in node.keywords
                                                        if k.arg in ("pointer", "base")), None)
            if addr is None:
                continue
            b = root(_base(addr))
            if b is not None:
                if name == "store" or name.startswith("atomic_"):
                    elem, cast = _stored(node, types, casts) if name == "store" else (None, False)
                    if cast or not u.stored.get(b):
                        u.stored[b] = elem or u.stored.get(b)
                    if cast:
                        u.cast.add(b)
                else:
                    u.loaded.add(b)
            u.integers |= {n for sub in ast.walk(addr) if isinstance(sub, ast.BinOp)
                           and isinstance(sub.op, ast.Mult) for n in _names(sub)}
        elif name in ("range", "static_range", "cdiv", "program_id") or name.startswith("multiple_of"):
            u.integers |= {n for a in node.args for n in _names(a)}
            if name == "program_id":
                axis = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
                if isinstance(axis, ast.Constant) and isinstance(axis.value, int):
                    u.grid_dims = max(u.grid_dims, axis.value + 1)
    return u
