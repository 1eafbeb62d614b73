"""Facts about a cubin, read with pyelftools: per-kernel code, capmerc, EIATTR records, tool info.

Layout is kept apart from meaning: ``read_cubin`` returns records, nothing here formats text. The records'
decoding is ``binary.eiattr``'s; what a kernel reaches (callees, constant banks, relocations) ``binary.reach``'s.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ptxprobe.binary.eiattr import EIATTR_NAMES, EiAttr, parse_eiattrs
from ptxprobe.binary.reach import Layout, code_sha256, local_bytes, reach_facts
from ptxprobe.core.cache import sha256_bytes
from ptxprobe.core.errors import CubinError

__all__ = ["EIATTR_NAMES", "CubinFacts", "EiAttr", "KernelFacts", "kernel_columns", "parse_eiattrs", "read_cubin"]

INSTRUCTION_BYTES = 16  # Volta and later: one 128-bit word per instruction


# what "the same machine code" hashes: 2 adds the shared section's alignment (1: runs recorded 2026-12-02..05)
MACHINE_CODE_VERSION = 2


@dataclass(frozen=True)
class KernelFacts:
    name: str
    text_bytes: int
    text_sha256: str
    n_instructions: int
    capmerc_bytes: int  # .nv.capmerc.text.<k>
    merc_bytes: int  # all .nv.merc.* sections of the cubin
    attrs: tuple[EiAttr, ...]
    shared_bytes: int
    constant0_bytes: int
    function_attrs: dict = field(default_factory=dict)  # .nv.info records for this symbol: name -> value
    code_sha256: str = ""  # .text plus .nv.capmerc.text: the instructions (see machine_code_sha256 for "same code")
    local_bytes: int = 0  # .nv.local.<k>
    shared_align: int = 0  # .nv.shared.<k>'s alignment (0: no shared section)
    reach: str = ""  # binary.reach.reach_facts: callees, records, constant banks, relocations, module data; no names

    def attr(self, name: str) -> EiAttr | None:
        return next((a for a in self.attrs if a.name == name), None)

    @property
    def regcount(self) -> int | None:
        return self.function_attrs.get("EIATTR_REGCOUNT")

    @property
    def frame_size(self) -> int | None:
        return self.function_attrs.get("EIATTR_FRAME_SIZE")

    def differing_parts(self, other: KernelFacts) -> tuple[str, ...]:
        """Which parts of ``machine_code_sha256``'s facts differ from ``other``'s, by name: ``instructions``,
        ``records`` (.nv.info), ``shared size``, ``local size``, ``constant bank 0`` (its size or contents), and of
        what the entry reaches, ``callees`` (their code or facts), ``relocations`` and ``module data`` (constant
        banks, initialised globals: what the kernel reads, so it may compute another result). Empty when the
        machine code is the same."""
        mine, theirs = (json.loads(x.reach) if x.reach else {} for x in (self, other))
        fa, fb = mine.get("functions", []), theirs.get("functions", [])
        own_a, own_b = (f[0] if f else {} for f in (fa, fb))

        def own(key: str) -> bool:
            return own_a.get(key) != own_b.get(key)

        parts = {"instructions": self.code_sha256 != other.code_sha256,
                 "records": self._global_records() != other._global_records() or own("records")
                 or own("function_records"),
                 "shared size": self.shared_bytes != other.shared_bytes,
                 "shared alignment": self.shared_align != other.shared_align,
                 "local size": self.local_bytes != other.local_bytes,
                 "constant bank 0": self.constant0_bytes != other.constant0_bytes or own("sections"),
                 "relocations": own("relocations"), "callees": fa[1:] != fb[1:],
                 "module data": mine.get("module") != theirs.get("module")}
        return tuple(name for name, differs in parts.items() if differs)

    @property
    def machine_code_sha256(self) -> str:
        """ptxprobe's one definition of "the same machine code": everything the GPU runs under this name, the name
        left out (``binary.reach`` says how). The entry's instructions (``.text`` and ``.nv.capmerc.text``), its
        records in the global ``.nv.info`` (registers, frame, stack) and its own ``.nv.info.<kernel>`` (launch
        bounds, register cap, parameter bank, exit offsets...), its shared, local and constant-bank sizes and the
        banks' contents, its relocations by target, every function it calls with the same facts of its own, and
        the module's constant banks and initialised globals. The static verdict, the GPU runs' skip of identical
        code, ``diff`` and ``repro`` all decide with it. Version ``MACHINE_CODE_VERSION`` (2) also hashes the shared
        section's alignment; rows carry their version, and ``machine_code_v1_sha256`` is the definition runs recorded
        before it used (what a run recorded then is compared on)."""
        return self._machine_code(with_alignment=True)

    @property
    def machine_code_v1_sha256(self) -> str:
        """``machine_code_sha256`` as version 1 defined it (no shared alignment): to compare with runs recorded
        under it (``static.verdicts.comparable_code``, ``repro``)."""
        return self._machine_code(with_alignment=False)

    def _machine_code(self, with_alignment: bool) -> str:
        facts = [self.code_sha256, self.shared_bytes, self.constant0_bytes, self.local_bytes, self._global_records(),
                 self.reach] + ([self.shared_align] if with_alignment else [])
        return sha256_bytes(json.dumps(facts).encode())

    def _global_records(self) -> list[tuple[str, str]]:
        """The entry's records in the global ``.nv.info``, in one canonical order."""
        return sorted((str(n), repr(v)) for n, v in self.function_attrs.items())


@dataclass(frozen=True)
class CubinFacts:
    sha256: str
    arch: str | None  # from the ELF flags, e.g. sm_90a
    kernels: dict  # name -> KernelFacts
    global_attrs: tuple[EiAttr, ...]  # .nv.info (per-function records keyed by symbol index)
    tkinfo: dict = field(default_factory=dict)

    def kernel(self, name: str | None = None) -> KernelFacts:
        if name is None:
            if len(self.kernels) != 1:
                raise CubinError(f"cubin has {len(self.kernels)} kernels; name one of {sorted(self.kernels)}")
            return next(iter(self.kernels.values()))
        if name not in self.kernels:
            raise CubinError(f"no kernel {name!r} in cubin (have: {', '.join(sorted(self.kernels)) or 'none'})")
        return self.kernels[name]


def parse_tkinfo(data: bytes) -> dict:
    """``.note.nv.tkinfo``: an ELF note whose descriptor holds the tool name, version and options."""
    if len(data) < 12:
        return {}
    namesz, descsz, _ = struct.unpack_from("<III", data, 0)
    desc = data[12 + ((namesz + 3) & ~3) :][:descsz]
    strings = [s.decode("utf-8", "replace") for s in desc.split(b"\0") if len(s) > 2 and s.isascii()]
    printable = [s for s in strings if all(c.isprintable() for c in s)]
    out: dict = {"strings": printable}
    for s in printable:
        if s in ("ptxas", "ptxas-blackwell", "nvcc", "nvlink") and "tool" not in out:
            out["tool"] = s
        elif s.startswith("Cuda compilation tools") or s.startswith("V1"):
            out.setdefault("version", s)
        elif s.startswith("-") or " -" in s:
            out.setdefault("options", s)
    return out


def _arch_from_header(flags: int, osabi) -> str | None:
    """SM number from e_flags: low byte in the CUDA ELF ABI v7 (OSABI 0x33), second byte in v8 (0x41)."""
    sm = (flags >> 8) & 0xFF if osabi in (0x41, "ELFOSABI_0x41") or (flags & 0xFF) < 0x14 else flags & 0xFF
    return f"sm_{sm}" if sm else None


def read_cubin(data: bytes) -> CubinFacts:
    """Per-kernel facts of a cubin given as bytes."""
    if data[:4] != b"\x7fELF":
        raise CubinError("not an ELF file (a cubin starts with \\x7fELF)")
    try:
        elf = ELFFile(io.BytesIO(data))
        layout = Layout(elf)
        sections = layout.by_name
        sizes = {name: s["sh_size"] for name, s in sections.items() if name}
        kernels = {}
        merc = sum(sz for n, sz in sizes.items() if n.startswith(".nv.merc."))
        glob = sections.get(".nv.info")
        glob_attrs = parse_eiattrs(glob.data()) if glob is not None else ()
        for name, sec in sections.items():
            if not name.startswith(".text."):
                continue
            k = name[len(".text.") :]
            text = sec.data()
            info = sections.get(f".nv.info.{k}")
            attrs = parse_eiattrs(info.data()) if info is not None else ()
            sym = layout.symbol_index(k)
            kernels[k] = KernelFacts(
                name=k,
                text_bytes=len(text),
                text_sha256=sha256_bytes(text),
                n_instructions=len(text) // INSTRUCTION_BYTES,
                capmerc_bytes=sizes.get(f".nv.capmerc.text.{k}", 0),
                merc_bytes=merc,
                attrs=attrs,
                shared_bytes=sizes.get(f".nv.shared.{k}", 0),
                constant0_bytes=sizes.get(f".nv.constant0.{k}", 0),
                code_sha256=code_sha256(layout, k),
                function_attrs=layout.function_records.get(sym, {}) if sym is not None else {},
                local_bytes=local_bytes(layout, k),
                shared_align=int(sections[f".nv.shared.{k}"]["sh_addralign"]) if f".nv.shared.{k}" in sections else 0,
                reach=reach_facts(layout, k),
            )
        tk = sections.get(".note.nv.tkinfo")
        arch = _arch_from_header(elf.header["e_flags"], elf.header["e_ident"]["EI_OSABI"])
        return CubinFacts(
            sha256_bytes(data), arch, kernels, glob_attrs, parse_tkinfo(tk.data()) if tk is not None else {}
        )
    except (ELFError, struct.error, ValueError) as exc:
        raise CubinError(f"malformed cubin: {exc}") from exc


def kernel_columns(data: bytes, name: str) -> dict:
    """The per-kernel facts a result row carries (a pure function of the cubin bytes)."""
    return _columns(read_cubin(data).kernel(name))


def kernels_columns(data: bytes, names: list[str]) -> dict[str, dict | CubinError]:
    """``kernel_columns`` of several kernels of one cubin, read once (a module's entries share one cubin); a
    kernel the cubin lacks gets its error."""
    facts = read_cubin(data)
    out: dict[str, dict | CubinError] = {}
    for name in names:
        try:
            out[name] = _columns(facts.kernel(name))
        except CubinError as exc:
            out[name] = exc
    return out


def _columns(k: KernelFacts) -> dict:
    return {
        "text_sha256": k.text_sha256,
        "code_sha256": k.code_sha256,
        "machine_code_sha256": k.machine_code_sha256,
        "machine_code_version": MACHINE_CODE_VERSION,
        "machine_code_v1_sha256": k.machine_code_v1_sha256,
        "text_bytes": k.text_bytes,
        "capmerc_bytes": k.capmerc_bytes,
        "merc_bytes": k.merc_bytes,
        "n_instructions": k.n_instructions,
        "shared_bytes": k.shared_bytes,
        "shared_align": k.shared_align,
        "eiattr_registers": k.regcount,
    }
