"""PTX text: entries, target, ``.version``, entry parameters and Itanium-mangled names.

Every stage that reads PTX asks this module, so there is one reading of each directive.
Nothing here renames or compiles anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.errors import MalformedPtx, UnsupportedPtxVersion
from ptxprobe.ptx.mangling import is_mangled

ENTRY_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.entry\s+([A-Za-z_$%][\w$]*)", re.MULTILINE)
_TARGET_RE = re.compile(r"^\s*\.target\s+([\w,\s]+?)\s*$", re.MULTILINE)
VERSION_RE = re.compile(r"^(\s*\.version\s+)(\d+)\.(\d+)", re.MULTILINE)


_FUNC_RE = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)",
                      re.MULTILINE)
_VARIABLE_RE = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:global|const)\s+[^;=\n]*?([A-Za-z_$][\w$]*)"
                          r"\s*(?:\[[^\]]*\]\s*)*(?:=|;)", re.MULTILINE)


def module_symbols(ptx: str) -> list[str]:
    """The module's symbols besides its entries: ``.func`` callees and ``.global``/``.const`` variables."""
    return list(dict.fromkeys(_FUNC_RE.findall(ptx) + _VARIABLE_RE.findall(ptx)))


def entries_of(ptx: str) -> list[str]:
    """Every ``.entry`` symbol, in order of appearance."""
    return ENTRY_RE.findall(ptx)


def entry_of(ptx: str) -> str:
    """The first entry (PTX from a frontend that emits one kernel per module)."""
    names = entries_of(ptx)
    if not names:
        raise MalformedPtx("no .entry found in PTX")
    return names[0]


def code_of(line: str) -> str:
    """A PTX line without its ``//`` comment, stripped: what brace matching and parsing read."""
    return line.split("//", 1)[0].strip()


def brace_span(lines: list[str], start: int) -> tuple[int, int]:
    """(line of the first '{' at or after ``start``, line of its matching '}'), comments ignored; (i, i) for a
    declaration that ends in ';' before any '{' (a prototype has no body). One brace matcher for every reader of
    entry and function bodies, so none of them disagrees on where a body ends."""
    depth, opened = 0, None
    for i in range(start, len(lines)):
        line = lines[i]
        if opened is not None and "{" not in line and "}" not in line:
            continue  # inside a body, a line without a brace changes nothing (most of a kernel's lines)
        code = code_of(line)
        closes = code.count("}")
        if opened is not None and depth > closes:  # this line cannot close the body: count, not scan
            depth += code.count("{") - closes
            continue
        for ch in code:
            if ch == "{":
                depth += 1
                opened = i if opened is None else opened
            elif ch == "}":
                depth -= 1
                if depth == 0 and opened is not None:
                    return opened, i
        if opened is None and code.endswith(";"):
            return i, i
    raise MalformedPtx(f"unbalanced braces in the PTX from line {start + 1}")


_SYMBOL_TOKEN_RE = re.compile(r"[A-Za-z_$%][\w$]*")
_COMMENT_RE = re.compile(r"//[^\n]*")


def _symbols_in(text: str, names: set[str]) -> set[str]:
    """The symbols of ``names`` that ``text`` (PTX lines, comments left out as ``code_of`` leaves them) names."""
    return {t for t in _SYMBOL_TOKEN_RE.findall(_COMMENT_RE.sub(" ", text)) if t in names}


@dataclass(frozen=True)
class Pruned:
    """A module cut down to some of its entries (``pruned_to``)."""

    ptx: str
    entries_left_out: tuple[str, ...]
    functions_left_out: tuple[str, ...]


def _definitions(lines: list[str]) -> list[tuple[str, int, int]]:
    """(symbol, first line, last line) of every ``.entry`` and ``.func`` with a body, in order."""
    out, i = [], 0
    while i < len(lines):
        m = ENTRY_RE.match(lines[i]) or _FUNC_RE.match(lines[i])
        if m is None:
            i += 1
            continue
        opened, closed = brace_span(lines, i)
        if opened != closed or "{" in code_of(lines[opened]):
            out.append((m.group(1), i, closed))
        i = closed + 1
    return out


def pruned_to(ptx: str, keep: set[str] | frozenset[str]) -> Pruned:
    """The module with only the entries in ``keep`` and the functions they reach: ptxas assembles every entry it
    is given, so one kernel chosen from a library module of hundreds would cost what they all cost. A symbol the
    kept code names (a call, an address taken, a variable's initialiser) keeps its definition, entries included;
    declarations, variables and every other directive stay as they are. Unchanged when every entry is kept."""
    lines = ptx.splitlines(keepends=True)
    blocks = _definitions(lines)
    entries = set(entries_of(ptx))
    if not entries - set(keep):
        return Pruned(ptx, (), ())
    names = {name for name, _, _ in blocks}
    inside = [False] * len(lines)
    refs: dict[str, set[str]] = {}
    for name, first, last in blocks:
        inside[first:last + 1] = [True] * (last + 1 - first)
        refs.setdefault(name, set()).update(_symbols_in("".join(lines[first:last + 1]), names) - {name})
    outside = "".join(ln for ln, is_in in zip(lines, inside, strict=True) if not is_in)
    reached = set(keep) | _symbols_in(outside, names)
    todo = list(reached)
    while todo:
        for t in refs.get(todo.pop(), ()):
            if t not in reached:
                reached.add(t)
                todo.append(t)
    dropped = [(name, first, last) for name, first, last in blocks if name not in reached]
    kept = [True] * len(lines)
    for _, first, last in dropped:
        kept[first:last + 1] = [False] * (last + 1 - first)
    text = "".join(ln for ln, k in zip(lines, kept, strict=True) if k)
    return Pruned(text, tuple(n for n, _, _ in dropped if n in entries),
                  tuple(n for n, _, _ in dropped if n not in entries))


def target_of(ptx: str) -> str:
    """The first ``.target`` operand (``sm_90a``), the arch the PTX was written for."""
    m = _TARGET_RE.search(ptx)
    if not m:
        raise MalformedPtx("PTX has no .target directive")
    return m.group(1).split(",")[0].strip()


def has_version(ptx: str) -> bool:
    return VERSION_RE.search(ptx) is not None


def ptx_isa(ptx: str) -> tuple[int, int]:
    """The ``.version`` of a PTX text as (major, minor)."""
    m = VERSION_RE.search(ptx)
    if not m:
        raise UnsupportedPtxVersion("PTX has no .version directive")
    return int(m.group(2)), int(m.group(3))


def with_version(ptx: str, isa: tuple[int, int]) -> str:
    """The same PTX declaring another ``.version``."""
    return VERSION_RE.sub(lambda m: f"{m.group(1)}{isa[0]}.{isa[1]}", ptx, count=1)


def with_target(ptx: str, arch: str) -> str:
    """The same PTX declaring another ``.target`` arch (further operands such as ``debug`` are kept)."""
    m = _TARGET_RE.search(ptx)
    if not m:
        raise MalformedPtx("PTX has no .target directive")
    rest = [p.strip() for p in m.group(1).split(",")[1:]]
    operands = ", ".join([arch, *rest])
    return ptx[: m.start(1)] + operands + ptx[m.end(1) :]


# The first PTX ISA that accepts each target (PTX ISA release notes); retargeting raises .version to it.
MIN_ISA = {"sm_70": (6, 0), "sm_72": (6, 1), "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4),
           "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0), "sm_100": (8, 6), "sm_100a": (8, 6), "sm_101a": (8, 6),
           "sm_103a": (8, 8), "sm_110a": (9, 0), "sm_120": (8, 7), "sm_120a": (8, 7), "sm_121a": (8, 8)}


def jit_reaches(target: str, arch: str) -> bool:
    """Whether the driver JIT-compiles PTX of ``target`` for a GPU of ``arch`` (CUDA's compatibility rule): PTX
    runs on its own SM and every later one; arch-specific PTX (``sm_90a``) on its own SM only; family PTX
    (``sm_100f``) on the later SMs of its family. A library's module that cannot reach an arch never runs there."""
    t, a = (int(re.sub(r"\D", "", x) or 0) for x in (target, arch))
    if target.endswith("a"):
        return a == t
    if target.endswith("f"):
        return a // 10 == t // 10 and a >= t
    return a >= t


def retargeted(ptx: str, arch: str) -> str:
    """The same PTX for another target: ``.target`` replaced, ``.version`` raised to the first ISA that has it.

    PTX ISAs are backward compatible, so raising the version keeps the meaning; an instruction the new
    target lacks (wgmma on sm_80) is refused by ptxas with its own message.
    """
    out = with_target(ptx, arch)
    need = MIN_ISA.get(arch)
    return with_version(out, need) if need and ptx_isa(out) < need else out


def local_prefix(name: str) -> str:
    """Prefix of Itanium-mangled locals of function ``name`` (``_ZZ<encoding>E``)."""
    if is_mangled(name):
        return "_ZZ" + name[2:] + "E"
    return f"_ZZ{len(name)}{name}E"


# --- the entry's own parameters ---------------------------------------------------------------


@dataclass(frozen=True)
class PtxParam:
    name: str
    type: str  # "u64", "f32", ... ; "b8" with a count for by-value structs
    count: int = 1  # > 1: an array (a struct passed by value)

    @property
    def is_pointer_sized(self) -> bool:
        return self.count == 1 and self.type in ("u64", "s64", "b64")


_PARAM_RE = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+"  # type, after an optional alignment
    r"(?:\.ptr\s+(?:\.(?:global|shared|const|local)\s+)?(?:\.align\s+\d+\s+)?)?"  # pointer attributes
    r"([A-Za-z_$%][\w$]*)(?:\[(\d+)\])?"
)


def entry_params(ptx: str, entry: str) -> list[PtxParam]:
    """The parameters of ``.entry <entry>(...)``, in order."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*(?:\n|\{)", ptx)
        if m is None:
            raise MalformedPtx(f"no .entry {entry} in the PTX")
        return []
    return [
        PtxParam(p.group(2), p.group(1), int(p.group(3) or 1))
        for p in (_PARAM_RE.search(chunk) for chunk in m.group(1).split(","))
        if p is not None
    ]


def read_text_file(path: str | Path, what: str) -> str:
    """A text input (PTX, a spec) whose every failure to read is said as bad input, naming the file."""
    p = Path(path)
    if p.is_dir():
        raise MalformedPtx(f"{p} is a directory, not a {what} file")
    try:
        return p.read_text()
    except FileNotFoundError as exc:
        raise MalformedPtx(f"{p}: no such {what} file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedPtx(f"{p}: cannot read {what} ({exc})") from exc
