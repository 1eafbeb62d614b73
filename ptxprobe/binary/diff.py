"""How two listings differ: alignment that sees through register renaming, per-instruction
classes, per-loop scheduling summaries, and cubin-level deltas.

Classes: ``same`` (aligned, identical text), ``changed`` (aligned, same shape but other
registers or control bits), ``moved`` (the same shape removed in one place and added in
another), ``added`` / ``removed``. The whole is ``identical`` (the same machine code, as
``KernelFacts.machine_code_sha256`` defines it), ``metadata_only`` (the same instructions, other launch
metadata), ``different_data`` (the same instructions reading other constant-bank contents or initialised globals:
the kernel may compute another result; ``Diff.differing`` names what differs), ``scheduling_only`` (the same
multiset of instruction shapes in another order or allocation) or ``different_code``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from ptxprobe.binary.cubin import CubinFacts, read_cubin
from ptxprobe.binary.sass import Instruction, Listing, basic_blocks, disassemble, highest_register, loops
from ptxprobe.core.text import one_spelling

SAME, CHANGED, MOVED, ADDED, REMOVED = "same", "changed", "moved", "added", "removed"
IDENTICAL, SCHEDULING_ONLY, DIFFERENT_CODE = "identical", "scheduling_only", "different_code"
METADATA_ONLY = "metadata_only"  # the same instructions, other launch metadata (.nv.info records, sizes)
DIFFERENT_DATA = "different_data"  # the same instructions, other data they read (constant banks, globals)
DATA_PARTS = ("constant bank 0", "module data")  # KernelFacts.differing_parts that are data, not metadata

_REG_TOKENS = re.compile(r"\b(?:U?R\d+|U?P\d+|B\d+)\b")
_LABEL = re.compile(r"\.L_\w+")
_SYMBOL = re.compile(r"`\([^)]*\)")  # a symbol an instruction names: `(callee)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_BRANCH_OPS = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "BSSY", "BSYNC", "BREAK", "SSY", "PBK", "CAL", "JCAL",
               "WARPSYNC", "BMOV"}


def _own_name(op: str, kernel: str) -> str:
    """The kernel's own symbol (``RET.REL.NODEC R2 `(attention)``, a callee kept in its code
    ```($attention$callee)``) abstracted, and the trigger's spellings in the symbols an instruction names read as one
    (a module-wide rename respells its callees)."""
    if kernel:
        op = op.replace(f"({kernel})", "(<self>)").replace(f"${kernel}$", "$<self>$")
    return _SYMBOL.sub(lambda m: one_spelling(m.group(0)), op)


def shape(ins: Instruction, kernel: str = "") -> str:
    """Opcode and operands with register numbers, branch targets and the kernel's own name abstracted.

    Immediates and constant-bank offsets are kept: a changed constant is a changed instruction.
    Only a branch's target address (which moves with the schedule) is abstracted.
    """
    branch = ins.base in _BRANCH_OPS

    def one(op: str) -> str:
        op = _REG_TOKENS.sub(lambda m: re.sub(r"\d+", "#", m.group(0)), _own_name(op, kernel).replace(".reuse", ""))
        op = _LABEL.sub("L", op)
        return _ADDRESS.sub("L", op) if branch else op

    ops = [one(op) for op in ins.operands]
    pred = re.sub(r"\d+", "#", ins.predicate) if ins.predicate else ""
    return f"{pred} {ins.opcode} {','.join(ops)}"


def exact(ins: Instruction, kernel: str = "") -> str:
    return f"{_own_name(ins.text, kernel)}|{ins.control.compact()}"


@dataclass(frozen=True)
class Row:
    kind: str
    a: int | None  # instruction index in A
    b: int | None  # instruction index in B


@dataclass(frozen=True)
class LoopSummary:
    index: int
    head: int
    instructions: int
    stall_cycles: int
    barrier_waits: int  # instructions that wait on a scoreboard barrier
    yields: int
    opcodes: dict


@dataclass(frozen=True)
class SideSummary:
    instructions: int
    stall_cycles: int
    barrier_waits: int
    highest_register: int
    local_loads: int  # LDL: spill or stack traffic
    local_stores: int  # STL
    opcodes: dict
    loops: tuple[LoopSummary, ...]
    blocks: tuple[dict, ...] = ()  # per basic block: start offset, instructions, stall cycles, barrier waits


@dataclass(frozen=True)
class Diff:
    kernel_a: str
    kernel_b: str
    verdict: str
    counts: dict
    rows: tuple[Row, ...]
    a: SideSummary
    b: SideSummary
    opcode_delta: dict  # base opcode -> count(B) - count(A), nonzero only
    loop_deltas: tuple[dict, ...]
    cubin_deltas: dict = field(default_factory=dict)
    differing: tuple[str, ...] = ()  # KernelFacts.differing_parts: what the machine code's facts differ in

    def to_json(self, with_rows: bool = False) -> dict:
        d = asdict(self)
        if not with_rows:
            d.pop("rows")
        return d


def summarize_side(listing: Listing) -> SideSummary:
    ins = listing.instructions
    lps = []
    for k, lp in enumerate(loops(listing)):
        body = [ins[i] for i in lp.body]
        lps.append(
            LoopSummary(
                k,
                lp.head,
                len(body),
                sum(i.control.stall for i in body),
                sum(1 for i in body if i.control.wait_mask),
                sum(1 for i in body if i.control.yields),
                dict(Counter(i.base for i in body)),
            )
        )
    blocks = tuple(
        {
            "offset": ins[b.start].offset,
            "instructions": b.end - b.start,
            "stall_cycles": sum(i.control.stall for i in ins[b.start : b.end]),
            "barrier_waits": sum(1 for i in ins[b.start : b.end] if i.control.wait_mask),
        }
        for b in basic_blocks(listing)
    )
    return SideSummary(
        len(ins),
        sum(i.control.stall for i in ins),
        sum(1 for i in ins if i.control.wait_mask),
        highest_register(ins),
        sum(1 for i in ins if i.base == "LDL"),
        sum(1 for i in ins if i.base == "STL"),
        dict(Counter(i.base for i in ins)),
        tuple(lps),
        blocks,
    )


def align(a: Listing, b: Listing) -> list[Row]:
    """Align by shape (so renamed registers still match), then pair leftovers as moved."""
    sa = [shape(i, a.kernel) for i in a.instructions]
    sb = [shape(i, b.kernel) for i in b.instructions]
    rows: list[Row] = []
    sm = SequenceMatcher(None, sa, sb, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                same = exact(a.instructions[i], a.kernel) == exact(b.instructions[j], b.kernel)
                rows.append(Row(SAME if same else CHANGED, i, j))
        else:
            rows.extend(Row(REMOVED, i, None) for i in range(i1, i2))
            rows.extend(Row(ADDED, None, j) for j in range(j1, j2))
    # removed in one place and added elsewhere with the same shape: moved
    added: dict[str, list[int]] = {}
    for k, r in enumerate(rows):
        if r.kind == ADDED:
            added.setdefault(sb[r.b], []).append(k)
    drop = set()
    for k, r in enumerate(rows):
        if r.kind == REMOVED and added.get(sa[r.a]):
            k2 = added[sa[r.a]].pop(0)
            rows[k] = Row(MOVED, r.a, rows[k2].b)
            drop.add(k2)
    return [r for k, r in enumerate(rows) if k not in drop]


def match_loops(a: Listing, b: Listing, rows: list[Row]) -> list[tuple[int | None, int | None]]:
    """Pair A's loops with B's by structure: the loops whose bodies share the most aligned instructions.

    Greedy by overlap (Jaccard over aligned pairs); loops with nothing in common stay unpaired.
    """
    la, lb = loops(a), loops(b)
    to_b = {r.a: r.b for r in rows if r.a is not None and r.b is not None}
    scores = []
    for i, x in enumerate(la):
        mapped = {to_b[k] for k in x.body if k in to_b}
        for j, y in enumerate(lb):
            common = len(mapped & set(y.body))
            if common:
                scores.append((common / (len(x.body) + len(y.body) - common), i, j))
    pairs: list[tuple[int | None, int | None]] = []
    used_a, used_b = set(), set()
    for _, i, j in sorted(scores, reverse=True):
        if i not in used_a and j not in used_b:
            pairs.append((i, j))
            used_a.add(i)
            used_b.add(j)
    pairs += [(i, None) for i in range(len(la)) if i not in used_a]
    pairs += [(None, j) for j in range(len(lb)) if j not in used_b]
    return sorted(pairs, key=lambda p: (p[0] if p[0] is not None else len(la) + (p[1] or 0)))


def cubin_deltas(fa: CubinFacts, ka: str, fb: CubinFacts, kb: str) -> dict:
    a, b = fa.kernel(ka), fb.kernel(kb)
    attrs_a = Counter((x.name, x.value) for x in a.attrs if x.name != "EIATTR_KPARAM_INFO")
    attrs_b = Counter((x.name, x.value) for x in b.attrs if x.name != "EIATTR_KPARAM_INFO")
    return {
        "registers": [a.regcount, b.regcount],
        "frame_size": [a.frame_size, b.frame_size],
        "text_bytes": [a.text_bytes, b.text_bytes],
        "capmerc_bytes": [a.capmerc_bytes, b.capmerc_bytes],
        "merc_bytes": [a.merc_bytes, b.merc_bytes],
        "same_text": a.text_sha256 == b.text_sha256,
        "same_machine_code": a.machine_code_sha256 == b.machine_code_sha256,
        "eiattr_only_a": sorted(f"{n}={v}" for n, v in (attrs_a - attrs_b).elements()),
        "eiattr_only_b": sorted(f"{n}={v}" for n, v in (attrs_b - attrs_a).elements()),
    }


def diff_listings(a: Listing, b: Listing, facts_a: CubinFacts | None = None, facts_b: CubinFacts | None = None) -> Diff:
    rows = align(a, b)
    counts = Counter(r.kind for r in rows)
    sa, sb = summarize_side(a), summarize_side(b)
    parts = (facts_a.kernel(a.kernel).differing_parts(facts_b.kernel(b.kernel)) if facts_a and facts_b else ())
    if all(r.kind == SAME for r in rows):
        verdict = (IDENTICAL if not parts else DIFFERENT_DATA if set(parts) & set(DATA_PARTS) else METADATA_ONLY)
    elif Counter(shape(i, a.kernel) for i in a.instructions) == Counter(shape(i, b.kernel) for i in b.instructions):
        verdict = SCHEDULING_ONLY
    else:
        verdict = DIFFERENT_CODE
    ops = set(sa.opcodes) | set(sb.opcodes)
    delta = {op: sb.opcodes.get(op, 0) - sa.opcodes.get(op, 0) for op in sorted(ops)}
    loop_deltas = []
    for k, (ia, ib) in enumerate(match_loops(a, b, rows)):
        la = sa.loops[ia] if ia is not None else None
        lb = sb.loops[ib] if ib is not None else None
        loop_deltas.append(
            {
                "loop": k,
                "loop_a": ia,
                "loop_b": ib,
                "instructions": [la.instructions if la else None, lb.instructions if lb else None],
                "stall_cycles": [la.stall_cycles if la else None, lb.stall_cycles if lb else None],
                "barrier_waits": [la.barrier_waits if la else None, lb.barrier_waits if lb else None],
            }
        )
    cd = cubin_deltas(facts_a, a.kernel, facts_b, b.kernel) if facts_a and facts_b else {}
    return Diff(
        a.kernel,
        b.kernel,
        verdict,
        {k: counts.get(k, 0) for k in (SAME, CHANGED, MOVED, ADDED, REMOVED)},
        tuple(rows),
        sa,
        sb,
        {k: v for k, v in delta.items() if v},
        tuple(loop_deltas),
        cd,
        parts,
    )


def diff_cubins(cubin_a: bytes, cubin_b: bytes, kernel_a: str | None = None, kernel_b: str | None = None) -> Diff:
    """Disassemble and compare one kernel of each cubin."""
    fa, fb = read_cubin(cubin_a), read_cubin(cubin_b)
    ka = fa.kernel(kernel_a).name
    kb = fb.kernel(kernel_b).name
    la, lb = disassemble(cubin_a)[ka], disassemble(cubin_b)[kb]
    return diff_listings(la, lb, fa, fb)


def diff_files(path_a, path_b, kernel_a: str | None = None, kernel_b: str | None = None, listings=None) -> Diff:
    """Like diff_cubins for files; ``listings`` (path -> {kernel: Listing}) memoises disassembly."""
    listings = listings if listings is not None else {}
    out = []
    for path, name in ((path_a, kernel_a), (path_b, kernel_b)):
        key = str(path)
        if key not in listings:
            listings[key] = (read_cubin(Path(path).read_bytes()), disassemble(path))
        facts, lst = listings[key]
        out.append((facts, lst[facts.kernel(name).name]))
    (fa, la), (fb, lb) = out
    return diff_listings(la, lb, fa, fb)
