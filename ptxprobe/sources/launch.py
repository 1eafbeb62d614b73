"""How to run a kernel ptxprobe did not write: its arguments, grid, problem sizes and check.

A user kernel's spec file (JSON or TOML; for a Triton function the same file that holds its
signature) may carry a ``launch`` table. Static sweeps ignore it; ``rename-sweep --run``
needs it. Everything here is pure and needs no GPU, so a bad spec fails before any GPU time
is spent, and every argument is checked against the entry's own PTX parameter list.

    [launch]
    sizes = [{n = 16777216}]          # one timed group per size set
    numerics_sizes = {n = 65536}      # the (smaller) problem whose outputs are compared
    grid = ["cdiv(n, 256)"]           # expressions over the sizes; missing dims are 1
    block = [256]                     # threads per block (.cu/.ptx/.cubin; Triton uses num_warps)
    shared_bytes = 0                  # dynamic shared memory
    flops = "2 * n"                   # optional: TFLOPS columns
    bytes = "12 * n"                  # optional: GB/s columns
    reference = "ref.py:saxpy"        # optional: float64 outputs from the inputs
    tolerance = 1e-6                  # optional: max relative error vs the reference
    args = [
      {name = "a", value = 2.0},                                          # scalar: type from the PTX
      {name = "x", dtype = "float32", shape = ["n"]},                     # tensor, randn by default
      {name = "y", dtype = "float32", shape = ["n"], output = true},     # output: compared across names
      {name = "n", value = "n"},
    ]
"""

from __future__ import annotations

import ast
import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path

import tomllib

from ptxprobe.core.errors import SpecError
from ptxprobe.ptx.text import PtxParam, entry_params

INITS = ("randn", "rand", "zeros", "ones", "arange", "randint", "nan")
LAUNCH_KEYS = {
    "args",
    "sizes",
    "numerics_sizes",
    "grid",
    "block",
    "shared_bytes",
    "flops",
    "bytes",
    "reference",
    "tolerance",
}
ARG_KEYS = {"name", "dtype", "shape", "init", "value", "output", "scale", "low", "high"}

# PTX parameter types and the C type a scalar of that type is passed as (its ctypes name)
PTX_SCALAR_CTYPES = {
    "f32": "c_float",
    "f64": "c_double",
    "u8": "c_uint8",
    "s8": "c_int8",
    "b8": "c_uint8",
    "u16": "c_uint16",
    "s16": "c_int16",
    "b16": "c_uint16",
    "u32": "c_uint32",
    "s32": "c_int32",
    "b32": "c_uint32",
    "u64": "c_uint64",
    "s64": "c_int64",
    "b64": "c_uint64",
}


# --- expressions over problem sizes ----------------------------------------------------------

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max, "int": int, "ceil": math.ceil, "log2": math.log2}


def evaluate(expr: str | int | float, sizes: dict) -> int | float:
    """An arithmetic expression over the size names (``cdiv(n, 256)``, ``2*n*n``); nothing else runs."""
    if isinstance(expr, bool) or not isinstance(expr, (str, int, float)):
        raise SpecError(f"expected a number or an expression, got {expr!r}")
    if not isinstance(expr, str):
        return expr
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"bad expression {expr!r}: {exc.msg}") from exc

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sizes:
                raise SpecError(f"expression {expr!r}: unknown size {node.id!r} (sizes: {', '.join(sizes) or 'none'})")
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise SpecError(f"expression {expr!r}: only numbers, sizes, + - * / // % ** and {sorted(_FUNCS)} are allowed")

    return ev(tree)


# --- the spec -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a tensor (``shape`` given) or a scalar (``value``)."""

    name: str
    shape: tuple[str | int, ...] | None = None
    dtype: str | None = None  # torch dtype name for tensors, e.g. "float16"
    init: str = "randn"
    value: str | int | float | None = None
    output: bool = False
    scale: float = 1.0  # randn/rand values are multiplied by it
    low: int = 0  # randint range
    high: int = 100

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class LaunchSpec:
    args: tuple[ArgSpec, ...]
    grid: tuple[str | int, ...]
    sizes: tuple[tuple[tuple[str, int], ...], ...]
    numerics_sizes: tuple[tuple[str, int], ...]
    block: tuple[str | int, ...] | None = None
    shared_bytes: str | int = 0
    flops: str | None = None
    bytes: str | None = None
    reference: str | None = None
    tolerance: float | None = None
    source: str = ""

    @property
    def outputs(self) -> list[ArgSpec]:
        return [a for a in self.args if a.output]

    def size_sets(self) -> list[dict]:
        return [dict(s) for s in self.sizes]

    def numerics_size_set(self) -> dict:
        return dict(self.numerics_sizes)


def size_label(sizes: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def _sizes(value, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise SpecError(f"{where}: a table of integer sizes, e.g. {{n = 1048576}}; got {value!r}")
    return tuple(value.items())


def _dims(value, where: str) -> tuple:
    dims = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if not 1 <= len(dims) <= 3:
        raise SpecError(f"{where}: 1 to 3 dimensions, got {value!r}")
    return dims


# torch's dtype names, spelled out so a static sweep checks a spec without importing torch (a GPU run resolves them)
TORCH_DTYPES = frozenset({
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "complex64", "cfloat", "complex128",
    "cdouble", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "short", "int32", "int", "int64", "long",
    "bool", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2",
})


# Triton element types -> the torch dtype a launch tensor of them is allocated as
TRITON_TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64", "i32": "int32",
                "i64": "int64", "i16": "int16", "i8": "int8", "u8": "uint8", "i1": "bool",
                "fp8e5": "float8_e5m2", "fp8e4nv": "float8_e4m3fn"}


def is_torch_dtype(name: str) -> bool:
    """A dtype name torch knows; decided without importing torch (the static path never does)."""
    return name in TORCH_DTYPES


def _arg(d: dict, where: str) -> ArgSpec:
    if not isinstance(d, dict) or "name" not in d:
        raise SpecError(f"{where}: each argument is a table with a 'name'; got {d!r}")
    unknown = set(d) - ARG_KEYS
    if unknown:
        raise SpecError(f"{where} ({d['name']}): unknown keys {sorted(unknown)} (known: {sorted(ARG_KEYS)})")
    if ("shape" in d) == ("value" in d):
        raise SpecError(f"{where} ({d['name']}): give either 'shape' (a tensor) or 'value' (a scalar)")
    if "shape" in d:
        shape = d["shape"]
        if not isinstance(shape, list) or not shape:
            raise SpecError(f"{where} ({d['name']}): shape is a non-empty list of sizes or expressions")
        if "dtype" not in d:
            raise SpecError(f"{where} ({d['name']}): a tensor needs a dtype (e.g. 'float16')")
        if not is_torch_dtype(str(d["dtype"])):
            raise SpecError(f"{where} ({d['name']}): {d['dtype']!r} is not a torch dtype (e.g. float16, int32)")
        init = d.get("init", "nan" if d.get("output") else "randn")
        if init not in INITS:
            raise SpecError(f"{where} ({d['name']}): init {init!r} is not one of {INITS}")
        return ArgSpec(
            d["name"],
            tuple(shape),
            str(d["dtype"]),
            init,
            None,
            bool(d.get("output", False)),
            float(d.get("scale", 1.0)),
            int(d.get("low", 0)),
            int(d.get("high", 100)),
        )
    if d.get("output"):
        raise SpecError(f"{where} ({d['name']}): a scalar cannot be an output")
    return ArgSpec(d["name"], value=d["value"])


def parse_launch(table: dict, source: str = "", base: Path | None = None) -> LaunchSpec:
    """The ``launch`` table of a spec file, validated (sizes and expressions checked by evaluating them);
    with ``base`` (the spec file's folder) a ``reference`` file path is taken relative to it."""
    where = f"{source}: [launch]" if source else "[launch]"
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table")
    unknown = set(table) - LAUNCH_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(LAUNCH_KEYS)})")
    for key in ("args", "grid", "sizes"):
        if key not in table:
            raise SpecError(f"{where}: '{key}' is required")
    raw_sizes = table["sizes"] if isinstance(table["sizes"], list) else [table["sizes"]]
    if not raw_sizes:
        raise SpecError(f"{where}: sizes is empty")
    sizes = tuple(_sizes(s, f"{where} sizes") for s in raw_sizes)
    numerics = _sizes(table["numerics_sizes"], f"{where} numerics_sizes") if "numerics_sizes" in table else sizes[0]
    args = tuple(_arg(a, f"{where} args[{i}]") for i, a in enumerate(table["args"]))
    names = [a.name for a in args]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"{where}: argument names repeat: {dup}")
    spec = LaunchSpec(
        args=args,
        grid=_dims(table["grid"], f"{where} grid"),
        sizes=sizes,
        numerics_sizes=numerics,
        block=_dims(table["block"], f"{where} block") if "block" in table else None,
        shared_bytes=table.get("shared_bytes", 0),
        flops=table.get("flops"),
        bytes=table.get("bytes"),
        reference=spec_relative(table["reference"], base, f"{where} reference")
        if base is not None and isinstance(table.get("reference"), str) else table.get("reference"),
        tolerance=float(table["tolerance"]) if "tolerance" in table else None,
        source=source,
    )
    if not spec.outputs:
        raise SpecError(f"{where}: mark at least one tensor argument 'output = true' (what the names are compared on)")
    if spec.reference is not None and ":" not in spec.reference:
        raise SpecError(f"{where}: reference is 'module:function' or 'file.py:function', got {spec.reference!r}")
    for s in [*spec.size_sets(), spec.numerics_size_set()]:
        resolve(spec, s)  # every expression must evaluate for every size set
    return spec


def spec_relative(target: str, base: Path, what: str) -> str:
    """``ref.py:fn`` (or ``pkg.ref:fn`` with ``pkg/ref.py`` beside the spec) -> that file's path under ``base``,
    the spec file's folder: paths inside a spec never depend on the working directory. A module that is not a
    file beside the spec is left to the import system (an installed package)."""
    module, sep, attr = target.rpartition(":")
    if not sep or not module:
        return target
    if module.endswith(".py"):
        path = Path(module).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise SpecError(f"{what}: no file {path} (paths in a spec are relative to the spec file's folder, "
                            f"{base})")
        return f"{path}:{attr}"
    beside = base / (module.replace(".", "/") + ".py")
    return f"{beside}:{attr}" if beside.is_file() else target


def unfilled(spec, where: str = "") -> list[str]:
    """The keys still holding ``"TODO"`` (what ``ptxprobe spec init`` could not infer), as dotted paths."""
    if isinstance(spec, str):
        return [where] if spec.strip().upper() == "TODO" else []
    if isinstance(spec, dict):
        return [k for key, v in spec.items() for k in unfilled(v, f"{where}.{key}" if where else str(key))]
    if isinstance(spec, list):
        out = []
        for i, v in enumerate(spec):
            label = v.get("name", i) if isinstance(v, dict) else i
            out += unfilled(v, f"{where}[{label}]")
        return out
    return []


SPEC_KEYS = {"signature", "constexprs", "divisible_by_16", "num_warps", "num_stages", "maxnreg", "name", "launch",
             "nvcc"}


def load_kernel_spec(path: str | Path) -> dict:
    """A user kernel's spec (JSON or TOML): signature, constexprs, divisible_by_16, num_warps, num_stages, launch."""
    p = Path(path)
    try:
        text = p.read_text()
        spec = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except FileNotFoundError as exc:
        raise SpecError(f"spec file not found: {p}") from exc
    except IsADirectoryError as exc:
        raise SpecError(f"spec {p} is a directory, not a file") from exc
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {exc}") from exc
    if not isinstance(spec, dict):
        raise SpecError(f"{p}: a spec is a table (JSON object), not {type(spec).__name__}")
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise SpecError(f"{p}: unknown keys {sorted(unknown)}; a spec may have {sorted(SPEC_KEYS)}")
    todo = unfilled(spec)
    if todo:
        raise SpecError(f"{p}: still \"TODO\" (spec init could not infer them; docs/spec.md says what each "
                        f"takes): {', '.join(todo)}")
    return spec


def load_launch(spec_path: str | Path) -> LaunchSpec | None:
    """The launch spec in a spec file, or None when it has no ``launch`` table."""
    d = load_kernel_spec(spec_path)
    if "launch" not in d:
        return None
    spec = parse_launch(d["launch"], str(spec_path), base=Path(spec_path).resolve().parent)
    signature = d.get("signature") if isinstance(d.get("signature"), dict) else {}
    for a in spec.args:  # the kernel compiled for *fp16 would read float32 launch memory as halves: garbage
        typ = signature.get(a.name)
        want = TRITON_TORCH.get(typ[1:]) if a.is_tensor and isinstance(typ, str) and typ.startswith("*") else None
        if want and want != a.dtype:
            raise SpecError(f"{spec_path}: {a.name} is {typ} in the signature but {a.dtype} in [launch]: the kernel "
                            f"would read {a.dtype} memory as {typ[1:]}; make them agree ({want} in [launch], or "
                            f"*{triton_type_of(a.dtype, a.dtype)} in the signature)")
    return spec


def triton_type_of(dtype: str | None, default: str) -> str:
    """The Triton element type (``fp16``) a torch dtype (``float16``) is, ``TRITON_TORCH`` read backwards."""
    return next((t for t, d in TRITON_TORCH.items() if d == dtype), default)


@dataclass(frozen=True)
class Resolved:
    """A launch spec at one size set: every expression evaluated."""

    sizes: dict
    grid: tuple[int, int, int]
    block: tuple[int, int, int] | None
    shared_bytes: int
    shapes: dict  # tensor name -> tuple of ints
    scalars: dict  # scalar name -> number
    flops: float | None
    bytes: float | None


def _pad3(dims) -> tuple[int, int, int]:
    vals = [int(d) for d in dims] + [1] * (3 - len(dims))
    if any(v < 1 for v in vals):
        raise SpecError(f"grid/block dimensions must be >= 1, got {vals}")
    return vals[0], vals[1], vals[2]


def resolve(spec: LaunchSpec, sizes: dict) -> Resolved:
    def ev(x):
        return evaluate(x, sizes)

    shapes, scalars = {}, {}
    for a in spec.args:
        if a.is_tensor:
            shape = tuple(int(ev(s)) for s in a.shape)
            if any(s < 1 for s in shape):
                raise SpecError(f"{a.name}: shape {shape} at sizes {size_label(sizes)} has an empty dimension")
            shapes[a.name] = shape
        else:
            scalars[a.name] = ev(a.value)
    return Resolved(
        sizes=dict(sizes),
        grid=_pad3([ev(g) for g in spec.grid]),
        block=_pad3([ev(b) for b in spec.block]) if spec.block is not None else None,
        shared_bytes=int(ev(spec.shared_bytes)),
        shapes=shapes,
        scalars=scalars,
        flops=float(ev(spec.flops)) if spec.flops is not None else None,
        bytes=float(ev(spec.bytes)) if spec.bytes is not None else None,
    )


# --- the entry's own parameters (read by ptxprobe.ptx.text) -------------------------------------------


def scalar_ctypes(spec: LaunchSpec, params: list[PtxParam], entry: str) -> dict[str, str]:
    """Check the spec's arguments against the entry's parameters; the C type of each scalar."""
    if len(params) != len(spec.args):
        have = ", ".join(f"{p.name}:.{p.type}" for p in params)
        raise SpecError(
            f"{spec.source}: {len(spec.args)} launch arguments for the {len(params)} parameters of {entry} ({have})"
        )
    out = {}
    for a, p in zip(spec.args, params, strict=True):
        if p.count != 1 or p.type not in PTX_SCALAR_CTYPES:
            raise SpecError(f"{entry}: parameter {p.name} (.{p.type}[{p.count}]) is passed by value: not supported")
        if a.is_tensor and not p.is_pointer_sized:
            raise SpecError(f"{entry}: argument {a.name} is a tensor; parameter {p.name} is .{p.type}, not a pointer")
        if not a.is_tensor:
            out[a.name] = PTX_SCALAR_CTYPES[p.type]
    return out


def check_triton_args(spec: LaunchSpec, runtime_params: list[str], function: str) -> None:
    """A Triton function's launch args are its non-constexpr parameters, in order (constexprs come from the spec)."""
    given = [a.name for a in spec.args]
    if given != runtime_params:
        raise SpecError(
            f"{spec.source}: launch args {given} must be {function}'s non-constexpr parameters, in order: "
            f"{runtime_params}"
        )


def check_against_source(
    spec: LaunchSpec, ptx: str, entry: str, kind: str, runtime_params: list[str] = ()
) -> dict[str, str]:
    """Fail early (no GPU needed) when a launch spec cannot fit the kernel it is given for.

    Returns the C type of each scalar argument, read from the entry's PTX parameters (empty
    for a Triton function, whose launcher types its own arguments). A Triton function is
    checked against its own parameters (``runtime_params``): its PTX entry has extra hidden ones.
    """
    if kind in ("triton", "triton-user"):
        check_triton_args(spec, list(runtime_params), entry)
        return {}
    if spec.block is None:
        raise SpecError(f"{spec.source}: [launch] needs 'block' (threads per block) for a {kind} kernel")
    return scalar_ctypes(spec, entry_params(ptx, entry), entry)
