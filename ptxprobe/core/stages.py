"""The ordered stage table: what each stage reads, and the content key its output is stored under.

emit -> rename -> rename-check -> assemble -> cubin-facts -> sass -> diff. Every cached
output is stored under ``stage_key(stage, **inputs)``, and ``stage_key`` refuses a call
whose inputs are not exactly the ones the table declares, so no stage can forget an input
(a tool hash, a flag) in its key. The assembly key is also the variant's identity in the
resumable log and the result rows.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ptxprobe.core.cache import cache_key


@dataclass(frozen=True)
class Stage:
    name: str
    inputs: tuple[str, ...]
    output: str
    cached: bool = True


STAGES: OrderedDict[str, Stage] = OrderedDict(
    (s.name, s)
    for s in (
        Stage("emit-triton", ("fn", "specialization", "attrs", "options", "arch", "name", "compiler", "spec"),
              "PTX, metadata and the sha256 of every Triton stage (ttir, ttgir, llir, ptx)"),
        Stage("emit-cuda", ("src", "deps", "flags", "nvcc"), "PTX from nvcc -ptx"),
        Stage("rename", ("ptx", "old", "new"), "renamed PTX and its site count"),
        Stage("rename-check", ("base_ptx", "base_name", "ptx", "name"), "the independent rename check"),
        Stage("assemble", ("ptx", "arch", "flags", "ptxas", "repeat"), "cubin, ptxas -v report, status"),
        Stage("cubin-facts", ("cubin", "name"), "per-kernel facts: hashes, sizes, registers, EIATTRs"),
        Stage("sass", ("cubin", "disassembler"), "listing with decoded control words", cached=False),
        Stage("diff", ("listing_a", "listing_b"), "alignment, classes, loop deltas", cached=False),
    )
)


def stage_key(stage: str, **inputs) -> str:
    """The content key of one stage's output: a hash of exactly its declared inputs."""
    declared = STAGES[stage].inputs
    if set(inputs) != set(declared):
        missing, extra = sorted(set(declared) - set(inputs)), sorted(set(inputs) - set(declared))
        raise ValueError(f"stage {stage}: inputs {sorted(inputs)} are not its declared {list(declared)} "
                         f"(missing {missing}, not declared {extra})")
    return cache_key(stage=stage, **inputs)
