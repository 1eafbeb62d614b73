"""SASS as records: nvdisasm's listing with encodings, parsed, with decoded control words.

Volta-and-later instructions are 128 bits; the scheduling control sits in the top bits of
the high 64-bit word: stall (41-44), yield (45), write barrier (46-48, 7 = none),
read barrier (49-51, 7 = none), wait mask (52-57), operand-reuse mask (58-61). The
positions are checked against real cubins in the tests (the reuse mask against
nvdisasm's ``.reuse`` markers) for sm_90 and sm_100/sm_120.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ptxprobe.core.errors import CubinError, SassParseError, ToolNotFound
from ptxprobe.core.proc import run_tool
from ptxprobe.core.text import split_top_level
from ptxprobe.toolchain.tools import Tool, find_tool

NO_BARRIER = 7


@dataclass(frozen=True)
class Control:
    stall: int
    yield_bit: int  # raw bit 45; public reverse-engineering reads 0 as "yield"
    write_barrier: int | None
    read_barrier: int | None
    wait_mask: int
    reuse: int

    @classmethod
    def from_high_word(cls, hi: int, family: str = "volta-hopper") -> Control:
        """Decode the control fields with the bit positions of an architecture family (CONTROL_LAYOUTS)."""
        pos = CONTROL_LAYOUTS[family][1]
        wb = (hi >> pos["write_barrier"]) & 7
        rb = (hi >> pos["read_barrier"]) & 7
        return cls(
            (hi >> pos["stall"]) & 0xF,
            (hi >> pos["yield"]) & 1,
            None if wb == NO_BARRIER else wb,
            None if rb == NO_BARRIER else rb,
            (hi >> pos["wait"]) & 0x3F,
            (hi >> pos["reuse"]) & 0xF,
        )

    def to_bits(self) -> int:
        """The control fields re-encoded at their positions in the high word."""
        wb = NO_BARRIER if self.write_barrier is None else self.write_barrier
        rb = NO_BARRIER if self.read_barrier is None else self.read_barrier
        return (
            (self.stall << 41)
            | (self.yield_bit << 45)
            | (wb << 46)
            | (rb << 49)
            | (self.wait_mask << 52)
            | (self.reuse << 58)
        )

    @property
    def yields(self) -> bool:
        return self.yield_bit == 0

    def compact(self) -> str:
        """``B--2---:R0:W1:Y:S07``: wait mask, read barrier, write barrier, yield, stall."""
        wait = "B" + "".join(str(i) if self.wait_mask >> i & 1 else "-" for i in range(6))
        rb = "-" if self.read_barrier is None else str(self.read_barrier)
        wb = "-" if self.write_barrier is None else str(self.write_barrier)
        return f"{wait}:R{rb}:W{wb}:{'Y' if self.yields else '-'}:S{self.stall:02d}"

    def to_json(self) -> dict:
        return {
            "stall": self.stall,
            "yield": self.yields,
            "write_barrier": self.write_barrier,
            "read_barrier": self.read_barrier,
            "wait_mask": self.wait_mask,
            "reuse": self.reuse,
        }


@dataclass(frozen=True)
class Instruction:
    offset: int
    predicate: str | None  # "@P0", "@!UP1", ...
    opcode: str  # full mnemonic with modifiers, e.g. "HMMA.16816.F32"
    operands: tuple[str, ...]  # as printed, ".reuse" kept
    encoding: int  # 128-bit
    control: Control
    annotations: tuple[str, ...] = ()  # nvdisasm's own scheduling notes (sm_100+): &wr=, &rd=, &req=, ?transN

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def text(self) -> str:
        pred = f"{self.predicate} " if self.predicate else ""
        return f"{pred}{self.opcode} {', '.join(self.operands)}".rstrip()

    def to_json(self) -> dict:
        return {
            "offset": self.offset,
            "predicate": self.predicate,
            "opcode": self.opcode,
            "operands": list(self.operands),
            "encoding": f"0x{self.encoding:032x}",
            "control": self.control.to_json(),
            "annotations": list(self.annotations),
        }


@dataclass(frozen=True)
class Listing:
    kernel: str
    instructions: tuple[Instruction, ...]
    labels: dict  # label -> offset
    disassembler: str = ""  # which tool made it: "nvdisasm 12.8.55" or "cuobjdump 12.8.55"
    control_decode: str = ""  # the control-word layout used, and whether it is verified for this arch


# Control-word layouts by architecture family: (first SM, last SM) -> bit positions in the high word.
# A family is *verified* when tests/test_control_words.py checks the fields on real cubins of one of its
# targets against independent oracles (.reuse markers, barrier set-before-wait, nvdisasm's own notes).
CONTROL_LAYOUTS = {
    "volta-hopper": ((70, 99), {"stall": 41, "yield": 45, "write_barrier": 46, "read_barrier": 49, "wait": 52,
                                "reuse": 58}),
    "blackwell": ((100, 129), {"stall": 41, "yield": 45, "write_barrier": 46, "read_barrier": 49, "wait": 52,
                               "reuse": 58}),
}
VERIFIED_TARGETS = ("sm_80", "sm_90a", "sm_100a", "sm_120a")  # each SM has an oracle test on real cubins


def control_layout(arch: str | None) -> tuple[str, bool]:
    """(family, verified) of the control-word layout for ``arch``; pre-Volta targets are refused."""
    m = re.fullmatch(r"sm_(\d+)[af]?", arch or "")
    if not m:
        return "volta-hopper", False
    n = int(m.group(1))
    if n < 70:
        raise SassParseError(f"{arch} is pre-Volta (8-byte instructions, other control words): not supported")
    for family, ((lo, hi), _) in CONTROL_LAYOUTS.items():
        if lo <= n <= hi:
            return family, n in {int(re.sub(r"\D", "", t)) for t in VERIFIED_TARGETS}
    return "blackwell", False


def control_decode_label(arch: str | None) -> str:
    family, verified = control_layout(arch)
    return f"{family} layout, {'verified' if verified else 'unverified'} for {arch or 'unknown arch'}"


_SECTION_RE = re.compile(r"^(?://-+ \.text\.(\S+)\s+-+|\s*Function : (\S+)\s*)$")  # nvdisasm | cuobjdump -sass
_INSN_RE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*/\*\s*(0x[0-9a-fA-F]{16})\s*\*/\s*$")
_HI_RE = re.compile(r"^\s*/\*\s*(0x[0-9a-fA-F]{16})\s*\*/\s*$")
_LABEL_RE = re.compile(r"^(\.L_\w+|\.text\.\S+|[A-Za-z_$][\w$.]*):\s*$")


def _split_operands(text: str) -> list[str]:
    return split_top_level(text, "[{(", "]})")


def split_annotations(body: str) -> tuple[str, tuple[str, ...]]:
    """Separate nvdisasm's trailing ``&wr=0x3 &req={1} ?trans11`` notes from the instruction."""
    notes = []
    while True:
        m = re.search(r"\s+([&?][A-Za-z_][\w]*(?:=\{[^}]*\}|=\S+)?)\s*$", body)
        if not m:
            break
        notes.insert(0, m.group(1))
        body = body[: m.start()]
    return body, tuple(notes)


def parse_instruction_text(body: str) -> tuple[str | None, str, tuple[str, ...]]:
    body = body.strip().rstrip(";").strip()
    pred = None
    if body.startswith("@"):
        pred, _, body = body.partition(" ")
    opcode, _, rest = body.strip().partition(" ")
    rest = re.sub(r"(?<=\S)\s+`\(", ", `(", rest)  # "RET.REL.NODEC R2 `(k)": the target is an operand of its own
    if not opcode or not re.match(r"^[A-Z][A-Z0-9_]*(\.[\w.]+)?$", opcode):
        raise SassParseError(f"not an instruction: {body!r}")
    return pred, opcode, tuple(_split_operands(rest))


def parse_nvdisasm(text: str) -> dict[str, Listing]:
    """Parse ``nvdisasm -hex`` output (every kernel section) into listings."""
    kernels: dict[str, Listing] = {}
    lines = text.splitlines()
    current: str | None = None
    insns: list[Instruction] = []
    labels: dict[str, int] = {}
    pending_labels: list[str] = []

    def flush():
        if current is not None:
            kernels[current] = Listing(current, tuple(insns), dict(labels))

    i = 0
    while i < len(lines):
        line = lines[i]
        m = _SECTION_RE.match(line)
        if m:
            flush()
            current, insns, labels, pending_labels = m.group(1) or m.group(2), [], {}, []
            i += 1
            continue
        if current is not None:
            lm = _LABEL_RE.match(line.strip())
            if lm:
                pending_labels.append(lm.group(1))
                i += 1
                continue
            m = _INSN_RE.match(line)
            if m:
                if i + 1 >= len(lines) or not (hm := _HI_RE.match(lines[i + 1])):
                    raise SassParseError(f"line {i + 1}: instruction without its second encoding word")
                offset = int(m.group(1), 16)
                lo, hi = int(m.group(3), 16), int(hm.group(1), 16)
                text, notes = split_annotations(m.group(2).strip().rstrip(";").strip())
                pred, opcode, operands = parse_instruction_text(text)
                for lab in pending_labels:
                    labels[lab] = offset
                pending_labels = []
                insns.append(
                    Instruction(offset, pred, opcode, operands, (hi << 64) | lo, Control.from_high_word(hi), notes)
                )
                i += 2
                continue
        i += 1
    flush()
    if not kernels:
        raise SassParseError("no .text sections with encoded instructions in the disassembly")
    return kernels


def disassemble(cubin: bytes | str | Path, tool: Tool | None = None, timeout: float = 300.0) -> dict[str, Listing]:
    """Listings of every kernel in a cubin: nvdisasm -hex, or cuobjdump -sass when nvdisasm is missing or fails."""
    with tempfile.TemporaryDirectory(prefix="ptxprobe-sass-") as d:
        path = Path(d) / "k.cubin"
        if isinstance(cubin, bytes):
            path.write_bytes(cubin)
        else:
            path = Path(cubin)
        attempts = []
        try:
            tools = [tool] if tool is not None else [find_tool("nvdisasm")]
        except ToolNotFound as exc:
            tools, attempts = [], [str(exc)]
        if tool is None or tool.kind != "nvdisasm":
            try:
                tools.append(find_tool("cuobjdump"))
            except ToolNotFound as exc:
                attempts.append(str(exc))
        arch = _cubin_arch(path)
        decode = control_decode_label(arch)
        for t in tools:
            argv = [t.path, "-hex", "-c", str(path)] if t.kind == "nvdisasm" else [t.path, "-sass", str(path)]
            run = run_tool(argv, timeout=timeout)
            if run.ok:
                made_by = f"{t.kind} {t.version}"
                return {k: replace(v, disassembler=made_by, control_decode=decode)
                        for k, v in parse_nvdisasm(run.stdout).items()}
            attempts.append(run.describe())
        raise SassParseError("disassembly failed: " + "; ".join(attempts))


def _cubin_arch(path: Path) -> str | None:
    from ptxprobe.binary.cubin import read_cubin

    try:
        return read_cubin(path.read_bytes()).arch
    except (CubinError, OSError):
        return None


# --- structure: basic blocks and loops -------------------------------------------------------

_BRANCHES = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BPT", "BREAK", "CONT", "WARPSYNC.EXCLUSIVE"}
_TARGET_RE = re.compile(r"(?:`?\(?)(\.L_\w+)\)?")


@dataclass(frozen=True)
class Block:
    start: int  # instruction index
    end: int  # one past the last
    successors: tuple[int, ...]  # block start indices


@dataclass(frozen=True)
class Loop:
    """A natural loop: the blocks that reach the back edge's source without passing the header."""

    head: int  # instruction index of the header block's first instruction
    tail: int  # instruction index of the back-edge branch
    body: tuple[int, ...]  # instruction indices, in layout order
    depth: int  # 0 = outermost

    def __contains__(self, index: int) -> bool:
        return index in self.body


def branch_target(ins: Instruction, listing: Listing) -> int | None:
    if ins.base not in ("BRA", "JMP", "BRX", "CALL"):
        return None
    for op in ins.operands:
        m = _TARGET_RE.search(op)
        if m and m.group(1) in listing.labels:
            return listing.labels[m.group(1)] // 16
        if re.fullmatch(r"0x[0-9a-f]+", op):
            return int(op, 16) // 16
    return None


_PRED_OPERAND = re.compile(r"^!?U?P[0-6]$")


def _predicate_operand(ins: Instruction) -> bool:
    """``BRA.U !UP0, , target`` is conditional: its predicate is an operand, not an ``@`` guard."""
    return any(_PRED_OPERAND.match(op.strip()) for op in ins.operands)


def basic_blocks(listing: Listing) -> list[Block]:
    n = len(listing.instructions)
    leaders = {0}
    for lab_off in listing.labels.values():
        leaders.add(lab_off // 16)
    for i, ins in enumerate(listing.instructions):
        if ins.base in _BRANCHES or ins.base.startswith("BRA"):
            leaders.add(i + 1)
            t = branch_target(ins, listing)
            if t is not None:
                leaders.add(t)
    starts = sorted(x for x in leaders if 0 <= x < n)
    blocks = []
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else n
        last = listing.instructions[e - 1]
        succ = []
        t = branch_target(last, listing)
        if t is not None:
            succ.append(t)
        unconditional = (
            last.base in ("BRA", "JMP", "EXIT", "RET") and last.predicate is None and not _predicate_operand(last)
        )
        if not unconditional and e < n:
            succ.append(e)
        blocks.append(Block(s, e, tuple(succ)))
    return blocks


def dominators(blocks: list[Block]) -> dict[int, set[int]]:
    """Block start -> starts of the blocks that dominate it (iterative data flow from block 0)."""
    starts = [b.start for b in blocks]
    preds: dict[int, set[int]] = {s: set() for s in starts}
    for b in blocks:
        for t in b.successors:
            if t in preds:
                preds[t].add(b.start)
    everything = set(starts)
    dom = {s: set(everything) for s in starts}
    if starts:
        dom[starts[0]] = {starts[0]}
    changed = True
    while changed:
        changed = False
        for s in starts[1:]:
            ps = [dom[p] for p in preds[s]]
            new = ({s} | set.intersection(*ps)) if ps else {s}
            if new != dom[s]:
                dom[s], changed = new, True
    return dom


def loops(listing: Listing) -> list[Loop]:
    """Natural loops of the CFG (back edges t -> h where h dominates t), outermost first."""
    blocks = basic_blocks(listing)
    by_start = {b.start: b for b in blocks}
    dom = dominators(blocks)
    preds: dict[int, set[int]] = {b.start: set() for b in blocks}
    for b in blocks:
        for t in b.successors:
            if t in preds:
                preds[t].add(b.start)
    found = []
    for b in blocks:
        for h in b.successors:
            if h in dom.get(b.start, ()):  # back edge
                body = {h, b.start}
                stack = [b.start]
                while stack:
                    x = stack.pop()
                    if x == h:
                        continue
                    for p in preds[x]:
                        if p not in body:
                            body.add(p)
                            stack.append(p)
                idx = tuple(sorted(i for s in body for i in range(s, by_start[s].end)))
                found.append((h, b.end - 1, idx))
    merged: dict[int, tuple[int, set[int]]] = {}
    for h, t, idx in found:  # one loop per header (several back edges share it)
        tail, body = merged.get(h, (t, set()))
        merged[h] = (max(tail, t), body | set(idx))
    out = []
    for h, (t, body) in merged.items():
        depth = sum(1 for h2, (_, b2) in merged.items() if h2 != h and body < b2)
        out.append(Loop(h, t, tuple(sorted(body)), depth))
    return sorted(out, key=lambda lp: (lp.depth, lp.head))


_REG_RE = re.compile(r"\bR(\d+)\b")


def highest_register(instructions) -> int:
    regs = [int(m) for ins in instructions for op in ins.operands for m in _REG_RE.findall(op)]
    return max(regs, default=-1)

