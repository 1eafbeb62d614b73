"""How kernels and problems are named in tables: a problem's label, and kernel labels shortened alike everywhere."""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher


def problem_label(row: dict) -> str:
    """A runtime row's problem: ``N=4096`` for attention, the size set (``m=2048,n=2048,k=2048``) for a user kernel."""
    seq_len = row.get("seq_len")
    if seq_len is not None and seq_len == seq_len:  # not None, not NaN
        return f"N={int(seq_len)}"
    return str(row.get("sizes", "-"))


def short_names(labels, width: int) -> dict[str, str]:
    """Kernel labels shortened to ``width`` the same way in every table: first the ``/`` parts that tell no two
    labels apart (from the end: the config, then the head dim ...), then the middle elided."""
    labels = list(dict.fromkeys(labels))
    parts = {label: label.split("/") for label in labels}

    def shown(label: str, dropped: set[int]) -> str:
        return "/".join(p for i, p in enumerate(parts[label]) if i not in dropped)

    dropped: set[int] = set()
    for i in range(max((len(p) for p in parts.values()), default=0) - 1, 0, -1):
        if all(len(shown(label, dropped)) <= width for label in labels):
            break
        if len({shown(label, dropped | {i}) for label in labels}) == len(labels):
            dropped.add(i)
    out = {}
    for label in labels:
        head, _, rest = shown(label, dropped).partition("/")
        room = width - len(rest) - 1 if rest else width
        if len(head) > room >= 5:  # the family's name elided in its middle: its start and end tell them apart
            head = _elide(head, room)
        out[label] = _elide(head + ("/" + rest if rest else ""), width)
    uses = Counter(out.values())
    alike = [label for label in labels if uses[out[label]] > 1]
    if alike:  # elided alike: each keeps the words in which it differs from the kernels that start as it does
        out.update(_elided_apart({label: shown(label, dropped) for label in labels}, alike, width))
    still: dict[str, list[str]] = {}
    for label in sorted(labels):
        still.setdefault(out[label], []).append(label)
    for name, same in still.items():  # still alike: numbered, in order
        if len(same) < 2:
            continue
        for k, label in enumerate(same, 1):
            out[label] = _elide(name, width - len(f" #{k}")) + f" #{k}"
    return out


def _elided_apart(texts: dict[str, str], keys: list[str], width: int) -> dict[str, str]:
    """``keys``' texts, whose middles were elided alike (instantiations differing deep inside template arguments),
    each cut to ``width`` as its start, then the words in which it differs from the texts that start as it does
    (each word once, in order), then its end: ``Kernel<SparseGemm…bfloat16_t…ColumnMajor…>>``."""
    tokens = {key: re.findall(r"\w+|\s+|.", text) for key, text in texts.items()}
    out = {}
    for key in keys:
        text, own = texts[key], tokens[key]
        head = text[: max(8, width // 4)].rstrip()
        at: set[int] = set()
        for other_key, other in tokens.items():
            if other_key == key or not texts[other_key].startswith(head):
                continue
            for tag, i1, i2, _, _ in SequenceMatcher(None, own, other, autojunk=False).get_opcodes():
                if tag != "equal":
                    at.update(range(i1, i2))
        differing = list(dict.fromkeys(own[i] for i in sorted(at) if own[i].strip()))
        tail = "".join(own[-2:]) if len(own) > 2 else ""
        shown = head + "…" + "…".join(differing) + "…" + tail
        out[key] = shown if len(shown) <= width else _elide(shown, width)
    return out


def _elide(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    tail = max(1, (width - 1) // 2)
    return text[: width - 1 - tail] + "…" + text[-tail:]
