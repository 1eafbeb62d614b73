"""The renamer's DWARF half: rewrite the kernel's name inside ``.debug_info`` written as ``.bN`` data.

The unit is decoded with pyelftools against ``.debug_abbrev`` (no reliance on LLVM's
verbose-asm comments, which nvcc's PTX does not have): every ``DW_FORM_string`` attribute
that names the kernel (the entry, a mangled entry's identifier, a mangled local) is
rewritten, and the unit length and every unit-relative DIE reference after a changed
string are shifted by the change in length. Lines that did not change keep their text.
PTX whose DWARF cannot be decoded is refused with a message, never rewritten blind.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from ptxprobe.core.errors import MalformedPtx
from ptxprobe.ptx.dwarf import dwarf_info, is_decode_error
from ptxprobe.ptx.mangling import is_mangled, own_identifier
from ptxprobe.ptx.text import local_prefix

_DATA_RE = re.compile(r"^(\s*)\.b(8|16|32|64)\s+(.*?)(\s*//.*)?$")
_REF_FORMS = {"DW_FORM_ref1": 1, "DW_FORM_ref2": 2, "DW_FORM_ref4": 4, "DW_FORM_ref8": 8}


@dataclass
class _Line:
    indent: str
    width: int
    operands: list  # ints, or label strings (relocations)
    comment: str
    text: str
    changed: bool = False
    removed: bool = False
    extra: tuple[str, ...] = ()  # more lines after this one (a longer name in one-byte-per-line style)


def _parse_body(lines: list[str], start: int, end: int, section: str) -> list[_Line | None]:
    out: list[_Line | None] = []
    for ln in lines[start:end]:
        if not ln.strip():
            out.append(None)
            continue
        m = _DATA_RE.match(ln)
        if not m:
            raise MalformedPtx(f"cannot read {section} line {ln.strip()!r}: not a .b8/.b16/.b32/.b64 directive")
        ops = []
        for o in m.group(3).split(","):
            o = o.strip()
            try:
                ops.append(int(o, 0))
            except ValueError:
                ops.append(o)
        out.append(_Line(m.group(1), int(m.group(2)) // 8, ops, m.group(4) or "", ln))
    return out


def _bytes(body: list[_Line | None]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The section's bytes (labels as zeros) and, per byte offset, where its operand lives: (line, operand)."""
    data = bytearray()
    where = []
    for li, line in enumerate(body):
        if line is None:
            continue
        for oi, v in enumerate(line.operands):
            where.append((len(data), li, oi))
            value = v if isinstance(v, int) else 0
            data += (value & ((1 << (8 * line.width)) - 1)).to_bytes(line.width, "little")
    return bytes(data), where


def renamed_string(s: str, old: str, new: str) -> str | None:
    """The new value of a DWARF string that names the kernel, or None if it does not."""
    if s == old:
        return new
    if is_mangled(old) and s == own_identifier(old):
        return own_identifier(new)
    if s.startswith(local_prefix(old)):
        return local_prefix(new) + s[len(local_prefix(old)) :]
    return None


def rename_debug_info(lines: list[str], info_span: tuple[int, int], abbrev_span: tuple[int, int] | None,
                      old: str, new: str) -> int:
    """Rewrite the kernel's name in one .debug_info body in place; returns the number of strings changed."""
    body = _parse_body(lines, *info_span, ".debug_info")
    if all(b is None for b in body):
        return 0  # bodies stripped by ptxas (cubin-embedded PTX)
    if abbrev_span is None:
        raise MalformedPtx(".debug_info without .debug_abbrev: cannot decode it to rename the kernel in it")
    abbrev_body = _parse_body(lines, *abbrev_span, ".debug_abbrev")
    info, where = _bytes(body)
    abbrev, _ = _bytes(abbrev_body)
    edits, refs, units = _scan(info, abbrev, old, new)
    if not edits:
        return 0
    at = {off: (li, oi) for off, li, oi in where}
    for cu_off, length in units:  # unit_length: +delta of the strings inside the unit
        delta = sum(len(nb) - ol for o, ol, nb, cu in edits if cu == cu_off)
        _set(body, at, cu_off, length + delta)
    for off, value, cu_off in refs:  # unit-relative references past a changed string move with it
        delta = sum(len(nb) - ol for o, ol, nb, cu in edits if cu == cu_off and o - cu_off < value)
        if delta:
            _set(body, at, off, value + delta)
    for off, old_len, new_bytes, _ in sorted(edits, reverse=True):  # back to front: offsets stay valid
        _replace_string(body, at, off, old_len, new_bytes)
    rebuilt: list[str] = []
    for ln, b in zip(lines[info_span[0] : info_span[1]], body, strict=True):
        if b is None:
            rebuilt.append(ln)
        elif not b.removed:
            rebuilt.extend(_render(b) if b.changed else [b.text])
    lines[info_span[0] : info_span[1]] = rebuilt
    return len(edits)


def _scan(info: bytes, abbrev: bytes, old: str, new: str):
    edits, refs, units = [], [], []
    try:
        di = dwarf_info(info, abbrev)
        for cu in di.iter_CUs():
            if cu["unit_length"] >= 0xFFFFFFF0:
                raise MalformedPtx("64-bit DWARF in .debug_info: renaming it is not supported")
            units.append((cu.cu_offset, cu["unit_length"]))
            for die in cu.iter_DIEs():
                for a in die.attributes.values():
                    if a.form == "DW_FORM_string":
                        s = a.value.decode("latin-1")
                        ns = renamed_string(s, old, new)
                        if ns is not None and ns != s:
                            edits.append((a.offset, len(a.value), ns.encode("latin-1"), cu.cu_offset))
                    elif a.form in _REF_FORMS:
                        if _REF_FORMS[a.form] != 4:
                            raise MalformedPtx(f"{a.form} references in .debug_info: renaming is not supported")
                        refs.append((a.offset, a.value, cu.cu_offset))
    except MalformedPtx:
        raise
    except Exception as exc:
        if is_decode_error(exc):
            raise MalformedPtx(f"cannot decode .debug_info to rename the kernel in it ({type(exc).__name__}: {exc})"
                               ) from exc
        raise
    return edits, refs, units


def _set(body: list, at: dict, offset: int, value: int) -> None:
    if offset not in at:
        raise MalformedPtx(f".debug_info: the field at byte {offset} is split over directives: cannot rewrite it")
    li, oi = at[offset]
    line = body[li]
    if not isinstance(line.operands[oi], int):
        raise MalformedPtx(f".debug_info: the field at byte {offset} is a label: cannot rewrite it")
    line.operands[oi] = value
    line.changed = True


def _replace_string(body: list, at: dict, offset: int, old_len: int, new_bytes: bytes) -> None:
    """Replace the ``old_len`` one-byte operands from ``offset`` with ``new_bytes``, keeping the line layout."""
    spans: dict[int, list[int]] = {}
    for k in range(old_len):
        li, oi = at[offset + k]
        if body[li].width != 1:
            raise MalformedPtx(".debug_info: a name string is not written as .b8 bytes: cannot rewrite it")
        spans.setdefault(li, []).append(oi)
    first = min(spans)
    one_per_line = all(len(body[li].operands) == 1 for li in spans)
    if one_per_line:  # LLVM's style: a byte per line, the comment on the first
        head = body[first]
        head.operands = [new_bytes[0]]
        head.changed = True
        head.extra = tuple(f"{head.indent}.b8 {b}" for b in new_bytes[1:])
        for li in sorted(spans)[1:]:
            body[li].removed = True
        return
    for li in sorted(spans, reverse=True):  # comma lists: rewrite the operands in place
        ops = spans[li]
        line = body[li]
        del line.operands[ops[0] : ops[-1] + 1]
        if li == first:
            line.operands[ops[0] : ops[0]] = list(new_bytes)
        line.changed = True
        line.removed = not line.operands


def _render(line: _Line) -> list[str]:
    return [f"{line.indent}.b{line.width * 8} {','.join(str(v) for v in line.operands)}{line.comment}", *line.extra]


_LABEL_RE = re.compile(r"^\s*([$%\w.]+):\s*(//.*)?$")


def rename_debug_str(lines: list[str], str_span: tuple[int, int], abbrev_span: tuple[int, int] | None,
                     old: str, new: str) -> int:
    """Rewrite the kernel's name in a ``.debug_str`` body in place (Triton 3.8+ names the kernel there and refers to
    it by label: ``.loc … function_name $L__info_string0``); returns the number of strings changed. Strings after a
    changed one move; that is safe only where nothing refers to them by a numeric offset, so a table that
    ``.debug_info`` reads through ``DW_FORM_strp`` is refused when a length changes."""
    items: list[tuple[str, object]] = []  # ("label", line) or ("byte", value) in order, one string after another
    for ln in lines[str_span[0] : str_span[1]]:
        if not ln.strip():
            continue
        if _LABEL_RE.match(ln):
            items.append(("label", ln))
            continue
        parsed = _parse_body([ln], 0, 1, ".debug_str")[0]
        if parsed is None or parsed.width != 1 or not all(isinstance(v, int) for v in parsed.operands):
            raise MalformedPtx(f"cannot read .debug_str line {ln.strip()!r}: not .b8 bytes")
        items += [("byte", v) for v in parsed.operands]
    out: list[str] = []
    current: list[int] = []
    changed = 0
    length_changed = False
    for kind, value in items:
        if kind == "label":
            out.append(str(value))
            continue
        if value != 0:
            current.append(int(value))  # type: ignore[call-overload]
            continue
        text = bytes(current).decode("latin-1")
        renamed = renamed_string(text, old, new)
        if renamed is not None and renamed != text:
            changed += 1
            length_changed |= len(renamed) != len(text)
            text = renamed
        data = text.encode("latin-1") + b"\0"
        out.append(f".b8 {data[0]}" + (f"  // {text}" if text else ""))
        out += [f".b8 {b}" for b in data[1:]]
        current = []
    if current:
        raise MalformedPtx(".debug_str: the last string has no terminating 0 byte")
    if not changed:
        return 0
    if length_changed and abbrev_span is not None and _uses_strp(lines, abbrev_span):
        raise MalformedPtx(".debug_str holds the kernel's name and .debug_info reads it by offset (DW_FORM_strp): "
                           "renaming to a name of another length is not supported")
    lines[str_span[0] : str_span[1]] = out
    return changed


def _uses_strp(lines: list[str], abbrev_span: tuple[int, int]) -> bool:
    """Does any abbreviation declare an attribute of form DW_FORM_strp?"""
    from elftools.dwarf.abbrevtable import AbbrevTable
    from elftools.dwarf.structs import DWARFStructs

    data, _ = _bytes(_parse_body(lines, *abbrev_span, ".debug_abbrev"))
    try:
        table = AbbrevTable(DWARFStructs(little_endian=True, dwarf_format=32, address_size=8), io.BytesIO(data), 0)
    except Exception as exc:
        if is_decode_error(exc):
            raise MalformedPtx(f"cannot decode .debug_abbrev ({type(exc).__name__}: {exc})") from exc
        raise
    decls = table._abbrev_map.values()  # pyelftools parses every declaration up front and lists them only here
    return any(form == "DW_FORM_strp" for decl in decls for _, form in decl.iter_attr_specs())
