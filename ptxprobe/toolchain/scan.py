"""Find the name checks inside ptxas itself: calls of strstr/strcmp/strncmp/memcmp... whose
argument is a string literal from read-only data.

ptxas is a stripped x86-64 executable that imports libc's string functions through its PLT.
The scan (pyelftools for the ELF, capstone for x86-64, numpy for speed):

1. map each PLT stub to the libc function it jumps to (its ``jmp [rip+slot]`` and the
   JUMP_SLOT relocations);
2. find every ``call rel32`` / ``call [rip+slot]`` in ``.text`` that reaches one of them
   (a vectorised search over all byte offsets, then checked by decoding);
3. decode backwards from each call to the instructions that set the argument registers
   (``mov esi, imm32``, ``lea rsi, [rip+disp]``, ...) and read the literal they point at.
"""

from __future__ import annotations

import io
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ptxprobe.core.cache import sha256_bytes
from ptxprobe.core.errors import PtxprobeError
from ptxprobe.toolchain.tools import follow_wrapper

COMPARE_FUNCS = (
    "strstr",
    "strcasestr",
    "strcmp",
    "strncmp",
    "strcasecmp",
    "strncasecmp",
    "memcmp",
    "memmem",
    "bcmp",
    "strncasecmp_l",
)
ARG_REGS = {"rdi": 0, "edi": 0, "rsi": 1, "esi": 1, "rdx": 2, "edx": 2}


class ScanError(PtxprobeError):
    """The file cannot be scanned (not an ELF, truncated, not x86-64)."""


@dataclass(frozen=True)
class CallSite:
    literal: str
    literal_address: int
    argument: int  # 0 = first argument (rdi), 1 = second (rsi), ...
    reference_address: int  # the instruction that loads the literal's address
    call_address: int
    function: str  # the libc function called
    enclosing_function: int | None  # best effort: nearest preceding call target
    context: tuple[str, ...]  # disassembled instructions before and at the call

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("literal_address", "reference_address", "call_address", "enclosing_function"):
            d[k] = None if d[k] is None else hex(d[k])
        d["context"] = list(self.context)
        return d


@dataclass(frozen=True)
class ScanResult:
    path: str
    real_path: str
    sha256: str
    sites: tuple[CallSite, ...]
    imports: dict  # compare function -> PLT stub address
    seconds: float
    note: str = ""

    @property
    def literals(self) -> list[str]:
        return sorted({s.literal for s in self.sites})


def _load(path: Path):
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScanError(f"{path}: cannot read ({exc})") from exc
    if data[:4] != b"\x7fELF":
        kind = "a shell script" if data[:2] == b"#!" else "not an ELF file"
        raise ScanError(f"{path}: {kind}; give the real ptxas binary (wrappers are followed when they exec one)")
    try:
        elf = ELFFile(io.BytesIO(data))
        if elf.get_machine_arch() != "x64":
            raise ScanError(f"{path}: {elf.get_machine_arch()} binary; only x86-64 ptxas is supported")
        secs = {s.name: s for s in elf.iter_sections()}
        needed = [".text", ".plt"]
        for n in needed:
            if (
                n in secs
                and secs[n]["sh_offset"] + secs[n]["sh_size"] > len(data)
                and secs[n]["sh_type"] != "SHT_NOBITS"
            ):
                raise ScanError(f"{path}: truncated ({len(data)} bytes; section {n} ends past the end)")
        return data, elf, secs
    except ELFError as exc:
        raise ScanError(f"{path}: malformed or truncated ELF ({exc})") from exc


def _plt_imports(elf, secs, md) -> dict[int, str]:
    """PLT stub address -> imported function name."""
    slot_names: dict[int, str] = {}
    for rname in (".rela.plt", ".rela.dyn"):
        rel = secs.get(rname)
        if rel is None:
            continue
        symtab = elf.get_section(rel["sh_link"])
        for r in rel.iter_relocations():
            sym = symtab.get_symbol(r["r_info_sym"])
            if sym is not None and sym.name:
                slot_names[r["r_offset"]] = sym.name.split("@")[0]
    stubs: dict[int, str] = {}
    for pname in (".plt", ".plt.sec", ".plt.got"):
        plt = secs.get(pname)
        if plt is None:
            continue
        for ins in md.disasm(plt.data(), plt["sh_addr"]):
            if ins.mnemonic in ("jmp", "bnd jmp") and "rip +" in ins.op_str:
                m = re.search(r"\[rip \+ (0x[0-9a-f]+|\d+)\]", ins.op_str)
                if m:
                    slot = ins.address + ins.size + int(m.group(1), 0)
                    if slot in slot_names:
                        stub = ins.address - (ins.address - plt["sh_addr"]) % 16
                        stubs[stub] = slot_names[slot]
    return stubs


def _i32_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    b = [buf[pos + k].astype(np.int64) for k in range(4)]
    v = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def _call_sites(text: bytes, base: int, stubs: dict[int, str]) -> tuple[list[tuple[int, str]], np.ndarray]:
    """(address, callee) of direct calls into the given stubs; and all plausible function starts."""
    buf = np.frombuffer(text, dtype=np.uint8)
    pos = np.flatnonzero(buf[: len(buf) - 4] == 0xE8)
    targets = base + pos + 5 + _i32_at(buf, pos + 1)
    want = np.array(sorted(stubs), dtype=np.int64)
    hit = np.isin(targets, want)
    sites = [(int(base + p), stubs[int(t)]) for p, t in zip(pos[hit], targets[hit], strict=True)]
    inside = (targets >= base) & (targets < base + len(text)) & (targets % 16 == 0)
    starts = np.unique(targets[inside])
    return sites, starts


def _read_cstring(data: bytes, elf, address: int, limit: int = 256) -> str | None:
    for seg in elf.iter_segments():
        if seg["p_type"] != "PT_LOAD":
            continue
        lo, hi = seg["p_vaddr"], seg["p_vaddr"] + seg["p_filesz"]
        if lo <= address < hi:
            off = seg["p_offset"] + address - lo
            raw = data[off : off + limit]
            end = raw.find(b"\0")
            if end <= 0:
                return None
            s = raw[:end]
            if all(32 <= c < 127 for c in s):
                return s.decode()
            return None
    return None


def _decode_before(md, text: bytes, base: int, call_addr: int, window: int = 48):
    """Instructions ending exactly at the call, from the longest window that decodes cleanly."""
    off = call_addr - base
    for back in range(window, 0, -1):
        start = off - back
        if start < 0:
            continue
        ins = list(md.disasm(text[start : off + 5], base + start))
        if ins and ins[-1].address == call_addr and ins[-1].mnemonic == "call":
            # require a consistent chain: each instruction starts where the previous ended
            if all(a.address + a.size == b.address for a, b in zip(ins, ins[1:], strict=False)):
                return ins
    return []


def _rip_target(x) -> int | None:
    """The absolute address a ``[rip + d]`` operand names (rip is the next instruction's address)."""
    m = re.search(r"\[rip \+ (0x[0-9a-f]+|\d+)\]", x.op_str)
    return x.address + x.size + int(m.group(1), 0) if m else None


def _shown(x) -> str:
    """One context line: address, instruction, and where a rip-relative operand points (capstone prints only the
    displacement, ptxas 13.3 on loads its literals that way)."""
    text = f"{x.address:#x}: {x.mnemonic} {x.op_str}".rstrip()
    target = _rip_target(x)
    return text if target is None else f"{text}  ; {target:#x}"


def _argument_literals(ins, data: bytes, elf) -> list[tuple[int, int, int, str]]:
    """(argument index, instruction address, literal address, literal) set up before the call."""
    out = []
    seen: set[int] = set()
    for x in reversed(ins[:-1]):
        ops = x.op_str.split(", ")
        if not ops:
            continue
        reg = ops[0]
        if reg not in ARG_REGS or ARG_REGS[reg] in seen:
            continue
        if x.mnemonic in ("mov", "movabs") and len(ops) == 2 and re.fullmatch(r"0x[0-9a-f]+|\d+", ops[1]):
            addr = int(ops[1], 0)
        elif x.mnemonic == "lea" and len(ops) == 2 and "rip +" in ops[1]:
            addr = _rip_target(x)
        else:
            if x.mnemonic in ("mov", "lea", "xor", "pop", "movzx", "add", "sub"):
                seen.add(ARG_REGS[reg])  # overwritten by something else: no literal for this argument
            continue
        seen.add(ARG_REGS[reg])
        if addr is None:
            continue
        s = _read_cstring(data, elf, addr)
        if s is not None:
            out.append((ARG_REGS[reg], x.address, addr, s))
    return out


def scan(path: str | os.PathLike, functions: tuple[str, ...] = COMPARE_FUNCS, context: int = 6) -> ScanResult:
    """Every call of a string-compare function with a literal argument in one ptxas binary."""
    import capstone

    t0 = time.perf_counter()
    given = Path(path)
    if not given.exists():
        raise ScanError(f"{given}: no such file")
    real = follow_wrapper(given)
    data, elf, secs = _load(real)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    stubs = {a: n for a, n in _plt_imports(elf, secs, md).items() if n in functions}
    text_sec = secs.get(".text")
    if text_sec is None:
        raise ScanError(f"{real}: no .text section")
    if not stubs:
        return ScanResult(
            str(given),
            str(real),
            sha256_bytes(data),
            (),
            {},
            time.perf_counter() - t0,
            note="no PLT imports of string-compare functions (statically linked or unusual build)",
        )
    text, base = text_sec.data(), text_sec["sh_addr"]
    calls, starts = _call_sites(text, base, stubs)
    sites = []
    for addr, callee in calls:
        ins = _decode_before(md, text, base, addr)
        if not ins:
            continue
        k = int(np.searchsorted(starts, addr, side="right")) - 1
        enclosing = int(starts[k]) if k >= 0 else None
        ctx = tuple(_shown(x) for x in ins[-context:])
        for arg, ref, laddr, lit in _argument_literals(ins, data, elf):
            sites.append(CallSite(lit, laddr, arg, ref, addr, callee, enclosing, ctx))
    sites.sort(key=lambda s: (s.literal, s.call_address))
    return ScanResult(
        str(given),
        str(real),
        sha256_bytes(data),
        tuple(sites),
        {n: hex(a) for a, n in sorted(stubs.items())},
        time.perf_counter() - t0,
    )


IDENT_FRAGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,63}")


def name_templates(literals: list[str]) -> list[str]:
    """Name templates that put each identifier-like literal in front of the kernel's name."""
    out = []
    for lit in literals:
        if IDENT_FRAGMENT.fullmatch(lit):
            out.append(f"{lit}_{{base}}")
    return sorted(set(out))


def across_versions(results: list[tuple[str, ScanResult]]) -> list[dict]:
    """literal -> which ptxas versions contain a compare against it (for 'when did it appear')."""
    versions = [v for v, _ in results]
    lits = sorted({lit for _, r in results for lit in r.literals})
    return (
        [
            {
                "literal": lit,
                **{v: lit in r.literals for v, r in results},
                "first": next((v for v, r in results if lit in r.literals), None),
            }
            for lit in lits
        ]
        if versions
        else []
    )
