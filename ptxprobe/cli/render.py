"""Rendering records for the terminal: rich tables on stdout (text mode) or one JSON document (``--json``).

Everything that is not the command's answer (progress, notes, warnings) goes to stderr
through ``logging``, so ``--json`` output can be piped straight into ``jq``.
"""

from __future__ import annotations

import json
import logging
import sys

from rich.console import Console
from rich.table import Table

log = logging.getLogger("ptxprobe")

WIDTH = 120


def stdout() -> Console:
    return Console(width=WIDTH) if not sys.stdout.isatty() else Console()


def stderr() -> Console:
    return Console(stderr=True, width=200) if not sys.stderr.isatty() else Console(stderr=True)


def table(title: str, columns: list[str], rows: list[list], fold: bool = True) -> Table:
    t = Table(title=title, show_lines=False, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold" if fold else "ellipsis", no_wrap=not fold)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    return t


def show(t: Table) -> None:
    stdout().print(t)


def say(text: str) -> None:
    """A line of the command's answer (stdout, text mode)."""
    stdout().print(text, highlight=False, soft_wrap=True)


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


def verdict_cell(v: dict | None) -> str:
    if v is None:
        return "-"
    text = _SHORT.get(v["verdict"], v["verdict"] or "-")
    bits = []
    if v.get("delta_registers"):
        bits.append(f"{v['delta_registers']:+d}r")
    if v.get("capmerc_ratio") and abs(v["capmerc_ratio"] - 1) > 0.005:
        bits.append(f"cap×{v['capmerc_ratio']:.1f}")
    return text + (f" {' '.join(bits)}" if bits else "")


def pivot_table(title: str, pivot: list[dict], templates: list[str]) -> Table:
    """kernel × arch × ptxas, one column per renamed template: the answer at a glance (fits 120 columns)."""
    renamed = templates[1:]
    t = Table(title=title, title_justify="left", show_lines=False, width=min(WIDTH, 120))
    t.add_column("kernel", overflow="ellipsis", no_wrap=True, ratio=3)
    t.add_column("arch", no_wrap=True, min_width=7)
    t.add_column("ptxas", no_wrap=True, min_width=7)
    labels = {"{base}": "as given", "{base_control}": "control (zutlass)", "{base_untriggered}": "xutlass"}
    for name in renamed:
        t.add_column(labels.get(name, name.replace("{base}", "…")), no_wrap=True, overflow="ellipsis", ratio=2)
    t.add_column("matters?", no_wrap=True, min_width=8)
    for p in pivot:  # ordered by kernel, then SM number (static.verdicts.pivot)
        flags = "" if p["ptxas_flags"] in ("-lineinfo", "") else f" {p['ptxas_flags']}"
        t.add_row(p["kernel"], p["arch"], p["ptxas_version"] + flags,
                  *(verdict_cell(p["names"].get(n)) for n in renamed), "YES" if p["name_matters"] else "no")
    return t
