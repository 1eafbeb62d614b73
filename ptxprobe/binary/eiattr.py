"""EIATTR records: the ``.nv.info`` sections' attribute list (launch bounds, registers, parameter bank...), decoded.

The records' layout only; which of them count for "the same machine code" is ``binary.reach``'s and
``binary.cubin``'s business.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

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
    0x5f: "EIATTR_MERCURY_ISA_VERSION",  # as cuobjdump 13.1.80 names it (ptxas 13.4 writes it on sm_100a)
}
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4


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


def per_symbol(glob: tuple[EiAttr, ...]) -> dict[int, dict]:
    """Global .nv.info records are (symbol index, value) pairs: group them by symbol."""
    out: dict[int, dict] = {}
    for a in glob:
        if len(a.words) >= 2:
            out.setdefault(a.words[0], {})[a.name] = a.words[1]
    return out
