"""Facts about a cubin, read with pyelftools: per-kernel code, capmerc, EIATTR records, tool info.

Layout is kept apart from meaning: ``read_cubin`` returns records, nothing here formats text.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ptxprobe.core.cache import sha256_bytes
from ptxprobe.core.errors import CubinError

# EIATTR attribute codes, as named by cuobjdump -elf (checked against it in the tests).
EIATTR_NAMES = {
    0x01: "EIATTR_PAD",
    0x02: "EIATTR_IMAGE_SLOT",
    0x03: "EIATTR_JUMPTABLE_RELOCS",
    0x04: "EIATTR_CTAIDZ_USED",
    0x05: "EIATTR_MAX_THREADS",
    0x06: "EIATTR_IMAGE_OFFSET",
    0x07: "EIATTR_IMAGE_SIZE",
    0x08: "EIATTR_TEXTURE_NORMALIZED",
    0x09: "EIATTR_SAMPLER_INIT",
    0x0A: "EIATTR_PARAM_CBANK",
    0x0B: "EIATTR_SMEM_PARAM_OFFSETS",
    0x0C: "EIATTR_CBANK_PARAM_OFFSETS",
    0x0D: "EIATTR_SYNC_STACK",
    0x0E: "EIATTR_TEXID_SAMPID_MAP",
    0x0F: "EIATTR_EXTERNS",
    0x10: "EIATTR_REQNTID",
    0x11: "EIATTR_FRAME_SIZE",
    0x12: "EIATTR_MIN_STACK_SIZE",
    0x13: "EIATTR_SAMPLER_FORCE_UNNORMALIZED",
    0x14: "EIATTR_BINDLESS_IMAGE_OFFSETS",
    0x15: "EIATTR_BINDLESS_TEXTURE_BANK",
    0x16: "EIATTR_BINDLESS_SURFACE_BANK",
    0x17: "EIATTR_KPARAM_INFO",
    0x18: "EIATTR_SMEM_PARAM_SIZE",
    0x19: "EIATTR_CBANK_PARAM_SIZE",
    0x1A: "EIATTR_QUERY_NUMATTRIB",
    0x1B: "EIATTR_MAXREG_COUNT",
    0x1C: "EIATTR_EXIT_INSTR_OFFSETS",
    0x1D: "EIATTR_S2RCTAID_INSTR_OFFSETS",
    0x1E: "EIATTR_CRS_STACK_SIZE",
    0x1F: "EIATTR_NEED_CNP_WRAPPER",
    0x20: "EIATTR_NEED_CNP_PATCH",
    0x21: "EIATTR_EXPLICIT_CACHING",
    0x22: "EIATTR_ISTYPEP_USED",
    0x23: "EIATTR_MAX_STACK_SIZE",
    0x24: "EIATTR_SUQ_USED",
    0x25: "EIATTR_LD_CACHEMOD_INSTR_OFFSETS",
    0x26: "EIATTR_LOAD_CACHE_REQUEST",
    0x27: "EIATTR_ATOM_SYS_INSTR_OFFSETS",
    0x28: "EIATTR_COOP_GROUP_INSTR_OFFSETS",
    0x29: "EIATTR_COOP_GROUP_MASK_REGIDS",
    0x2A: "EIATTR_SW1850030_WAR",
    0x2B: "EIATTR_WMMA_USED",
    0x2C: "EIATTR_HAS_PRE_V10_OBJECT",
    0x2D: "EIATTR_ATOMF16_EMUL_INSTR_OFFSETS",
    0x2E: "EIATTR_ATOM16_EMUL_INSTR_REG_MAP",
    0x2F: "EIATTR_REGCOUNT",
    0x30: "EIATTR_SW2393858_WAR",
    0x31: "EIATTR_INT_WARP_WIDE_INSTR_OFFSETS",
    0x32: "EIATTR_SHARED_SCRATCH",
    0x33: "EIATTR_STATISTICS",
    0x34: "EIATTR_INDIRECT_BRANCH_TARGETS",
    0x35: "EIATTR_SW2861232_WAR",
    0x36: "EIATTR_SW_WAR",
    0x37: "EIATTR_CUDA_API_VERSION",
    0x38: "EIATTR_NUM_MBARRIERS",
    0x39: "EIATTR_MBARRIER_INSTR_OFFSETS",
    0x3A: "EIATTR_COROUTINE_RESUME_OFFSETS",
    0x3B: "EIATTR_SAM_REGION_STACK_SIZE",
    0x3C: "EIATTR_PER_REG_TARGET_PERF_STATS",
    0x3D: "EIATTR_CTA_PER_CLUSTER",
    0x3E: "EIATTR_EXPLICIT_CLUSTER",
    0x3F: "EIATTR_MAX_CLUSTER_RANK",
    0x40: "EIATTR_INSTR_REG_MAP",
    0x41: "EIATTR_RESERVED_SMEM_USED",
    0x42: "EIATTR_RESERVED_SMEM_0_SIZE",
    0x43: "EIATTR_UCODE_SECTION_DATA",
    0x44: "EIATTR_UNUSED_LOAD_BYTE_OFFSET",
    0x45: "EIATTR_KPARAM_INFO_V2",
    0x46: "EIATTR_SYSCALL_OFFSETS",
    0x47: "EIATTR_SW_WAR_MEMBAR_SYS_INSTR_OFFSETS",
    0x48: "EIATTR_GRAPHICS_GLOBAL_CBANK",
    0x49: "EIATTR_SHADER_TYPE",
    0x4A: "EIATTR_VRC_CTA_INIT_COUNT",
    0x4B: "EIATTR_TOOLS_PATCH_FUNC",
    0x4C: "EIATTR_NUM_BARRIERS",
    0x4D: "EIATTR_TEXMODE_INDEPENDENT",
    0x4E: "EIATTR_PERF_STATISTICS",
    0x4F: "EIATTR_AT_ENTRY_FRAGMENTS",
    0x50: "EIATTR_SPARSE_MMA_MASK",
    0x51: "EIATTR_TCGEN05_1CTA_USED",
    0x52: "EIATTR_TCGEN05_2CTA_USED",
    0x53: "EIATTR_GEN_ERRBAR_AT_EXIT",
    0x54: "EIATTR_REG_RECONFIG",
    0x55: "EIATTR_ANNOTATIONS",
}
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
INSTRUCTION_BYTES = 16  # Volta and later: one 128-bit word per instruction


@dataclass(frozen=True)
class EiAttr:
    code: int
    name: str
    fmt: int
    value: int | None  # HVAL/BVAL inline value, or the first u32 of SVAL data (e.g. REGCOUNT's)
    data: bytes = b""

    @property
    def words(self) -> tuple[int, ...]:
        n = len(self.data) // 4
        return struct.unpack(f"<{n}I", self.data[: n * 4])


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

    def attr(self, name: str) -> EiAttr | None:
        return next((a for a in self.attrs if a.name == name), None)

    @property
    def regcount(self) -> int | None:
        return self.function_attrs.get("EIATTR_REGCOUNT")

    @property
    def frame_size(self) -> int | None:
        return self.function_attrs.get("EIATTR_FRAME_SIZE")

    @property
    def machine_code_sha256(self) -> str:
        """ptxprobe's one definition of "the same machine code": what the GPU runs under this name, the name left
        out. The instructions (``.text`` and ``.nv.capmerc.text``), the kernel's records in the global ``.nv.info``
        (registers, frame, stack) and in its own ``.nv.info.<kernel>`` (launch bounds, register cap, parameter
        bank, exit offsets...), its shared-memory and constant-bank sizes. The static verdict, the GPU runs' skip
        of identical code, ``diff`` and ``repro`` all decide with it."""
        own = [(a.name, a.fmt, *_name_free(a)) for a in self.attrs]
        glob = sorted((str(n), repr(v)) for n, v in self.function_attrs.items())
        facts = json.dumps([self.code_sha256, self.shared_bytes, self.constant0_bytes, glob, own])
        return sha256_bytes(facts.encode())


_SYMBOL_INDEX_ATTRS = frozenset({"EIATTR_PARAM_CBANK"})  # first word: a symbol's index, the symbol table's order


def _name_free(a: EiAttr) -> tuple:
    """An EIATTR record's value and data without what only says where a symbol sits in the symbol table."""
    if a.name in _SYMBOL_INDEX_ATTRS:
        return (None, a.data[4:].hex())
    return (a.value, a.data.hex())


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


def parse_eiattrs(data: bytes) -> tuple[EiAttr, ...]:
    """Decode a .nv.info section: u8 format, u8 attribute, u16 size-or-value, [data]."""
    out = []
    i = 0
    while i + 4 <= len(data):
        fmt, code, word = struct.unpack_from("<BBH", data, i)
        i += 4
        name = EIATTR_NAMES.get(code, f"EIATTR_0x{code:02x}")
        if fmt == EIFMT_SVAL:
            if i + word > len(data):
                raise CubinError(f"truncated {name} record in .nv.info")
            payload = bytes(data[i : i + word])
            i += word
            value = struct.unpack_from("<I", payload)[0] if len(payload) >= 4 else None
            out.append(EiAttr(code, name, fmt, value, payload))
        elif fmt in (EIFMT_HVAL, EIFMT_BVAL):
            out.append(EiAttr(code, name, fmt, word))
        elif fmt == EIFMT_NVAL:
            out.append(EiAttr(code, name, fmt, None))
        else:
            raise CubinError(f"unknown EIATTR format {fmt:#x} at offset {i - 4} in .nv.info")
    return tuple(out)


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


def _per_symbol(glob: tuple[EiAttr, ...]) -> dict[int, dict]:
    """Global .nv.info records are (symbol index, value) pairs: group them by symbol."""
    out: dict[int, dict] = {}
    for a in glob:
        if len(a.words) >= 2:
            out.setdefault(a.words[0], {})[a.name] = a.words[1]
    return out


def read_cubin(data: bytes) -> CubinFacts:
    """Per-kernel facts of a cubin given as bytes."""
    if data[:4] != b"\x7fELF":
        raise CubinError("not an ELF file (a cubin starts with \\x7fELF)")
    try:
        elf = ELFFile(io.BytesIO(data))
        sections = {s.name: s for s in elf.iter_sections()}
        sizes = {name: s["sh_size"] for name, s in sections.items() if name}
        kernels = {}
        merc = sum(sz for n, sz in sizes.items() if n.startswith(".nv.merc."))
        glob = sections.get(".nv.info")
        glob_attrs = parse_eiattrs(glob.data()) if glob is not None else ()
        per_symbol = _per_symbol(glob_attrs)
        symtab = sections.get(".symtab")
        sym_index = {sym.name: i for i, sym in enumerate(symtab.iter_symbols())} if symtab is not None else {}
        for name, sec in sections.items():
            if not name.startswith(".text."):
                continue
            k = name[len(".text.") :]
            text = sec.data()
            info = sections.get(f".nv.info.{k}")
            attrs = parse_eiattrs(info.data()) if info is not None else ()
            cap = sections.get(f".nv.capmerc.text.{k}")
            code = sha256_bytes(text + (cap.data() if cap is not None else b""))
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
                code_sha256=code,
                function_attrs=per_symbol.get(sym_index.get(k, -1), {}),
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
    k = read_cubin(data).kernel(name)
    return {
        "text_sha256": k.text_sha256,
        "code_sha256": k.code_sha256,
        "machine_code_sha256": k.machine_code_sha256,
        "text_bytes": k.text_bytes,
        "capmerc_bytes": k.capmerc_bytes,
        "merc_bytes": k.merc_bytes,
        "n_instructions": k.n_instructions,
        "shared_bytes": k.shared_bytes,
        "eiattr_registers": k.regcount,
    }
