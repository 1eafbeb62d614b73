"""Kernel labels for tables: each mangled symbol read as people read it, shortened the same way everywhere."""

from __future__ import annotations

from ptxprobe.core.display import short_names
from ptxprobe.ptx.mangling import display_names, is_mangled


def readable_labels(labels: list[str]) -> dict[str, str]:
    """Kernel labels (``source:symbol``) with each mangled symbol read as ``display_names`` reads it, so that
    instantiations of one template stay apart by the arguments that differ."""
    symbols = [label.rsplit(":", 1)[-1] for label in labels]
    shown = display_names([s for s in symbols if is_mangled(s)])
    out = {}
    for label, symbol in zip(labels, symbols, strict=True):
        out[label] = label[: len(label) - len(symbol)] + shown[symbol] if symbol in shown else label
    if len(set(out.values())) < len(set(out)):  # two sources' kernels read alike: keep the symbols
        return {label: label for label in labels}
    return out


def table_names(labels: list[str], width: int, keep_source: bool = True) -> dict[str, str]:
    """Kernel labels for a table column of ``width``: read (``readable_labels``), then shortened the same way in
    every table (``core.display.short_names``); a source prefix all labels share goes first when room is short (or
    always, without ``keep_source``)."""
    labels = list(dict.fromkeys(labels))
    read = readable_labels(labels)
    if not keep_source or any(len(r) > width for r in read.values()):
        bare = {k: without_source(k, v) for k, v in read.items()}
        prefix = _common_source(list(read.values()))
        if len(set(bare.values())) == len(bare):  # the kernels tell themselves apart: their sources go first
            read = bare
        elif prefix:
            read = {k: v[len(prefix) :] for k, v in read.items()}
    short = short_names(list(read.values()), width)
    return {label: short[read[label]] for label in labels}


def without_source(label: str, read: str) -> str:
    """A ``source:symbol`` label's readable name without its source."""
    source = source_of(label)
    return read[len(source) :] if source and read.startswith(source) else read


def _common_source(labels: list[str]) -> str:
    """The ``source:`` prefix every label shares when each names a symbol after it ('' if none)."""
    heads = {label.rsplit(":", 1)[0] + ":" if ":" in label.split("<", 1)[0] else "" for label in labels}
    return heads.pop() if len(heads) == 1 and len(labels) > 1 else ""


def source_of(label: str) -> str:
    """The ``source:`` part of a ``source:symbol`` kernel label (a library's ``lib.so:module.ptx:``, a file's
    ``k.cu:``), '' for a label without one (a registered kernel's ``attention/fp16/…``)."""
    return label.rsplit(":", 1)[0] + ":" if ":" in label else ""
