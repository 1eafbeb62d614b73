"""The ordered stage table: what each stage reads, which ptxprobe code computes it, and its content key.

emit -> rename -> rename-check -> assemble -> cubin-facts -> sass -> diff, plus the facts ptxprobe reads off a
tool (its identity, capabilities, options). Every cached output is stored under ``stage_key(stage, **inputs)``,
which refuses a call whose inputs are not exactly the ones the table declares (no stage can forget a tool hash
or a flag), and which adds the fingerprint of the ptxprobe modules that compute the stage: a fix to the renamer,
the checker or the cubin reader is never masked by a value an older ptxprobe cached (Triton keys its cache on
``triton_key()`` for the same reason). Only ``assemble`` has no code in its key: its value is what ptxas wrote
(the cubin, its words, how it ended), and what ptxprobe reads from them is derived again on every read.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import cache_key

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Stage:
    name: str
    inputs: tuple[str, ...]
    output: str
    code: str | None  # the module that computes the output; None: ptxprobe's code does not shape it
    cached: bool = True


STAGES: OrderedDict[str, Stage] = OrderedDict(
    (s.name, s)
    for s in (
        Stage("emit-triton", ("fn", "specialization", "attrs", "options", "arch", "name", "compiler", "spec"),
              "PTX, metadata and the sha256 of every Triton stage (ttir, ttgir, llir, ptx)", "ptxprobe.sources.triton"),
        Stage("triton-specialization", ("fn", "args", "compiler"), "how Triton specialises a launch's arguments",
              "ptxprobe.sources.triton"),
        Stage("triton-key", ("stamp", "version", "root"), "Triton's own compiler key", "ptxprobe.sources.triton"),
        Stage("registry-index", ("kernels", "triton", "env"), "what each registered family supports",
              "ptxprobe.sources.catalog"),
        Stage("registered-emit", ("index", "spec", "seq_len", "arch", "name"),
              "the emit-triton key of a registered spec's PTX", "ptxprobe.sources.kinds"),
        Stage("cuda-deps", ("src", "flags", "nvcc"), "the headers a .cu file includes (nvcc -M)",
              "ptxprobe.sources.cuda"),
        Stage("emit-cuda", ("src", "deps", "flags", "nvcc"), "PTX from nvcc -ptx", "ptxprobe.sources.cuda"),
        Stage("lib-extract", ("library", "cuobjdump"), "a library's PTX modules (cuobjdump -xptx), SASS archs and "
              "stub entries", "ptxprobe.sources.library"),
        Stage("lib-cut", ("module", "keep"), "a library module cut to the kernels chosen from it", "ptxprobe.ptx.text"),
        Stage("rename", ("ptx", "old", "new"), "renamed PTX and its site count", "ptxprobe.ptx.rename"),
        Stage("rename-check", ("base_ptx", "base_name", "ptx", "name"), "the independent rename check",
              "ptxprobe.ptx.check"),
        Stage("tool-identity", ("path", "mtime_ns", "size", "kind"), "a tool's version and sha256",
              "ptxprobe.toolchain.tools"),
        Stage("ptxas-capabilities", ("ptxas",), "the newest PTX ISA and the archs a ptxas accepts",
              "ptxprobe.toolchain.tools"),
        Stage("ptxas-options", ("ptxas",), "the options a ptxas's --help lists", "ptxprobe.toolchain.tools"),
        Stage("assemble", ("ptx", "arch", "flags", "ptxas", "repeat"), "cubin, ptxas's words, how it ended", None),
        Stage("cubin-facts", ("cubin", "name"), "per-kernel facts: hashes, sizes, registers, EIATTRs",
              "ptxprobe.binary.cubin"),
        Stage("sass", ("cubin", "disassembler"), "listing with decoded control words", "ptxprobe.binary.sass",
              cached=False),
        Stage("diff", ("listing_a", "listing_b"), "alignment, classes, loop deltas", "ptxprobe.binary.diff",
              cached=False),
    )
)

_IMPORT_RE = re.compile(r"^[ \t]*(?:from[ \t]+(ptxprobe(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)"
                        r"|import[ \t]+(ptxprobe(?:\.\w+)*))", re.MULTILINE)


def _module_file(module: str, root: Path) -> Path | None:
    parts = module.split(".")[1:]
    for path in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if parts and path.is_file():
            return path
    return None


def _imported_modules(path: Path, root: Path) -> set[str]:
    """The ptxprobe modules one source file imports (at the top or inside a function)."""
    found: set[str] = set()
    for frm, names, plain in _IMPORT_RE.findall(path.read_text()):
        if plain:
            found.add(plain)
            continue
        found.add(frm)
        for name in re.split(r"[\s,()]+", names):
            if name and _module_file(f"{frm}.{name}", root):  # ``from ptxprobe.x import module``
                found.add(f"{frm}.{name}")
    return {m for m in found if _module_file(m, root)}


def code_closure(module: str, root: Path = PACKAGE_ROOT) -> list[Path]:
    """Every ptxprobe source file ``module`` depends on through its imports, itself included."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        mod = todo.pop()
        path = _module_file(mod, root)
        if mod in seen or path is None:
            continue
        seen[mod] = path
        todo.extend(_imported_modules(path, root))
    return sorted(seen.values())


@functools.cache
def code_fingerprint(module: str, root: Path = PACKAGE_ROOT) -> str:
    """sha256 over the sources of ``module`` and every ptxprobe module it imports, transitively."""
    h = hashlib.sha256()
    for path in code_closure(module, root):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def stage_key(stage: str, **inputs) -> str:
    """The content key of one stage's output: its declared inputs and the code that computes it."""
    declared = STAGES[stage].inputs
    if set(inputs) != set(declared):
        missing, extra = sorted(set(declared) - set(inputs)), sorted(set(inputs) - set(declared))
        raise ValueError(f"stage {stage}: inputs {sorted(inputs)} are not its declared {list(declared)} "
                         f"(missing {missing}, not declared {extra})")
    code = STAGES[stage].code
    return cache_key(stage=stage, **inputs, **({"code": code_fingerprint(code)} if code else {}))
