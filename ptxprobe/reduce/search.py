"""Hierarchical delta debugging over PTX: coarse removals first (other entries, debug information, loops, basic
blocks), then single instructions and unused declarations, each pass ddmin-style, all passes again until a whole
round removes nothing.

The search knows nothing of ptxas: it asks a batch predicate (``test``) about candidate texts, in order, and
keeps the first candidate of a batch that is still interesting, so candidates of one batch assemble in parallel
while the result stays the same whatever the batch size. When a round ends without a removal, no single removal
of any pass keeps the predicate: the result is 1-minimal with respect to the removals this module knows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ptxprobe.core.cache import sha256_text
from ptxprobe.reduce.ptxbody import Body, blocks, cleaned, loops, parse, remove, unused_decls

Tester = Callable[[list[str]], list[bool]]  # candidate texts -> interesting?, in order


@dataclass(frozen=True)
class Step:
    """One accepted removal."""

    pass_name: str
    units: int  # how many units of the pass it removed at once
    lines: int  # the text's lines after it
    instructions: int
    tests: int  # candidates tested so far
    seconds: float  # since the search began


@dataclass(frozen=True)
class Outcome:
    ptx: str
    steps: tuple[Step, ...]
    tests: int
    rounds: int
    one_minimal: bool
    cleanup: bool  # candidates had their dead code removed (False: the dead code itself mattered)


def _stmt_lines(body: Body, a: int, b: int) -> frozenset[int]:
    return frozenset(ln for s in body.stmts[a:b + 1] for ln in s.lines)


def other_entries(body: Body) -> list[frozenset[int]]:
    return [frozenset(range(a, b + 1)) for a, b in body.others]


def debug_info(body: Body) -> list[frozenset[int]]:
    return [frozenset(body.debug)] if body.debug else []


def label_units(body: Body) -> list[frozenset[int]]:
    """Labels no branch names (left by debug information): each alone."""
    targets = {s.label for s in body.stmts if s.kind == "instr" and s.label}
    return [frozenset(s.lines) for s in body.stmts if s.kind == "label" and s.label not in targets]


def directive_units(body: Body) -> list[frozenset[int]]:
    return [frozenset([i]) for i in body.directives]


def loop_units(body: Body) -> list[frozenset[int]]:
    return [_stmt_lines(body, a, b) for a, b in loops(body)]


def block_units(body: Body) -> list[frozenset[int]]:
    return [_stmt_lines(body, a, b) for a, b in blocks(body)]


def instruction_units(body: Body) -> list[frozenset[int]]:
    return [frozenset(s.lines) for s in body.instructions()]


def declaration_units(body: Body) -> list[frozenset[int]]:
    return [frozenset(range(d.first, d.last + 1)) for d in unused_decls(body)]


def unrolled_units(body: Body) -> list[frozenset[int]]:
    """Runs of instructions repeating one opcode sequence (an unrolled body): the second half of each run, as
    one unit, so a long unrolled loop halves in one test before single instructions are tried."""
    instrs = body.instructions()
    ops = [s.opcode for s in instrs]
    out: list[frozenset[int]] = []
    k = 0
    while k < len(ops):
        best = (0, 0)  # (copies, period)
        for period in range(1, 17):
            copies = 1
            while ops[k + copies * period:k + (copies + 1) * period] == ops[k:k + period] and \
                    k + (copies + 1) * period <= len(ops):
                copies += 1
            if copies >= 4 and copies * period > best[0] * best[1]:
                best = (copies, period)
        copies, period = best
        if copies:
            half = instrs[k + (copies // 2) * period:k + copies * period]
            out.append(frozenset(ln for s in half for ln in s.lines))
            k += copies * period
        else:
            k += 1
    return out


PASSES: tuple[tuple[str, Callable[[Body], list[frozenset[int]]]], ...] = (
    ("other entries", other_entries),
    ("debug info and comments", debug_info),
    ("loops", loop_units),
    ("blocks", block_units),
    ("unrolled", unrolled_units),
    ("instructions", instruction_units),
    ("declarations", declaration_units),
    ("directives", directive_units),
    ("labels", label_units),
)


@dataclass
class _Search:
    entry: str
    test: Tester
    batch: int
    on_step: Callable[[str, list[Step]], None] | None
    clean: bool = True
    tests: int = 0
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    seen: dict[str, bool] = field(default_factory=dict)

    def first_interesting(self, candidates: list[str]) -> str | None:
        """The first candidate (in order) that keeps the predicate; batches of ``batch`` run together."""
        fresh = [c for c in dict.fromkeys(candidates)]
        for i in range(0, len(fresh), self.batch):
            chunk = fresh[i:i + self.batch]
            todo = [c for c in chunk if sha256_text(c) not in self.seen]
            if todo:
                for c, ok in zip(todo, self.test(todo), strict=True):
                    self.seen[sha256_text(c)] = ok
                self.tests += len(todo)
            hit = next((c for c in chunk if self.seen[sha256_text(c)]), None)
            if hit is not None:
                return hit
        return None

    def accept(self, name: str, units: int, ptx: str) -> None:
        body = parse(ptx, self.entry)
        self.steps.append(Step(name, units, len(body.lines), len(body.instructions()), self.tests,
                               round(time.monotonic() - self.started, 3)))
        if self.on_step is not None:
            self.on_step(ptx, list(self.steps))

    def candidate(self, ptx: str, lines: set[int]) -> str:
        return remove(ptx, self.entry, lines, clean=self.clean)

    def ddmin(self, ptx: str, name: str, units_of: Callable[[Body], list[frozenset[int]]]) -> tuple[str, bool]:
        """ddmin over one pass's units (removals only): returns the text and whether anything was removed."""
        n, changed = 2, False
        while True:
            units = units_of(parse(ptx, self.entry))
            if not units:
                return ptx, changed
            n = min(n, len(units))
            size = -(-len(units) // n)
            chunks = [units[i:i + size] for i in range(0, len(units), size)]
            cands = [self.candidate(ptx, set().union(*chunk)) for chunk in chunks]
            cands = [c for c in cands if c != ptx]
            hit = self.first_interesting(cands)
            if hit is not None:
                k = cands.index(hit)
                ptx, changed = hit, True
                self.accept(name, len(chunks[k]) if k < len(chunks) else 1, ptx)
                n = max(n - 1, 2)
                continue
            if n >= len(units):
                return ptx, changed
            n = min(2 * n, len(units))


def reduce_ptx(ptx: str, entry: str, test: Tester, *, batch: int = 1,
               on_step: Callable[[str, list[Step]], None] | None = None,
               passes: tuple[tuple[str, Callable[[Body], list[frozenset[int]]]], ...] = PASSES) -> Outcome:
    """The smallest text the passes reach from ``ptx`` for which ``test`` holds (``ptx`` itself must hold)."""
    s = _Search(entry, test, max(1, batch), on_step)
    dead_free = cleaned(ptx, entry)
    if dead_free != ptx:
        if s.first_interesting([dead_free]) is not None:
            ptx = dead_free
            s.accept("dead code", 1, ptx)
        else:  # the dead code itself matters: candidates keep what they leave dead
            s.clean = False
    rounds = 0
    while True:
        rounds += 1
        changed = False
        for name, units_of in passes:
            ptx, did = s.ddmin(ptx, name, units_of)
            changed |= did
        if not changed:
            return Outcome(ptx, tuple(s.steps), s.tests, rounds, True, s.clean)
