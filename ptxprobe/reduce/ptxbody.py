"""The PTX structure a reducer needs, and no more: statements of the entry's body, what each defines and reads.

``ptx.text`` reads directives (entries, target, parameters); this module reads the entry's body so that a
removal can keep the PTX valid: branches to a removed label go with it, instructions whose results nobody reads
any more go (dead code), declarations nobody references go. Everything is a pure function of the text; a
candidate is always a text, so the content-addressed cache and the sweep's planner see nothing new.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ptxprobe.binary.sass import _split_operands as split_operands  # one top-level comma split (SASS and PTX)
from ptxprobe.core.errors import MalformedPtx
from ptxprobe.ptx.text import brace_span, code_of, entry_params

_REG_RE = re.compile(r"%[A-Za-z_$][\w$]*")
_IDENT_RE = re.compile(r"[A-Za-z_$][\w$]*")
LABEL_RE = re.compile(r"^\s*([$A-Za-z_][\w$]*)\s*:\s*(?://.*)?$")
_GUARD_RE = re.compile(r"^@!?(%[\w$]+)\s+")
_REG_DECL_RE = re.compile(r"^\s*\.reg\s+(?:\.v\d\s+)?\.\w+\s+(.+?);")
_SYMBOL_DECL_RE = re.compile(r"^\s*(?:\.extern\s+|\.visible\s+|\.weak\s+)*\.(?:shared|global|const|local)\s[^;]*?"
                             r"([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])*\s*(?:=[^;]*)?;")
_FUNC_RE = re.compile(r"^\s*(?:\.extern\s+|\.visible\s+|\.weak\s+)*\.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
_DEBUG_LINE_RE = re.compile(r"^\s*\.(?:loc|file)\b")

# opcodes (by root, or by a longer prefix) whose effect is more than their destination: never dead code
SIDE_EFFECTS = frozenset({
    "st", "stmatrix", "red", "atom", "bar", "barrier", "bra", "brx", "ret", "exit", "call", "trap", "brkpt", "membar",
    "fence", "cp", "mbarrier", "wgmma", "tcgen05", "tensormap", "prefetch", "prefetchu", "setmaxnreg",
    "griddepcontrol", "multimem", "nanosleep", "pmevent", "discard", "applypriority", "sust", "sured", "suq",
    "clusterlaunchcontrol", "wmma.store", "cvt.pack", "elect", "vote", "shfl", "activemask", "match", "redux",
})
NO_DESTINATION = frozenset({"st", "stmatrix", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "trap", "brkpt",
                            "membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "discard", "sust",
                            "sured", "wmma.store", "griddepcontrol", "setmaxnreg"})


@dataclass(frozen=True)
class Stmt:
    """One statement of the entry's body: the lines it spans (first, last) and what it reads and writes."""

    kind: str  # instr | label | decl | block (a nested { } scope: inline asm) | debug | directive
    first: int
    last: int
    opcode: str = ""
    label: str = ""  # kind label: its name; a branch: its target
    defs: frozenset = frozenset()
    uses: frozenset = frozenset()
    effects: bool = False  # more than its destination: stores, barriers, branches, MMAs into memory, asm blocks

    @property
    def lines(self) -> range:
        return range(self.first, self.last + 1)


@dataclass(frozen=True)
class Decl:
    """Something declared once and referenced by name: an entry parameter, a shared/global buffer, a device
    function, a register family (``%r<64>``); removable when nothing references it."""

    kind: str  # param | symbol | func | reg
    name: str
    first: int
    last: int


@dataclass(frozen=True)
class Body:
    """A PTX text cut into lines, with the entry's statements and the module's declarations."""

    lines: tuple[str, ...]
    entry: str
    stmts: tuple[Stmt, ...]
    decls: tuple[Decl, ...]
    debug: tuple[int, ...]  # lines of debug information anywhere (.loc, .file, .section .debug_*), and comments
    others: tuple[tuple[int, int], ...]  # other entries of the module: (first, last) line
    directives: tuple[int, ...] = ()  # the entry's performance directives (.maxntid, .reqntid, .pragma, ...)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def instructions(self) -> list[Stmt]:
        return [s for s in self.stmts if s.kind in ("instr", "block")]


def _root(opcode: str) -> str:
    return opcode.split(".")[0]


def _has_effects(opcode: str) -> bool:
    parts = opcode.split(".")
    return parts[0] in SIDE_EFFECTS or ".".join(parts[:2]) in SIDE_EFFECTS or ".volatile" in opcode


def instruction(text: str, first: int, last: int) -> Stmt:
    """An instruction's opcode, guard, destinations and sources (registers), and its branch target."""
    code = text.rstrip().rstrip(";").strip()
    guard = _GUARD_RE.match(code)
    uses: set[str] = {guard.group(1)} if guard else set()
    if guard:
        code = code[guard.end():]
    opcode, rest = (re.split(r"\s+", code, maxsplit=1) + [""])[:2]
    ops = split_operands(rest.strip())
    effects = _has_effects(opcode)
    defs: set[str] = set()
    if ops and _root(opcode) not in NO_DESTINATION and ".".join(opcode.split(".")[:2]) not in NO_DESTINATION:
        dest, ops_read = ops[0], ops[1:]
        if _root(opcode) == "call":  # call (ret), f, (args): the parenthesised return values
            dest = ops[0] if ops[0].startswith("(") else ""
            ops_read = ops[1:] if dest else ops
        defs = set(_REG_RE.findall(dest))
        for op in ops_read:
            uses.update(_REG_RE.findall(op))
        if effects:  # an MMA accumulates into its destination: it reads it too
            uses.update(defs)
    else:
        for op in ops:
            uses.update(_REG_RE.findall(op))
    label = ""
    if _root(opcode) == "bra" and ops:
        label = ops[-1].strip()
    return Stmt("instr", first, last, opcode, label, frozenset(defs), frozenset(uses), effects)


def _entry_span(lines: list[str], entry: str) -> tuple[int, int, int]:
    """(header line, line of the body's '{', line of its '}') of ``.entry <entry>``."""
    head_re = re.compile(r"\.entry\s+" + re.escape(entry) + r"\b")
    head = next((i for i, ln in enumerate(lines) if head_re.search(code_of(ln))), None)
    if head is None:
        raise MalformedPtx(f"no .entry {entry} in the PTX")
    return head, *brace_span(lines, head)


def _statements(lines: list[str], open_: int, close: int) -> list[Stmt]:
    out: list[Stmt] = []
    i = open_ + 1
    while i < close:
        code = code_of(lines[i])
        if not code:
            i += 1
            continue
        if code.startswith("{"):
            _, end = brace_span(lines, i)
            block = " ".join(code_of(lines[k]) for k in range(i, end + 1))
            regs = set(_REG_RE.findall(block))
            out.append(Stmt("block", i, end, "{asm}", "", frozenset(), frozenset(regs), True))
            i = end + 1
            continue
        m = LABEL_RE.match(lines[i])
        if m:
            out.append(Stmt("label", i, i, label=m.group(1)))
            i += 1
            continue
        if _DEBUG_LINE_RE.match(code):
            out.append(Stmt("debug", i, i))
            i += 1
            continue
        end = i
        text = code
        while not text.endswith(";") and end + 1 < close:  # an instruction over several lines
            end += 1
            text += " " + code_of(lines[end])
        if text.startswith((".reg", ".shared", ".local", ".param", ".const", ".global")):
            out.append(Stmt("decl", i, end, text.split()[0]))
        elif text.startswith("."):
            out.append(Stmt("directive", i, end, text.split()[0]))
        else:
            out.append(instruction(text, i, end))
        i = end + 1
    return out


def _reg_names(decl_text: str) -> list[str]:
    """``%r<64>, %p`` -> the families/names it declares (``%r`` for a family)."""
    return [n.strip().split("<")[0] for n in decl_text.split(",") if n.strip()]


def parse(ptx: str, entry: str) -> Body:
    """The body of ``entry`` and the module's declarations, read from the text."""
    lines = ptx.splitlines(keepends=True)
    head, open_, close = _entry_span(lines, entry)
    stmts = _statements(lines, open_, close)
    decls: list[Decl] = []
    for p in entry_params(ptx, entry):
        at = next((i for i in range(head, open_ + 1) if re.search(r"\b" + re.escape(p.name) + r"\b", lines[i])), None)
        if at is not None and at != head and lines[at].count(".param") == 1:
            decls.append(Decl("param", p.name, at, at))
    for s in stmts:
        if s.kind != "decl":
            continue
        text = " ".join(code_of(lines[k]) for k in s.lines)
        reg = _REG_DECL_RE.match(text)
        if reg:
            decls.extend(Decl("reg", n, s.first, s.last) for n in _reg_names(reg.group(1)))
            continue
        sym = _SYMBOL_DECL_RE.match(text)
        if sym:
            decls.append(Decl("symbol", sym.group(1), s.first, s.last))
    debug: list[int] = [s.first for s in stmts if s.kind == "debug"]
    debug += [i for i, ln in enumerate(lines) if ln.strip().startswith("//")]
    directives = [i for i in range(head + 1, open_) if code_of(lines[i]).startswith((".max", ".min", ".req", ".pragma",
                                                                                     ".explicitcluster"))]
    directives += [ln for s in stmts if s.kind == "directive" for ln in s.lines]
    others: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if open_ <= i <= close or i == head:
            i = close + 1 if i <= close else i + 1
            continue
        code = code_of(lines[i])
        if _DEBUG_LINE_RE.match(code):
            debug.append(i)
        elif code.startswith(".section") and ".debug" in code:
            _, end = brace_span(lines, i)
            debug.extend(range(i, end + 1))
            i = end + 1
            continue
        elif re.search(r"\.entry\s", code):
            _, end = brace_span(lines, i)
            others.append((i, end))
            i = end + 1
            continue
        elif _FUNC_RE.match(code):
            name = _FUNC_RE.match(code).group(1)
            _, end = brace_span(lines, i)
            decls.append(Decl("func", name, i, end))
            i = end + 1
            continue
        elif i < head:
            sym = _SYMBOL_DECL_RE.match(code)
            if sym:
                decls.append(Decl("symbol", sym.group(1), i, i))
        i += 1
    return Body(tuple(lines), entry, tuple(stmts), tuple(decls), tuple(sorted(set(debug))), tuple(others),
                tuple(directives))


# --- removals that keep the PTX valid ------------------------------------------------------------


def without(body: Body, drop: set[int]) -> str:
    """The text with these lines gone; a parameter list keeps its commas right."""
    kept = [i for i in range(len(body.lines)) if i not in drop]
    out = [body.lines[i] for i in kept]
    dropped_params = {d.first for d in body.decls if d.kind == "param"} & drop
    if dropped_params:  # the last remaining parameter line must not end with a comma
        for k, i in enumerate(kept):
            if body.lines[i].rstrip().endswith(",") and k + 1 < len(kept) and body.lines[kept[k + 1]].strip() == ")":
                line = out[k]
                out[k] = line.rstrip().rstrip(",") + line[len(line.rstrip()):]
    return "".join(out)


def dead_lines(body: Body) -> set[int]:
    """Lines of instructions whose results nothing with an effect reads (flow-insensitive liveness), and of
    branches whose label is gone."""
    labels = {s.label for s in body.stmts if s.kind == "label"}
    live: set[str] = set()
    defining: dict[str, list[Stmt]] = {}
    todo: list[Stmt] = []
    for s in body.stmts:
        if s.kind not in ("instr", "block"):
            continue
        for d in s.defs:
            defining.setdefault(d, []).append(s)
        if s.effects or not s.defs:
            todo.append(s)
    seen: set[int] = set()
    while todo:
        s = todo.pop()
        if s.first in seen:
            continue
        seen.add(s.first)
        for r in s.uses:
            if r not in live:
                live.add(r)
                todo.extend(defining.get(r, ()))
    drop: set[int] = set()
    for s in body.stmts:
        if s.kind == "instr" and s.label and _root(s.opcode) == "bra" and s.label not in labels:
            drop.update(s.lines)
        elif s.kind == "instr" and s.first not in seen:
            drop.update(s.lines)
    return drop


def unused_decls(body: Body) -> list[Decl]:
    """Declarations no other line references: parameters, buffers, device functions, register families."""
    words: Counter = Counter()
    regs: set[str] = set()
    for line in body.lines:
        code = code_of(line)
        words.update(_IDENT_RE.findall(code))
        if not code.startswith(".reg"):
            found = _REG_RE.findall(code)
            regs.update(found)
            regs.update(m.rstrip("0123456789") for m in found)
    out = []
    for d in body.decls:
        if d.kind == "reg":
            if d.name not in regs:
                out.append(d)
            continue
        own = Counter(_IDENT_RE.findall(" ".join(code_of(body.lines[k]) for k in range(d.first, d.last + 1))))
        if words[d.name] - own[d.name] <= 0:
            out.append(d)
    return out


def cleaned(ptx: str, entry: str, rounds: int = 50) -> str:
    """Dead code and dangling branches removed until nothing more goes (a fixed point)."""
    for _ in range(rounds):
        body = parse(ptx, entry)
        drop = dead_lines(body)
        if not drop:
            return ptx
        ptx = without(body, drop)
    return ptx


def remove(ptx: str, entry: str, lines: set[int], clean: bool = True) -> str:
    """One candidate: these lines removed, then (``clean``) what became dead."""
    out = without(parse(ptx, entry), lines)
    return cleaned(out, entry) if clean else out


# --- control structure -----------------------------------------------------------------------------


def loops(body: Body) -> list[tuple[int, int]]:
    """(first, last) statement index of each loop: a label and the last branch back to it."""
    at = {s.label: k for k, s in enumerate(body.stmts) if s.kind == "label"}
    out: dict[int, int] = {}
    for k, s in enumerate(body.stmts):
        if s.kind == "instr" and s.label in at and at[s.label] < k:
            out[at[s.label]] = max(out.get(at[s.label], k), k)
    return sorted(out.items())


def blocks(body: Body) -> list[tuple[int, int]]:
    """(first, last) statement index of each labelled basic block (a label up to the next label)."""
    starts = [k for k, s in enumerate(body.stmts) if s.kind == "label"]
    return [(a, (starts[n + 1] - 1) if n + 1 < len(starts) else len(body.stmts) - 1) for n, a in enumerate(starts)]
