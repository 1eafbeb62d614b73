"""A cubin's kernel symbol spelt back to the program's own name, its machine code untouched.

A program whose host code looks its kernel up by name (CuTe DSL's ``cudaLibraryGetKernel`` in compiled host code,
an exported object's loader) can only load a kernel under the name it was built with. ptxas decides the machine
code from the name it is given; after ptxas the name is only a string in the cubin's string tables (``.strtab``:
the symbols; ``.shstrtab``: ``.text.<k>``, ``.nv.info.<k>``...; every other record points at them by offset or
symbol index); with ``-lineinfo`` also in ``.nv_debug_ptx_txt``, the PTX text kept for profilers. A name of the
same length is rewritten in place there and nowhere else, so everything the GPU runs stays byte for byte what ptxas
gave under the chosen name (``machine_code_sha256`` leaves names out and checks it). A name of another length would
move every offset after it: refused (``SpecError``: the name cannot be used for this program), as is a name found
anywhere else.
"""

from __future__ import annotations

import io

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ptxprobe.core.errors import CubinError, SpecError

NAME_TEXT_SECTIONS = (".nv_debug_ptx_txt",)  # text sections that hold names (the PTX under -lineinfo)


def name_spans(data: bytes) -> list[tuple[int, int, str]]:
    """(file offset, size, section name) of every section of an ELF file where names are only text: its string
    tables and ``NAME_TEXT_SECTIONS``."""
    try:
        elf = ELFFile(io.BytesIO(data))
        return [(s["sh_offset"], s["sh_size"], s.name) for s in elf.iter_sections()
                if s["sh_type"] == "SHT_STRTAB" or s.name in NAME_TEXT_SECTIONS]
    except ELFError as exc:
        raise CubinError(f"malformed cubin: {exc}") from exc


def respelled(data: bytes, old: str, new: str) -> bytes:
    """The cubin with every occurrence of the symbol ``old`` in its string tables (and kept PTX text) spelt ``new``;
    the two names have the same length."""
    if old == new:
        return data
    if len(old) != len(new):
        raise SpecError(f"the code of {_short(old)} ({len(old)} characters) cannot be loaded under {_short(new)} "
                        f"({len(new)}): the program's host code looks the kernel up by its own name, and a longer or "
                        "shorter one would move every string-table offset of the cubin")
    needle, spans = old.encode(), name_spans(data)
    out = bytearray(data)
    inside = 0
    for offset, size, _ in spans:
        part = bytes(data[offset: offset + size])
        inside += part.count(needle)
        out[offset: offset + size] = part.replace(needle, new.encode())
    if inside == 0:
        raise CubinError(f"the cubin has no symbol {_short(old)}")
    if data.count(needle) != inside:  # the name is also somewhere the tables do not cover: not only a name there
        raise SpecError(f"{_short(old)} appears outside the cubin's string tables and PTX text "
                         f"({', '.join(n for _, _, n in spans)}): ptxprobe does not rewrite it there")
    return bytes(out)


def _short(name: str, keep: int = 28) -> str:
    """A long symbol for a message: its start and its end, where two names of one kernel differ."""
    return name if len(name) <= 2 * keep + 3 else f"{name[:keep]}...{name[-keep:]}"
