"""What a kernel's entry reaches in its cubin, written without the kernel's name: the facts behind "the same
machine code" (``KernelFacts.machine_code_sha256`` hashes them).

Starting at the entry's ``.text.<kernel>``, every function it reaches is followed: through the relocations of
its code (a call to a device function compiled on its own, ``-c``, is a relocation to that function's symbol)
and through ``.nv.callgraph``'s (caller, callee) edges. Whole-program ptxas keeps a callee that it does not inline
inside the entry's own ``.text`` (a local symbol ``$<kernel>$<callee>``), so its code is in the entry's bytes.
For each function reached: its code (``.text`` and ``.nv.capmerc.text``), its ``.nv.info.<f>`` records and its
global ``.nv.info`` records, its relocations by target, its constant banks' contents (``.nv.constant<N>.<f>``)
and its shared and local sizes. Then the module's own data, which any kernel of the cubin may read and nothing in
the ELF ties to one kernel: the module constant banks' contents (``.nv.constant3`` holds ``.const`` data,
``.nv.constant4`` global addresses), ``.nv.global.init`` and the sizes of ``.nv.global`` and reserved shared
memory, with their relocations.

Names are left out: the entry is ``<entry>``, a callee ``<callee n>`` (n in the order reached), a section of
theirs is named through the placeholder, and a relocation or record that names a symbol by its index in the
symbol table (an order that names may change) names it by what it is instead. Data symbols and undefined
(external) symbols keep their names, the linker resolves by them, but with the trigger's spellings read as one
(``core.text.one_spelling``): a module-wide rename respells ``cutlass_table`` ``xutlass_table`` and the code that
reads it is the same.
"""

from __future__ import annotations

import json
import re
import struct

from elftools.elf.relocation import RelocationSection

from ptxprobe.binary.eiattr import EiAttr, parse_eiattrs, per_symbol
from ptxprobe.core.cache import sha256_bytes
from ptxprobe.core.text import one_spelling

ENTRY = "<entry>"
_TEXT = ".text."
_PER_FUNCTION = re.compile(r"^\.nv\.(constant\d+|shared|local)\.([^.]+)$")  # PTX identifiers have no dots
_MODULE_DATA = re.compile(r"^\.nv\.(constant\d+|global|global\.init|shared\.reserved\.\d+)$")
_SYMBOL_LIST_ATTRS = frozenset({"EIATTR_PARAM_CBANK", "EIATTR_EXTERNS"})  # data starts with / is symbol indices
_SHF_ALLOC = 0x2


class Layout:
    """A cubin's sections, symbols, relocations and call graph, indexed once per read."""

    def __init__(self, elf):
        self.sections = list(elf.iter_sections())
        self.by_name = {s.name: s for s in self.sections}
        symtab = self.by_name.get(".symtab")
        self.symbols = list(symtab.iter_symbols()) if symtab is not None else []
        self.relocations: dict[int, list] = {}  # index of the section relocated -> [(offset, type, symbol, addend)]
        for s in self.sections:
            if isinstance(s, RelocationSection):
                self.relocations.setdefault(s["sh_info"], []).extend(
                    (r["r_offset"], r["r_info_type"], r["r_info_sym"], r.entry.get("r_addend", 0))
                    for r in s.iter_relocations())
        graph = self.by_name.get(".nv.callgraph")
        words = graph.data() if graph is not None else b""
        pairs = struct.unpack(f"<{len(words) // 4}i", words[: len(words) // 4 * 4])
        self.calls = [(a, b) for a, b in zip(pairs[::2], pairs[1::2], strict=False) if a > 0 and b >= 0]
        self.function_records = per_symbol(_records(self.by_name.get(".nv.info")))

    def section_of(self, sym_index: int):
        shndx = self.symbols[sym_index]["st_shndx"] if 0 <= sym_index < len(self.symbols) else "SHN_UNDEF"
        return self.sections[shndx] if isinstance(shndx, int) and shndx < len(self.sections) else None

    def symbol_index(self, name: str) -> int | None:
        return next((i for i, s in enumerate(self.symbols)
                     if s.name == name and s["st_info"]["type"] != "STT_SECTION"), None)


def _records(section) -> tuple[EiAttr, ...]:
    return parse_eiattrs(section.data()) if section is not None else ()


def _canonical(items) -> list:
    """Sorted by their JSON text: an order that names and the symbol table's order leave alone, any types mixed."""
    return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))


def _bytes(section) -> tuple:
    """A section's size and, where it has bytes in the file, their hash (NOBITS sections have a size only)."""
    if section is None:
        return (0, None)
    return (section["sh_size"], None if section["sh_type"] == "SHT_NOBITS" else sha256_bytes(section.data()))


def reached_text(layout: Layout, entry: str) -> list[str]:
    """The code sections the entry reaches, its own first, then callees in the order their calls are found."""
    order = [_TEXT + entry]
    i = 0
    while i < len(order):
        sec = layout.by_name[order[i]]
        index = layout.sections.index(sec)
        targets = [sym for _, _, sym, _ in sorted(layout.relocations.get(index, []))]
        targets += [b for a, b in layout.calls if (home := layout.section_of(a)) is not None and home.name == sec.name]
        for sym in targets:
            home = layout.section_of(sym)
            if home is not None and home.name.startswith(_TEXT) and home.name not in order:
                order.append(home.name)
        i += 1
    return order


class _Namer:
    """Describes symbols and sections without the names of the functions reached."""

    def __init__(self, layout: Layout, entry: str, reached: list[str]):
        self.layout, self.entry = layout, entry
        self.placeholder = {name[len(_TEXT):]: ENTRY if n == 0 else f"<callee {n}>" for n, name in enumerate(reached)}

    def function(self, name: str) -> str:
        return self.placeholder.get(name, name.replace(f"${self.entry}$", f"${ENTRY}$"))

    def section(self, name: str) -> str:
        for prefix in (_TEXT, ".nv.capmerc.text.", ".nv.info."):
            if name.startswith(prefix) and name[len(prefix):] in self.placeholder:
                return prefix + self.placeholder[name[len(prefix):]]
        m = _PER_FUNCTION.match(name)
        return f".nv.{m.group(1)}.{self.function(m.group(2))}" if m else name

    def symbol(self, index: int) -> list:
        if not 0 <= index < len(self.layout.symbols):
            return ["index", index]
        sym = self.layout.symbols[index]
        home = self.layout.section_of(index)
        if sym["st_info"]["type"] == "STT_SECTION":
            return ["section", self.section(home.name if home is not None else sym.name)]
        if home is not None and home.name.startswith(_TEXT):
            owner = home.name[len(_TEXT):]
            if owner in self.placeholder:  # the entry, a callee, or a function kept inside their code
                return ["code", self.placeholder[owner], sym["st_value"]]
            return ["code of", _bytes(home)[1], sym["st_value"]]  # another kernel: by its bytes, not its name
        where = self.section(home.name) if home is not None else "undefined"
        return ["symbol", one_spelling(self.function(sym.name)), where, sym["st_value"], sym["st_size"]]

    def relocations(self, section) -> list:
        index = self.layout.sections.index(section)
        entries = self.layout.relocations.get(index, [])
        return _canonical([off, typ, self.symbol(sym), add] for off, typ, sym, add in entries)

    def record(self, a: EiAttr) -> list:
        """An EIATTR record with the symbol indices it holds written as what they name."""
        if a.name in _SYMBOL_LIST_ATTRS and a.data:
            if a.name == "EIATTR_PARAM_CBANK":
                return [a.name, a.fmt, self.symbol(a.words[0]), a.data[4:].hex()]
            return [a.name, a.fmt, _canonical(self.symbol(w) for w in a.words)]
        return [a.name, a.fmt, a.value, a.data.hex()]


def code_sha256(layout: Layout, function: str) -> str:
    """A function's instructions: ``.text.<f>`` and, from sm_100 on, ``.nv.capmerc.text.<f>``."""
    cap = layout.by_name.get(f".nv.capmerc.text.{function}")
    return sha256_bytes(layout.by_name[_TEXT + function].data() + (cap.data() if cap is not None else b""))


def _function_facts(layout: Layout, namer: _Namer, text_name: str) -> dict:
    f = text_name[len(_TEXT):]
    own = [s for s in layout.sections if (m := _PER_FUNCTION.match(s.name)) and m.group(2) == f]
    defined = [i for i, s in enumerate(layout.symbols)
               if s["st_info"]["type"] == "STT_FUNC" and (home := layout.section_of(i)) is not None
               and home.name == text_name]
    return {
        "function": namer.placeholder[f],
        "code": code_sha256(layout, f),
        "relocations": namer.relocations(layout.by_name[text_name]),
        "records": [namer.record(a) for a in _records(layout.by_name.get(f".nv.info.{f}"))],
        "function_records": _canonical(
            [layout.symbols[i]["st_value"], sorted(layout.function_records.get(i, {}).items())] for i in defined),
        "sections": _canonical([namer.section(s.name), *_bytes(s), namer.relocations(s)] for s in own),
    }


def module_data(layout: Layout, namer: _Namer) -> list:
    """The module's constant banks, initialised globals and reserved shared memory: bytes, sizes, relocations."""
    return _canonical([s.name, *_bytes(s), namer.relocations(s)] for s in layout.sections
                      if _MODULE_DATA.match(s.name) and s["sh_flags"] & _SHF_ALLOC)


def reach_facts(layout: Layout, entry: str) -> str:
    """Everything the entry reaches, without its name, as canonical JSON (``machine_code_sha256`` hashes it)."""
    reached = reached_text(layout, entry)
    namer = _Namer(layout, entry, reached)
    facts = {"functions": [_function_facts(layout, namer, t) for t in reached], "module": module_data(layout, namer)}
    return json.dumps(facts, sort_keys=True, separators=(",", ":"))


def local_bytes(layout: Layout, entry: str) -> int:
    """The entry's ``.nv.local.<kernel>`` size: local memory beside the stack frame its records state."""
    sec = layout.by_name.get(f".nv.local.{entry}")
    return sec["sh_size"] if sec is not None else 0
