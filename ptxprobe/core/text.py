"""Small text readings more than one stage needs (one definition each)."""

from __future__ import annotations

import re

TRIGGER = "cutlass"  # the substring ptxas's strstr looks for (the only one of its literals that changes code here)
_SPELLINGS = re.compile(r"[cxz]utlass")  # the trigger, and the same-length spellings ptxprobe respells it as


def one_spelling(text: str) -> str:
    """``text`` with the trigger's spellings (``cutlass``, and ``xutlass``/``zutlass`` that ptxprobe respells it as)
    read as one: two symbols that differ only there name the same thing to a comparison of what they hold."""
    return _SPELLINGS.sub(TRIGGER, text)


def split_top_level(text: str, opening: str, closing: str) -> list[str]:
    """``text`` split at the commas outside any bracket of ``opening``/``closing`` (SASS operands ``[R1+0x4], R2``,
    C++ template arguments ``int, Foo<a, b>``), each part stripped; an empty last part left out."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def split_last_group(text: str, opening: str, closing: str) -> tuple[str, str] | None:
    """(what comes before, the group) of the bracketed group ``opening…closing`` that ends ``text`` (a C++ parameter
    list ``(float*, int)``, template arguments ``<a, b<c>>``); None when ``text`` does not end with one."""
    if not text.endswith(closing):
        return None
    depth = 0
    for k in range(len(text) - 1, -1, -1):
        depth += text[k] == closing
        depth -= text[k] == opening
        if depth == 0:
            return text[:k], text[k:]
    return None
