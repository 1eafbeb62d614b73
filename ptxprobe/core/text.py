"""Small text readings more than one stage needs (one definition each)."""

from __future__ import annotations


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
