"""Rendering records for the terminal: rich tables on stdout (text mode) or one JSON document (``--json``).

Everything that is not the command's answer (progress, notes, warnings) goes to stderr
through ``logging``, so ``--json`` output can be piped straight into ``jq``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table

from ptxprobe.ptx.labels import readable_labels, table_names
from ptxprobe.static.verdicts import NO, YES, summarize_targets

log = logging.getLogger("ptxprobe")

PIPE_WIDTH = 120  # stdout that is not a terminal, unless COLUMNS says otherwise
MIN_WIDTH = 80  # the narrowest terminal the one-screen answer is laid out for
KERNEL_MIN = 24  # the kernel column's least width: other columns wrap before it shrinks further


class _Console(Console):
    """rich's console, except that a reader who closes the pipe (``| head``) ends the command with exit 141 through
    ``ptxprobe.cli.main``, not with rich's own ``SystemExit(1)``, which would read as "found differences"."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")


def width() -> int:
    """The terminal's width (COLUMNS first, as rich reads it); ``PIPE_WIDTH`` for a pipe or file."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    return Console().width if sys.stdout.isatty() else PIPE_WIDTH


def stdout() -> Console:
    return _Console(width=width())


def stderr() -> Console:
    return _Console(stderr=True, width=200) if not sys.stderr.isatty() else _Console(stderr=True)


def table(title: str, columns: list[str], rows: list[list], fold: bool = True) -> Table:
    t = Table(title=title, show_lines=False, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold" if fold else "ellipsis", no_wrap=not fold)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    return t


def show(t: Table) -> None:
    stdout().print(t)


def say(text: str, wrap: bool = False) -> None:
    """A line of the command's answer (stdout, text mode); ``wrap``: at the terminal's width."""
    stdout().print(text, highlight=False, soft_wrap=not wrap)


def note(text: str) -> None:
    """A note about how the answer was made (a lowered .version, an interruption, an option a release lacks): to
    stderr, so that stdout holds the answer alone."""
    stderr().print(text, highlight=False, soft_wrap=True)


def emit_json(doc) -> None:
    """The one JSON document a ``--json`` command writes."""
    sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    sys.stdout.flush()


def fmt_set(values) -> str:
    return "/".join(str(v) for v in values) if values else "-"


_SHORT = {
    "identical": "same",
    "differs": "DIFFERS",
    "differs_deterministic": "DIFFERS",
    "differs_beyond_noise": "DIFFERS",
    "differs_unrepeated": "differs(1 run)",
    "differs_within_noise": "noise",
    "failed": "FAILED",
}

LEGENDS = (  # the longest that fits the terminal on one line is printed
    "legend: +28r registers, cap×2.1 .nv.capmerc size, vs the baseline name; noise: within ptxas's own run-to-run "
    "spread; DIFFERS: machine code differs beyond it (sched: same sizes and count, other code; instr count; spills)",
    "legend: +28r registers, cap×2.1 capmerc size (vs the baseline); noise: within ptxas's own spread; DIFFERS: "
    "beyond it",
    "+28r regs, cap×2.1 capmerc, vs baseline; noise: ptxas's spread; DIFFERS: beyond",
)
LEGEND = LEGENDS[0]


def legend_for(cols: int) -> str:
    """The legend on one line of a ``cols``-wide terminal (80 and up)."""
    return next((text for text in LEGENDS if len(text) <= cols), LEGENDS[-1])
STATIC = "static: this compares machine code, not speed"
_LABELS = {"{base}": "as given", "{base_control}": "control (zutlass)", "{base_untriggered}": "xutlass",
           "{base_triggered}": "with cutlass", "{base_triggered_control}": "control",
           "{module_untriggered}": "whole module"}


_KIND_WORDS = {"spills": "spills", "instructions": "instr count", "schedule": "sched"}  # registers, capmerc: deltas


def verdict_cell(v: dict | None) -> str:
    if v is None:
        return "-"
    if v.get("not_compared"):
        return f"not compared: {v['not_compared']}"
    text = _SHORT.get(v["verdict"], v["verdict"] or "-")
    bits = []
    if v.get("delta_registers"):
        bits.append(f"{v['delta_registers']:+d}r")
    if v.get("capmerc_ratio") and abs(v["capmerc_ratio"] - 1) > 0.005:
        bits.append(f"cap×{v['capmerc_ratio']:.1f}")
    if not bits and v.get("kind") in _KIND_WORDS:  # a bare DIFFERS says what it is
        bits.append(_KIND_WORDS[v["kind"]])
    return text + (f" {' '.join(bits)}" if bits else "")


def answer_cell(p: dict) -> str:
    """The "matters?" column: YES / no / why it was not (fully) compared."""
    if p["answer"] in (YES, NO):
        return p["answer"]
    return f"{p['answer']}: {p['not_compared']}" if not p["names"] else p["answer"]


def template_label(template: str) -> str:
    return _LABELS.get(template, template.replace("{base}", "…"))


def answer_table(title: str, pivot: list[dict], templates: list[str], cols: int) -> Table:
    """kernel × target (arch, ptxas), one column per renamed template, and "matters?": laid out for ``cols``
    columns (80 and up), the verdict column never cut: kernel names are shortened and cells wrap first."""
    renamed = templates[1:]
    rows = [[f"{p['arch']} {p['ptxas_version']}" + ("" if p["ptxas_flags"] in ("-lineinfo", "") else
                                                     f" {p['ptxas_flags']}"),
             *(verdict_cell(p["names"].get(n)) for n in renamed), answer_cell(p)] for p in pivot]
    heads = ["target", *(template_label(n) for n in renamed), "matters?"]
    cells = [[h, *(r[i] for r in rows)] for i, h in enumerate(heads)]
    natural = [max(len(c) for c in col) for col in cells]
    least = [max(len(w) for c in col for w in c.split()) for col in cells]  # a cell wraps at its spaces
    overhead = 2 * (len(heads) + 1) + 1  # one space of padding and one of border per column, and the edges
    longest = max([len("kernel")] + [len(k) for k in readable_labels([p["kernel"] for p in pivot]).values()])
    kernel_w = max(min(longest, cols - overhead - sum(natural)), min(longest, KERNEL_MIN))
    kernel_w = min(kernel_w, max(len("kernel"), cols - overhead - sum(least)))
    short = table_names([p["kernel"] for p in pivot], kernel_w)
    widths = _fit(natural[:-1], least[:-1], cols - overhead - kernel_w - natural[-1])
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_lines=False, pad_edge=False,
              padding=(0, 1, 0, 0))
    t.add_column("kernel", no_wrap=True, width=kernel_w)
    for head, w in zip(heads[:-1], widths, strict=True):
        t.add_column(head, overflow="fold", width=w)
    t.add_column("matters?", no_wrap=True, width=natural[-1])
    for p, r in zip(pivot, rows, strict=True):
        t.add_row(short[p["kernel"]], *r)
    return t


def _fit(natural: list[int], least: list[int], room: int) -> list[int]:
    """Column widths within ``room``: each its natural width if all fit, else the widest shrunk first (never
    below the longest word)."""
    widths = list(natural)
    while sum(widths) > room:
        i = max(range(len(widths)), key=lambda j: widths[j] - least[j])
        if widths[i] <= least[i]:
            break
        widths[i] -= 1
    return widths


def show_answer(title: str, pivot: list[dict], templates: list[str], next_steps: str,
                console: Console | None = None) -> None:
    """The one-screen answer (``rename-sweep`` and ``report`` both print it): the table, its legend, the
    statement that it is static, and what to do next; no line wider than the console."""
    con = console or stdout()
    cols = max(con.width, MIN_WIDTH) if console is None else con.width
    con.print(answer_table(title, pivot, templates, cols), width=cols)
    for line in (legend_for(cols), STATIC, "next: " + next_steps):
        con.print(line, highlight=False, width=cols)


CHANGED_ROWS = 10  # kernels whose code the name changes that a summarised answer lists, the largest first


def show_summary(title: str, pivot: list[dict], templates: list[str], next_steps: str,
                 console: Console | None = None) -> None:
    """The answer for many kernels: per target how many kernels the name changes and leaves alone, the largest
    changes with their kernels, then the kernels where it changes most (the whole table: --details, the report)."""
    con = console or stdout()
    cols = max(con.width, MIN_WIDTH) if console is None else con.width
    names = table_names([p["kernel"] for p in pivot], 40, keep_source=False)
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for head in ("target", "kernels", "changed", "same", "not compared"):
        t.add_column(head, overflow="fold", max_width=14)
    for head in ("largest register change", "largest capmerc change"):
        t.add_column(head, overflow="fold", ratio=1)
    for s in summarize_targets(pivot):
        target = f"{s.arch} {s.ptxas_version}" + ("" if s.ptxas_flags in ("-lineinfo", "") else f" {s.ptxas_flags}")
        reg = f"{s.largest_register_change:+d}r {names[s.largest_register_kernel]}" if s.largest_register_kernel \
            else "-"
        cap = f"×{s.largest_capmerc_ratio:.2f} {names[s.largest_capmerc_kernel]}" if s.largest_capmerc_kernel \
            else "-"
        t.add_row(target, str(s.kernels), str(s.changed), str(s.unchanged), str(s.not_compared), reg, cap)
    con.print(t, width=cols)

    def size(p: dict) -> int:
        return max((abs(v.get("delta_registers") or 0) for v in p["names"].values()), default=0)

    changed = sorted((p for p in pivot if p["answer"] == YES), key=lambda p: -size(p))
    if changed:
        shown = changed[:CHANGED_ROWS]
        con.print(answer_table(f"where the name changes the code most ({len(shown)} of {len(changed)})", shown,
                               templates, cols), width=cols)
    for line in (legend_for(cols), STATIC, "next: " + next_steps):
        con.print(line, highlight=False, width=cols)


SPEED_ROWS = 6  # timed groups the terminal lists (those where a name changes speed, the largest first)
SPEED_KERNEL_MIN = 20  # the kernel column of the speed rows: the rest of the width, at least this


def show_speed(title: str, speed: dict, templates: list[str], console: Console | None = None) -> None:
    """The speed answer of a GPU run, before the static table: the calibration in words, then per kernel, problem and
    ptxas each renamed name's throughput ratio, interval and verdict; condensed to the groups where a name changes
    speed (at most ``SPEED_ROWS``), the rest counted in one line."""
    con = console or stdout()
    cols = max(con.width, MIN_WIDTH) if console is None else con.width
    cal = speed.get("calibration")
    failed = f": {len(cal['failures'])} checks failed, its verdicts are not to be trusted" if cal and cal["failures"] \
        else ""
    con.print(cal["head"] + failed if cal else "no GPU calibration recorded: judge the intervals by the A/A pairs",
              highlight=False, width=cols)
    renamed = [t for t in templates[1:] if any(t in g["names"] for g in speed["table"])]
    changes = [g for g in speed["table"] if g["changes"]]
    changed = _condensed(changes)
    if changed:
        rows = [[g["problem"], g["ptxas"], *((g["names"].get(n) or {}).get("said", "-") for n in renamed)]
                for g in changed]
        heads = ["problem", "ptxas", *(template_label(n) for n in renamed)]
        natural = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
        longest = max(len(g["kernel"]) for g in changed)
        kernel_w = max(SPEED_KERNEL_MIN, min(longest, cols - sum(natural) - len(heads) - 4))
        short = table_names([g["kernel"] for g in changed], kernel_w)
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
        t.add_column("kernel", no_wrap=True, width=kernel_w)
        for head in heads:
            t.add_column(head, overflow="fold")
        for g, r in zip(changed, rows, strict=True):
            t.add_row(short[g["kernel"]], *r)
        con.print(t, width=cols)
    n = len(speed["table"])
    shown = (f"the {len(changed)} largest of {len(changes)} groups where a name is faster or slower (beyond "
             f"±{speed['margin']})" if changed else f"in no group is a name faster or slower beyond ±{speed['margin']}")
    across = sum(1 for g in speed["table"] if g.get("straddles") and not g["changes"])
    unsure = f"; in {across} a significant difference straddles the margin (more rounds would tell)" if across else ""
    con.print(f"speed: {shown}{unsure}; {n - len(changes) - across} of {n} groups within it (equivalent, negligible, "
              "inconclusive) or the same code; every group in the HTML report", highlight=False, width=cols)
    for tally in speed["tallies"]:
        counts = ", ".join(f"{v} {n}" for v, n in tally["counts"])
        con.print(f"{tally['template']} in {tally['n']} groups: {counts}", highlight=False, width=cols)


def _condensed(groups: list[dict]) -> list[dict]:
    """At most ``SPEED_ROWS`` groups, the largest changes first, a slower one kept among them when there is one."""
    def by_size(gs: list[dict]) -> list[dict]:
        return sorted(gs, key=lambda g: -g["largest"])

    slower = by_size([g for g in groups if any(v["verdict"] == "slower" for v in g["names"].values())])[:2]
    rest = by_size([g for g in groups if g not in slower])[:SPEED_ROWS - len(slower)]
    return by_size(rest + slower)

