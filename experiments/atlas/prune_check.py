"""Does a kernel cut from its module (``ptxprobe.api.pruned_to``: what ``--lib LIB:ENTRY`` assembles) get the code
the whole module gives it? Each sampled entry assembled both ways by one ptxas, compared byte for byte, then with
the module-level addresses masked: the constant-bank-4 offsets (``c[0x4][...]``: where the module's globals and
kernel addresses live) and the 32-bit immediates that ``MOV`` loads (relocated addresses), which move when the
other kernels' globals go. Registers and instruction counts are compared as they are."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

from ptxprobe.api import (
    STAGE,
    Cache,
    assemble,
    disassemble,
    extract_library,
    pruned_to,
    read_cubin,
    triton_ptxas,
)

_BANK4_RE = re.compile(r"c\[0x4\]\[0x[0-9a-f]+\]")
_IMMEDIATE_RE = re.compile(r"^0x[0-9a-f]+$")
_LABEL_REF_RE = re.compile(r"`\((\.L_\w+)\)")


def masked_sass(cubin_path: str, entry: str) -> list[tuple]:
    """The entry's instructions (``ptxprobe.api.disassemble``), encodings and control words dropped, a branch
    target read as its offset in the kernel (nvdisasm numbers its labels across the module), and the module-level
    addresses masked: constant bank 4 offsets anywhere, and the immediate a ``MOV`` loads."""
    listing = disassemble(cubin_path)[entry]

    def operand(op: str) -> str:
        op = _LABEL_REF_RE.sub(lambda m: f"`(+{listing.labels.get(m.group(1), m.group(1))})", op)
        return _BANK4_RE.sub("c[0x4][<offset>]", op)

    out = []
    for ins in listing.instructions:
        ops = tuple(operand(op) for op in ins.operands)
        if ins.opcode == "MOV" and ops and _IMMEDIATE_RE.match(ops[-1]):
            ops = (*ops[:-1], "<address>")
        out.append((ins.predicate, ins.opcode, ops))
    return out


def check_library(wheel: Path, name: str, per_module: int, max_bytes: int, seed: int, cache: Cache) -> list[dict]:
    """``per_module`` entries of each module of ``wheel`` (at most ``max_bytes`` of PTX, an sm_80 or sm_90 target)."""
    ext, rng, rows = extract_library(wheel, cache), random.Random(seed), []
    off = Cache(enabled=False)  # both assemblies run: nothing read from a cache
    for lib in ext.libraries:
        for mod in lib.modules:
            text = cache.get(STAGE, ext.key, mod.file).decode(errors="replace")
            if not mod.entries or len(text) > max_bytes or not mod.target.startswith(("sm_80", "sm_90")):
                continue
            tool = triton_ptxas(mod.target)
            for entry in rng.sample(list(mod.entries), min(per_module, len(mod.entries))):
                cut = pruned_to(text, frozenset([entry]))
                t0 = time.perf_counter()
                whole = assemble(text, mod.target, tool, cache=off, timeout=900)
                t1 = time.perf_counter()
                alone = assemble(cut.ptx, mod.target, tool, cache=off, timeout=900)
                t2 = time.perf_counter()
                row = {"library": name, "member": lib.member, "module": mod.name, "target": mod.target,
                       "ptxas": tool.version, "entry": entry, "module_entries": len(mod.entries) + len(mod.stubs),
                       "entries_left_out": len(cut.entries_left_out),
                       "functions_left_out": len(cut.functions_left_out), "whole_s": round(t1 - t0, 2),
                       "alone_s": round(t2 - t1, 2), "status": f"{whole.status}/{alone.status}"}
                if whole.ok and alone.ok:
                    a, b = read_cubin(whole.cubin()).kernel(entry), read_cubin(alone.cubin()).kernel(entry)
                    row.update(same_bytes=a.machine_code_sha256 == b.machine_code_sha256,
                               same_registers=a.regcount == b.regcount,
                               same_instructions=a.n_instructions == b.n_instructions,
                               same_masked=a.machine_code_sha256 == b.machine_code_sha256
                               or masked_sass(whole.cubin_path, entry) == masked_sass(alone.cubin_path, entry))
                rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    done = [r for r in rows if "same_bytes" in r]
    return {"entries": len(rows), "assembled_both_ways": len(done),
            **{k: sum(r[k] for r in done) for k in ("same_bytes", "same_masked", "same_registers",
                                                    "same_instructions")},
            "whole_s": round(sum(r["whole_s"] for r in rows), 1), "alone_s": round(sum(r["alone_s"] for r in rows), 1)}
