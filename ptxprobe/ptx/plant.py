"""A planted code change: the kernel's own PTX with a small dependent chain added to its hot loop.

The calibration's code plant (``gpu.calibrate``) is a variant whose machine code differs from the baseline's by a
known edit: it adds work, but ptxas schedules the loop anew around it, so its effect is not known in advance (the
H200 measured such plants both slower and faster). It is made through the same path as a name: the PTX edited
here, assembled by the same ptxas, loaded like a name.

Pure text work, tested on CPU. The hot loop is found by its backward branch: a ``bra`` to a label defined above
it closes a loop from that label to the branch. Of all loops, the one holding the most hot instructions (tensor
core, FMA, memory) that are not inside a loop nested in it is the hot loop: an mbarrier wait loop nested in a
pipelined main loop does not hide the main loop, and an outer loop does not win by its inner loop's work. The
chain goes right before the backward branch, so it runs once per iteration.

The chain loads a word of shared memory that only it uses, adds one and stores it back, all ``volatile``: ptxas
must keep each access (an unused ``%clock`` read or add is removed; ``tests/test_calibration_plants.py`` checks
that the cubin's ``machine_code_sha256`` differs), it is a real dependency (load latency, then the store), and the
kernel's outputs cannot change (no other instruction reads the word; the threads' races on it are harmless).
In a kernel with dynamic shared memory (``.extern .shared``) the word takes a whole 1 KiB aligned to 1 KiB: ptxas
places the dynamic buffer after the static words, so a 4-byte word moves it to offset 16, off the 1 KiB alignment
that TMA's 128-byte swizzle needs (a Gluon Hopper attention stopped with "misaligned address" on the H200, and a
CUDA error there ends the process); after 1 KiB it starts at 0x400. The kernel's shared memory grows by 1 KiB.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ptxprobe.core.errors import MalformedPtx
from ptxprobe.ptx.text import ENTRY_RE, brace_span, code_of

PLANT_SLOT = "__ptxprobe_plant"
PLANT_REG = "%ptxprobe_plant"
CHAIN = (f"ld.volatile.shared.u32 {PLANT_REG}0, [{PLANT_SLOT}];",
         f"add.u32 {PLANT_REG}1, {PLANT_REG}0, 1;",
         f"st.volatile.shared.u32 [{PLANT_SLOT}], {PLANT_REG}1;")
SLOT = f".shared .align 4 .b32 {PLANT_SLOT};"
ALIGNED_SLOT = f".shared .align 1024 .b8 {PLANT_SLOT}[1024];"  # keeps a dynamic buffer's 1 KiB alignment
MARK = "// ptxprobe planted code change"
_DYNAMIC_SHARED_RE = re.compile(r"^\s*\.extern\s+\.shared\b", re.M)

_LABEL_RE = re.compile(r"^\s*([$A-Za-z_%][\w$]*)\s*:")
_BRANCH_RE = re.compile(r"^\s*(?:@!?%?[\w$]+\s+)?bra(?:\.uni)?\s+([$A-Za-z_%][\w$]*)\s*;")
# what makes a loop hot: tensor-core and FMA work, and memory traffic
_HOT_RE = re.compile(r"^\s*(?:@!?%?[\w$]+\s+)?"
                     r"(?:wgmma|tcgen05|mma|fma|mad|ld|st|cp\.async|ldmatrix|stmatrix|red|atom)\b")


@dataclass(frozen=True)
class Loop:
    start: int  # line index of the label the backward branch jumps to
    end: int  # line index of the backward branch
    label: str
    own_hot: int  # hot instructions inside it and in no loop nested in it


@dataclass(frozen=True)
class Planted:
    ptx: str  # the edited PTX
    loop: Loop  # in the original text's line numbers
    inserted_at: int  # line index, in the edited text, of the chain's first instruction


def loops_of(lines: list[str], lo: int = 0, hi: int | None = None) -> list[tuple[int, int, str]]:
    """Every loop of ``lines[lo:hi]`` as (label line, backward-branch line, label): a branch to the nearest label
    of that name defined above it."""
    hi = len(lines) if hi is None else hi
    seen: dict[str, int] = {}
    out = []
    for i in range(lo, hi):
        if m := _LABEL_RE.match(lines[i]):
            seen[m.group(1)] = i
        if (b := _BRANCH_RE.match(lines[i])) and b.group(1) in seen:
            out.append((seen[b.group(1)], i, b.group(1)))
    return out


def _body(lines: list[str], entry: str | None) -> tuple[int, int, int]:
    """(entry line, line of its body's opening brace, line of its closing brace) of ``entry`` (the first if None)."""
    text_starts = [0, *accumulate(len(x) + 1 for x in lines)]
    for m in ENTRY_RE.finditer("\n".join(lines)):
        if entry is not None and m.group(1) != entry:
            continue
        head = bisect_right(text_starts, m.start()) - 1
        opened, closed = brace_span(lines, head)
        if "{" in code_of(lines[opened]):  # a prototype (';' before any '{') has no body: the definition follows
            return head, opened, closed
    raise MalformedPtx(f"no entry {entry!r} with a body in the PTX" if entry else "no .entry found in PTX")


def hot_loop(ptx: str, entry: str | None = None) -> Loop | None:
    """The loop of ``entry`` whose own hot instructions are the most (ties: the longer, then the first); None when
    the entry has no loop with a hot instruction."""
    lines = ptx.split("\n")
    _, lo, hi = _body(lines, entry)
    found = loops_of(lines, lo, hi + 1)
    best = None
    for start, end, label in found:
        nested = [(s, e) for s, e, _ in found if start <= s and e <= end and (s, e) != (start, end)]
        own = sum(1 for i in range(start, end + 1) if _HOT_RE.match(lines[i])
                  and not any(s <= i <= e for s, e in nested))
        key = (own, end - start, -start)
        if own and (best is None or key > best[0]):
            best = (key, Loop(start, end, label, own))
    return best[1] if best else None


def plant_in_hot_loop(ptx: str, entry: str | None = None, chain: tuple[str, ...] = CHAIN) -> Planted | None:
    """``ptx`` with ``chain`` inserted right before the hot loop's backward branch (its registers declared at the top
    of the entry's body, its shared word at module scope before the entry: ``ALIGNED_SLOT`` when the PTX has
    dynamic shared memory); None when there is no hot loop."""
    loop = hot_loop(ptx, entry)
    if loop is None:
        return None
    lines = ptx.split("\n")
    head, opened, _ = _body(lines, entry)
    indent = re.match(r"\s*", lines[loop.end]).group(0) or "\t"
    body = [f"{indent}{MARK}", *(f"{indent}{ins}" for ins in chain)]
    out = lines[:loop.end] + body + lines[loop.end:]
    out.insert(opened + 1, f"\t.reg .b32 \t{PLANT_REG}<2>;")
    out.insert(head, ALIGNED_SLOT if _DYNAMIC_SHARED_RE.search(ptx) else SLOT)
    # two lines went in above the loop (the shared word, the registers), then the mark: the chain's first line
    return Planted("\n".join(out), loop, loop.end + 3)
