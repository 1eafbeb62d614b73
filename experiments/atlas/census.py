"""What a library ships, counted as the atlas counts kernels: per shared library the PTX modules, their entries,
the distinct kernels (an entry's body with its own name normalised away: two instantiations that compile to the same
PTX are one kernel), the source functions they come from, the PTX targets and the archs it also ships SASS for, and
how many entries already hold the trigger, in their own identifier or only in their template arguments (compiled
under the heuristic today without anyone having named them so)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ptxprobe.api import (
    STAGE,
    TRIGGER,
    Cache,
    brace_span,
    extract_library,
    jit_reaches,
    own_identifier,
    trigger_origin,
)

PLACEHOLDER = "ptxprobe_atlas_kernel"
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(")


@dataclass(frozen=True)
class LibraryCensus:
    member: str  # the shared library inside the wheel
    modules: int
    entries: int
    kernels: int  # distinct bodies, the name normalised
    source_functions: int  # distinct own identifiers (a template's instantiations are one function)
    targets: tuple[str, ...]  # the PTX targets
    sass_archs: tuple[str, ...]  # the archs it ships machine code for (that code runs where it exists)
    trigger_in_identifier: int  # entries whose own identifier holds the trigger
    trigger_elsewhere: int  # entries whose name holds it only outside the identifier (template arguments, scope)
    stubs: int  # entries with an empty body on their target, left out as the sweep leaves them


def entry_lines(ptx_lines: list[str]) -> dict[str, int]:
    """Where each ``.entry`` of a module starts, in one pass (an FA2 module holds 100k lines and dozens of entries)."""
    out = {}
    for i, line in enumerate(ptx_lines):
        m = _ENTRY.search(line) if ".entry" in line else None
        if m:
            out[m.group(1)] = i
    return out


def body_key(ptx_lines: list[str], entry: str, start: int) -> str:
    """The sha256 of ``entry``'s text, from its ``.entry`` line (``start``) to its closing brace, with its own name
    (and the mangled locals that spell it, ``_ZZ<len><name>E``) replaced by one placeholder."""
    _, end = brace_span(ptx_lines, start)
    text = "".join(ptx_lines[start:end + 1])
    text = text.replace(f"_ZZ{len(entry)}{entry}", f"_ZZ{len(PLACEHOLDER)}{PLACEHOLDER}").replace(entry, PLACEHOLDER)
    return hashlib.sha256(text.encode()).hexdigest()


def census(wheel: Path, cache: Cache) -> list[LibraryCensus]:
    """Every shared library of ``wheel`` that embeds PTX, counted (``ptxprobe.api.extract_library``: cached)."""
    out = []
    extraction = extract_library(wheel, cache)
    for lib in extraction.libraries:
        if not lib.modules:
            continue
        bodies, functions, entries = set(), set(), 0
        in_id = elsewhere = stubs = 0
        for m in lib.modules:
            stubs += len(m.stubs)
            for e, body in module_bodies(extraction, m, cache).items():
                entries += 1
                bodies.add(body)
                functions.add(own_identifier(e))
                origin = trigger_origin(e, TRIGGER)
                in_id += origin.in_identifier
                elsewhere += origin.elsewhere and not origin.in_identifier
        out.append(LibraryCensus(lib.member or wheel.name, len(lib.modules), entries, len(bodies), len(functions),
                                 tuple(sorted({m.target for m in lib.modules})), tuple(lib.sass_archs), in_id,
                                 elsewhere, stubs))
    return out


def module_bodies(extraction, module, cache: Cache) -> dict[str, str]:
    """Each entry of one extracted PTX module (its text read from ``cache``) to its body key (``body_key``)."""
    lines = cache.get(STAGE, extraction.key, module.file).decode(errors="replace").splitlines(keepends=True)
    starts = entry_lines(lines)
    return {e: body_key(lines, e, starts[e]) for e in module.entries}


def entry_bodies(wheel: Path, cache: Cache) -> dict[str, str]:
    """Every entry of ``wheel``'s PTX, as a sweep of it names its kernels (``member:module:entry``), to its body key
    (``body_key``): entries with one key are one kernel."""
    extraction = extract_library(wheel, cache)
    return {f"{lib.member or wheel.name}:{m.name}:{e}": body for lib in extraction.libraries for m in lib.modules
            for e, body in module_bodies(extraction, m, cache).items()}


def reaching(wheel: Path, arch: str, cache: Cache) -> frozenset[str]:
    """The modules of ``wheel`` (``member:module``, as ``entry_bodies`` names their kernels) whose PTX the driver
    would JIT-compile for ``arch`` (``ptxprobe.api.jit_reaches``): a cell at that arch samples its kernels from them."""
    extraction = extract_library(wheel, cache)
    return frozenset(f"{lib.member or wheel.name}:{m.name}" for lib in extraction.libraries for m in lib.modules
                     if jit_reaches(m.target, arch))


def as_json(rows: list[LibraryCensus]) -> list[dict]:
    return [asdict(r) for r in rows]
