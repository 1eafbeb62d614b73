"""``ptxprobe spec init``: a commented kernel spec written from a kernel's own parameters.

For a Triton or Gluon function each parameter's type comes from its annotation, from how the body
uses it (the base of a ``tl.load``/``tl.store`` address is a pointer; a name in ``range``,
``cdiv``, a comparison or an address offset is an integer) or from its name (``x_ptr``,
``n_elements``, ``stride_am``, ``eps``); a constexpr gets its default or a placeholder. For a
``.cu`` (or ``.ptx``) entry the parameter types are the PTX nvcc emits and the names and C types
the source signature. What could not be inferred is written ``"TODO"``, which the spec loader
refuses by key until it is filled in; every guess carries a comment saying so.
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.core.items import split_entry
from ptxprobe.ptx.mangling import own_identifier
from ptxprobe.ptx.text import entry_params
from ptxprobe.sources.cuda import NvccOptions, emit_cuda
from ptxprobe.sources.files import load_ptx
from ptxprobe.sources.launch import TRITON_TORCH, triton_type_of
from ptxprobe.sources.triton import load_kernel
from ptxprobe.sources.usage import Usage, usage_of

TODO = "TODO"

# C element types in a .cu signature -> torch dtype
C_DTYPES = {"float": "float32", "double": "float64", "half": "float16", "__half": "float16",
            "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "int": "int32", "int32_t": "int32",
            "unsigned": "int32", "uint32_t": "int32", "long long": "int64", "int64_t": "int64",
            "uint64_t": "int64", "short": "int16", "int16_t": "int16", "char": "int8", "int8_t": "int8",
            "signed char": "int8", "unsigned char": "uint8", "uint8_t": "uint8", "bool": "bool"}

_POINTER_NAME = re.compile(r"ptr|^(in|out|input|output|src|dst)(_|$)|_(in|out|input|output|src|dst)$", re.I)
_STRIDE_NAME = re.compile(r"stride", re.I)
_SIZE_NAME = re.compile(r"^([MNKBHDTLSE]|n|m|k|numel|size|seq_?len|batch|heads?|dim|n_\w+|num_\w+|\w+_(size|len|"
                        r"dim|count|elements|rows|cols)|rows|cols|width|height)$", re.I)
_FLOAT_NAME = re.compile(r"scale|eps|alpha|beta|gamma|temperature|lr|momentum|decay|factor|slope|theta|p_drop",
                         re.I)
_FLAG_CONSTEXPR = re.compile(r"^(IS|HAS|USE|EVEN|ENABLE|ALLOW)_|CAUSAL|_ENABLED$", re.I)
_BLOCK_CONSTEXPR = re.compile(r"BLOCK|TILE|SIZE|^B[MNKD]$|^[XYR]BLOCK$", re.I)


@dataclass
class Param:
    """One parameter as the spec will say it: its Triton type (or TODO) and why."""

    name: str
    type: str
    why: str
    value: object = None  # a constexpr's value
    guessed: bool = False

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("*")

    @property
    def is_size(self) -> bool:
        return self.type.startswith(("i", "u")) and not _STRIDE_NAME.search(self.name)


def triton_param(p, u: Usage) -> Param:
    """A non-constexpr parameter's type: annotation, then the body's use, then the name."""
    from triton.compiler.code_generator import str_to_ty

    name = p.name
    if p.annotation and p.annotation not in ("const",):
        try:
            str_to_ty(p.annotation, None)
            return Param(name, p.annotation, "its annotation")
        except Exception:  # an annotation Triton does not spell as a type
            pass
    pointer_why = ("stored to" if name in u.stored else "loaded from" if name in u.loaded
                   else "its name" if _POINTER_NAME.search(name) else None)
    if pointer_why:
        elem = u.stored.get(name)
        if elem and name in u.cast:
            return Param(name, f"*{elem}", f"pointer: {pointer_why}, .to({elem}) stored")
        if elem:
            return Param(name, f"*{elem}", f"pointer: {pointer_why}; guessed {elem}, the type the stored value is "
                                           "computed in", guessed=True)
        cast = {u.stored[b] for b in u.cast if u.stored.get(b)}
        elem = cast.pop() if len(cast) == 1 else "fp32"  # inputs of the type the kernel casts its output to, or fp32
        return Param(name, f"*{elem}", f"pointer: {pointer_why}; element type guessed {elem}", guessed=True)
    if _FLOAT_NAME.search(name):
        return Param(name, "fp32", "a float by its name", guessed=True)
    if _STRIDE_NAME.search(name) or _SIZE_NAME.match(name) or name in u.integers:
        why = "an integer by its name" if name not in u.integers else "an integer: used in an offset, range or test"
        return Param(name, "i32", why, guessed=True)
    return Param(name, TODO, 'TODO: type: "*fp16"/"*fp32" (a pointer), "i32", "i64" or "fp32" (a scalar)')


def constexpr_param(p) -> Param:
    name = p.name
    if p.has_default and isinstance(p.default, (bool, int, float, str)):
        return Param(name, "constexpr", "the function's default", p.default)
    if _FLAG_CONSTEXPR.search(name):
        return Param(name, "constexpr", "placeholder: a flag by its name", False, guessed=True)
    if re.search(r"DTYPE", name, re.I):
        return Param(name, "constexpr", 'placeholder: a dtype, written {dtype = "fp16"}', {"dtype": "fp16"},
                     guessed=True)
    if re.search(r"GROUP", name, re.I):
        return Param(name, "constexpr", "placeholder: a group size", 8, guessed=True)
    if _BLOCK_CONSTEXPR.search(name):
        return Param(name, "constexpr", "placeholder: a block size (a power of 2)", 64, guessed=True)
    return Param(name, "constexpr", "TODO: value (an int, a bool, a string or {dtype = \"fp16\"})", TODO)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def _line(text: str, comment: str, width: int = 48) -> str:
    return f"{text:<{width}} # {comment}" if comment else text


def _launch(runtime: list[Param], grid: list[str], block: int | None, grid_why: str) -> list[str]:
    """The ``[launch]`` skeleton: every value a guess that loads, each guess said."""
    sizes = [p.name for p in runtime if p.is_size] or ["n"]
    big, small = (1048576, 65536) if len(sizes) == 1 else (1024, 256)
    shape = [sizes[0]]
    outputs = [p.name for p in runtime if p.is_pointer and p.value == "output"]
    if not outputs:
        outputs = [p.name for p in runtime if p.is_pointer][-1:]
    out = [
        "",
        "[launch]",
        "# How to run the kernel on a GPU: read by `rename-sweep --run`; a static sweep only checks that it fits",
        "# the kernel's parameters. Every value below is a guess from the parameter names: check them before --run.",
        _line("sizes = [" + _toml({s: big for s in sizes}) + "]", "one timed group per set of problem sizes"),
        _line("numerics_sizes = " + _toml({s: small for s in sizes}), "the smaller problem whose outputs are compared"),
        _line("grid = " + _toml(grid), grid_why),
    ]
    if block is not None:
        out.append(_line(f"block = [{block}]", "threads per block"))
    out += [
        _line(f'# flops = "2 * {sizes[0]}"', "optional: TFLOPS columns (an expression over the sizes)"),
        '# reference = "reference.py:fn"                  # optional: float64 outputs from the inputs; the path is',
        "#                                                #   relative to this spec file",
        "# tolerance = 1e-3                               # optional: max relative error against the reference",
        "args = [  # in the kernel's parameter order: a tensor (dtype, shape) or a scalar (value, an expression)",
    ]
    for p in runtime:
        if p.type == TODO:
            out.append(_line(f'  {{name = "{p.name}", value = "{TODO}"}},',
                             "TODO: a scalar: value = ...; a tensor: dtype = ..., shape = [...]"))
        elif p.is_pointer:
            dtype = TRITON_TORCH.get(p.type[1:], "float32") if p.type != "*" else "float32"
            extra = ", output = true" if p.name in outputs else ""
            why = "an output: compared across names" if extra else "an input (randn)"
            out.append(_line(f'  {{name = "{p.name}", dtype = "{dtype}", shape = {_toml(shape)}{extra}}},',
                             f"{why}; shape guessed"))
        elif p.is_size:
            out.append(_line(f'  {{name = "{p.name}", value = "{p.name}"}},', "a problem size"))
        elif _STRIDE_NAME.search(p.name):
            out.append(_line(f'  {{name = "{p.name}", value = 1}},', "a stride: guessed 1 (check)"))
        else:
            out.append(_line(f'  {{name = "{p.name}", value = 1.0}},', "a scalar: guessed 1.0"))
    out.append("]")
    return out


def _header(target: str, command: str) -> list[str]:
    return [
        f"# Kernel spec for {target}, written by `ptxprobe spec init` (the format: docs/spec.md).",
        f"#   {command}",
        '# Fill in every "TODO" (the loader refuses them, by key) and check every line marked "guess".',
        "",
    ]


def triton_spec(target: str, arch: str = "sm_90a") -> str:
    """The spec of a user's ``triton.jit``/``gluon.jit`` function (``file.py:function`` or ``module:function``)."""
    fn, wrappers = load_kernel(target, arch, what="spec init")
    try:
        u = usage_of(inspect.getsource(fn.fn))
    except (OSError, TypeError, StopIteration, SyntaxError):
        u = Usage()
    params = [constexpr_param(p) if p.is_constexpr else triton_param(p, u) for p in fn.params]
    options = _from_wrappers(params, wrappers)
    runtime = [p for p in params if p.type != "constexpr"]
    for p in runtime:
        if p.is_pointer and p.name in u.stored:
            p.value = "output"
    pointers = [p.name for p in runtime if p.is_pointer]
    blocks = [p for p in params if p.type == "constexpr" and isinstance(p.value, int)
              and not isinstance(p.value, bool) and _BLOCK_CONSTEXPR.search(p.name)]
    sizes = [p.name for p in runtime if p.is_size] or ["n"]
    grid = [f"cdiv({sizes[i % len(sizes)]}, {blocks[i].value})" if i < len(blocks) else "1"
            for i in range(u.grid_dims)]
    grid_why = "programs per axis (tl.program_id); guessed" + (
        f" from {', '.join(b.name for b in blocks[:u.grid_dims])}" if blocks else "")
    spec_name = Path(target.rpartition(":")[0]).stem + ".toml"
    lines = _header(target, f"ptxprobe rename-sweep --triton {target} --spec {spec_name}")
    lines += [
        _line(f"num_warps = {options['num_warps'][0]}", f"warps per program (a power of 2); {options['num_warps'][1]}"),
        _line(f"num_stages = {options['num_stages'][0]}", f"software pipelining stages; {options['num_stages'][1]}"),
        _line(f"maxnreg = {options['maxnreg'][0]}", f"a register cap per thread; {options['maxnreg'][1]}")
        if "maxnreg" in options else "# maxnreg = 128                                  # optional: a register cap "
                                     "per thread",
        _line("divisible_by_16 = " + _toml(pointers), "parameters Triton's launcher would mark 16-aligned"),
        "#   (pointers from torch are; add the integers whose launch values are multiples of 16)",
        "",
        "[signature]  # every parameter, in order, as Triton spells its type: *fp16 *fp32 *bf16 i32 i64 fp32 "
        "constexpr",
    ]
    for p in params:
        why = ("guess: " if p.guessed and not p.why.startswith(("placeholder", "TODO")) else "") + p.why
        lines.append(_line(f"{p.name} = {_toml(p.type)}", why if p.type != "constexpr" else ""))
    constexprs = [p for p in params if p.type == "constexpr"]
    if constexprs:
        lines += ["", "[constexprs]  # a value for every constexpr parameter: the specialisation compiled"]
        lines += [_line(f"{p.name} = {_toml(p.value)}", p.why) for p in constexprs]
    lines += _launch(runtime, grid, None, grid_why)
    return "\n".join(lines) + "\n"


FIRST_CONFIG = "@triton.autotune's config 1 of {n}: the one compiled"


def _from_wrappers(params: list[Param], wrappers: list) -> dict[str, tuple[int, str]]:
    """Constexprs and options an ``@triton.autotune``'s first config gives (marked so), and the constexprs
    ``@triton.heuristics`` computes at launch (said so); -> the compile options to write, each with why."""
    options = {"num_warps": (4, "Triton's default"), "num_stages": (3, "Triton's default")}
    for w in reversed(wrappers):  # the outermost wrapper has the last word, as at launch
        if type(w).__name__ == "Heuristics":
            for p in params:
                if p.name in (getattr(w, "values", None) or {}):
                    p.why = f"@triton.heuristics computes it at launch: give your launch's; {p.why}"
        configs = getattr(w, "configs", None) or []
        if type(w).__name__ != "Autotuner" or not configs:
            continue
        first = configs[0]
        for p in params:
            if p.type == "constexpr" and p.name in (getattr(first, "kwargs", None) or {}):
                p.value, p.why, p.guessed = first.kwargs[p.name], FIRST_CONFIG.format(n=len(configs)), False
        for key in ("num_warps", "num_stages", "maxnreg"):
            if isinstance(getattr(first, key, None), int):
                options[key] = (getattr(first, key), FIRST_CONFIG.format(n=len(configs)))
    return options


_GLOBAL_RE = r"__global__\s+(?:__launch_bounds__\s*\(([^)]*)\)\s*)?void\s+(?:__launch_bounds__\s*\(([^)]*)\)\s*)?"


def source_signature(text: str, name: str) -> tuple[list[tuple[str, str]], int | None] | None:
    """[(C type, name)] of ``__global__ void name(...)`` in a .cu source, and its __launch_bounds__ threads."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    m = re.search(_GLOBAL_RE + re.escape(name) + r"\s*\(([^)]*)\)", text)
    if m is None:
        return None
    bounds = m.group(1) or m.group(2)
    threads = int(bounds.split(",")[0]) if bounds and bounds.split(",")[0].strip().isdigit() else None
    out = []
    for part in (s.strip() for s in m.group(3).split(",") if s.strip()):
        part = part.split("=")[0].strip()
        pm = re.match(r"(.*?)([A-Za-z_]\w*)\s*(\[\s*\])?$", part, re.S)
        if pm is None:
            return None
        ctype = " ".join((pm.group(1) + ("*" if pm.group(3) else "")).split())
        out.append((ctype, pm.group(2)))
    return out, threads


def _c_dtype(ctype: str) -> str | None:
    words = [w for w in re.sub(r"[*&]", " ", ctype).split() if w not in ("const", "__restrict__", "restrict",
                                                                         "volatile", "struct")]
    return C_DTYPES.get(" ".join(words)) or C_DTYPES.get(words[-1] if words else "")


def file_spec(target: str, arch: str = "sm_90a", include_dirs: tuple[str, ...] = (),
              spec_dir: Path | None = None) -> str:
    """The ``[launch]`` spec of a ``.cu`` (compiled by nvcc, with ``include_dirs`` on its include path, written
    into the spec's ``[nvcc]`` table relative to ``spec_dir``) or ``.ptx`` entry: ``file.cu[:entry]``."""
    path, entry = split_entry(target)
    src = Path(path)
    if not src.is_file():
        raise SpecError(f"spec init: no such file {src}")
    folders = [Path(d).resolve() for d in include_dirs]
    missing = next((d for d, f in zip(include_dirs, folders, strict=True) if not f.is_dir()), None)
    if missing is not None:
        raise SpecError(f"spec init: -I {missing}: no such folder")
    if folders and src.suffix != ".cu":
        raise SpecError("spec init: -I is for a .cu file's headers")
    if src.suffix == ".cu":
        emitted = emit_cuda(src, arch, entry, NvccOptions.of(include_dirs=tuple(map(str, folders))), cache=Cache())
    else:
        emitted = load_ptx(str(src), entry)
    chosen = emitted.swept_entries
    if len(chosen) > 1:
        names = ", ".join(own_identifier(e) for e in chosen)
        raise SpecError(f"spec init: {src.name} has {len(chosen)} kernels ({names}); a spec is for one: "
                        f"{src.name}:{own_identifier(chosen[0])}")
    entry_sym = chosen[0]
    ptx_params = entry_params(emitted.ptx, entry_sym)
    sig = source_signature(src.read_text(errors="replace"), own_identifier(entry_sym)) \
        if src.suffix == ".cu" else None
    threads = sig[1] if sig else None
    if sig and len(sig[0]) != len(ptx_params):
        sig = None  # a by-value struct or a template: the PTX's own names
    params = []
    for i, pp in enumerate(ptx_params):
        ctype, name = sig[0][i] if sig else ("", pp.name)
        if pp.is_pointer_sized and (not sig or "*" in ctype):
            dtype = _c_dtype(ctype) if sig else None
            params.append(Param(name, "*" + triton_type_of(dtype, "fp32"),
                                f"{ctype or '.u64'}", value=None if "const" in ctype else "output"))
        elif pp.type.startswith("f"):
            params.append(Param(name, "fp32", ctype or pp.type))
        else:
            params.append(Param(name, "i32", ctype or pp.type))
    sizes = [p.name for p in params if p.is_size] or ["n"]
    block = threads or 256
    where = f"{src.name}:{own_identifier(entry_sym)}"
    spec_name = src.stem + ".toml"
    lines = _header(where, f"ptxprobe rename-sweep --{'cu' if src.suffix == '.cu' else 'ptx'} {src} --entry "
                           f"{own_identifier(entry_sym)} --spec {spec_name} --run")
    lines += [f"# parameters of {entry_sym}, from the PTX{' and the source signature' if sig else ''}: "
              + ", ".join(f"{p.name} ({p.why})" for p in params)]
    grid_why = "blocks per axis: guessed one thread per element of the first size" + (
        "" if threads else "; block guessed 256")
    nvcc = []
    if folders:
        base = (spec_dir or Path.cwd()).resolve()
        shown = [os.path.relpath(f, base) for f in folders]
        nvcc = ["", "[nvcc]  # what nvcc needs beyond the file (paths relative to this spec)",
                f"include_dirs = [{', '.join(_toml(d) for d in shown)}]"]
    return "\n".join(lines + _launch(params, [f"cdiv({sizes[0]}, {block})"], block, grid_why)[1:] + nvcc) + "\n"


def spec_for(target: str, arch: str = "sm_90a", include_dirs: tuple[str, ...] = (),
             spec_dir: Path | None = None) -> str:
    """The commented spec of ``file.py:function``/``module:function``, ``file.cu[:entry]`` or ``file.ptx[:entry]``
    (``include_dirs``: a ``.cu`` file's header folders, written relative to ``spec_dir``)."""
    path = target.split(":", 1)[0]
    if path.endswith((".cu", ".ptx")):
        return file_spec(target, arch, include_dirs, spec_dir)
    if include_dirs:
        raise SpecError("spec init: -I is for a .cu file's headers")
    if ":" not in target:
        raise SpecError(f"spec init takes file.py:function, module:function or file.cu[:entry], got {target!r}")
    return triton_spec(target, arch)


def write_spec(text: str, out: str | None, force: bool) -> Path | None:
    """Write the spec to ``out`` (refusing to replace a file without ``force``); None: the caller prints it."""
    if out is None or out == "-":
        return None
    p = Path(out)
    if p.exists() and not force:
        raise SpecError(f"{p} exists: spec init does not overwrite it without --force")
    if p.is_dir():
        raise SpecError(f"{p} is a directory: give the spec file's path")
    # the header's command names the file written, not the default name
    text = re.sub(r"^(#   ptxprobe .*--spec )\S+", lambda m: m.group(1) + str(p), text, count=1, flags=re.MULTILINE)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    except OSError as exc:
        raise SpecError(f"cannot write {p}: {exc.strerror or exc}") from None
    return p
