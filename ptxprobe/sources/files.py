"""PTX given as a file, or carried inside a cubin (``.nv_debug_ptx_txt``, kept by -lineinfo or -G)."""

from __future__ import annotations

import io
from fnmatch import fnmatchcase
from pathlib import Path

from ptxprobe.core.errors import CubinError, MalformedPtx
from ptxprobe.core.text import split_last_group
from ptxprobe.ptx.mangling import display_names, own_identifier, readable
from ptxprobe.ptx.text import entries_of, has_version, read_text_file, target_of
from ptxprobe.sources.base import Emitted


def entry_matches(names: list[str], selector: str, shown: dict[str, str] | None = None) -> list[str]:
    """The entries ``selector`` names: a symbol, a demangled name (``ns::kernel<float, 4>(float*)``, with or without
    its return type, namespaces and parameters), the function's own name, or a glob over any of these
    (``'kernel<*'``)."""
    if selector in names:
        return [selector]
    if selector.startswith("_Z") and not any(c in selector for c in "*?["):
        return []  # a mangled symbol names itself alone (no readable spelling starts with the reserved _Z)
    shown = shown or display_names(names)

    def spellings(n: str) -> list[str]:
        text = readable(n)
        out = [n, text, shown[n], own_identifier(n)]
        bare = text.split(" ", 1)[1] if " " in text.split("<", 1)[0].split("(", 1)[0] else text  # no return type
        head = bare.split("<", 1)[0].split("(", 1)[0]
        qualified = [bare, *(bare[k + 2 :] for k in range(len(head)) if head.startswith("::", k))]  # namespaces off
        return out + qualified + [split[0] for q in qualified if (split := split_last_group(q, "(", ")"))]

    exact = [n for n in names if selector in spellings(n)]
    if exact or not any(c in selector for c in "*?["):
        return exact
    return [n for n in names if any(fnmatchcase(s, selector) for s in spellings(n))]


def choose_entries(names: list[str], entry: str | None, where: str, what: str = "entry") -> tuple[str, ...]:
    """``entry`` among the PTX's entries: None or ``all`` is every entry; a glob may pick several; a name that fits
    several instantiations is refused with the list, never resolved to the first; an unknown one is an error."""
    if not names:
        raise MalformedPtx(f"{where}: no .entry in PTX")
    if entry is None or entry == "all":
        return tuple(names)
    shown = display_names(names)
    chosen = entry_matches(names, entry, shown)
    if not chosen:
        have = ", ".join(shown[n] for n in names[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
        raise MalformedPtx(f"{where}: no {what} {entry!r} (have: {have})")
    if len(chosen) > 1 and not any(c in entry for c in "*?["):
        listed = "; ".join(f"{shown[n]} = {n}" for n in chosen[:10]) + (" …" if len(chosen) > 10 else "")
        raise MalformedPtx(f"{where}: {entry!r} names {len(chosen)} kernels ({listed}): give one symbol, a "
                           "demangled name with its template arguments, or a glob for all of them")
    return tuple(chosen)


def ptx_text(ptx: str, where: str, entry: str | None, label: str, frontend: str, metadata: dict) -> Emitted:
    if ptx.startswith("\ufeff"):
        raise MalformedPtx(f"{where}: starts with a UTF-8 byte order mark (BOM), which ptxas does not accept: "
                           "save the file without it")
    if not ptx.strip():
        raise MalformedPtx(f"{where}: the file is empty")
    if not has_version(ptx):
        raise MalformedPtx(f"{where}: no .version directive: not PTX?")
    try:
        arch = target_of(ptx)
    except MalformedPtx as exc:
        raise MalformedPtx(f"{where}: {exc}") from None
    chosen = choose_entries(entries_of(ptx), entry, where)
    return Emitted(label, arch, chosen[0], ptx, frontend, metadata, {}, chosen)


def load_ptx(path: str | Path, entry: str | None = None) -> Emitted:
    """A user's PTX file as an Emitted (its own .target is its arch); every entry unless ``entry`` names one."""
    p = Path(path)
    return ptx_text(read_text_file(p, "PTX"), str(p), entry, p.name, "ptx", {"source": str(p)})


def ptx_from_cubin(path: str | Path, entry: str | None = None) -> Emitted:
    """The PTX a cubin carries in ``.nv_debug_ptx_txt`` (cubins built with -lineinfo or -G keep it).

    ptxas stores it one NUL-terminated line per PTX line, without ``.loc`` lines and DWARF bodies;
    re-assembled, it gives the same ``.text`` (checked in the tests).
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    from ptxprobe.binary.cubin import read_cubin

    p = Path(path)
    if p.is_dir():
        raise CubinError(f"{p} is a directory, not a cubin")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CubinError(f"{p}: cannot read ({exc})") from exc
    facts = read_cubin(data)
    try:
        sec = ELFFile(io.BytesIO(data)).get_section_by_name(".nv_debug_ptx_txt")
    except ELFError as exc:
        raise CubinError(f"{p}: not a readable ELF file ({exc})") from exc
    if sec is None:
        raise CubinError(
            f"{p}: no embedded PTX (.nv_debug_ptx_txt); a cubin cannot be renamed without its PTX: "
            "pass the PTX or the source, or build with -lineinfo"
        )
    ptx = "\n".join(line.decode("utf-8", errors="replace") for line in sec.data().split(b"\0"))
    if not entries_of(ptx):
        raise CubinError(f"{p}: embedded PTX has no .entry")
    return ptx_text(ptx, str(p), entry, p.name, "ptx", {"source": str(p), "cubin_arch": facts.arch})
