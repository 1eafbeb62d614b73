"""PTX-aware renaming of an entry symbol (checked independently by ``ptxprobe.ptx.check``).

A kernel's name appears in more places than ``.entry``: its ``_param_N`` names,
Itanium-mangled function-local statics (``_ZZ9my_kernelE2As``: the length prefix changes
too), comments, and DWARF ``.debug_info`` strings written as ``.b8`` bytes, where the
unit length and DIE references after the string shift with the name's length. All are
rewritten so the result equals what the frontend would emit for the new name.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from ptxprobe.core.errors import InvalidName, MalformedPtx
from ptxprobe.core.text import TRIGGER
from ptxprobe.ptx.mangling import demangled, symbol_parts
from ptxprobe.ptx.rename_dwarf import rename_debug_info, rename_debug_str
from ptxprobe.ptx.text import entries_of, local_prefix, module_symbols

# PTX ISA: identifiers are [a-zA-Z][a-zA-Z0-9_$]* or [_$%][a-zA-Z0-9_$]+; '%' is for
# registers and special names, so an entry may not start with it.
_IDENT_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9_$]*|[_$][A-Za-z0-9_$]+)")
MAX_NAME = 65536  # a guard against garbage only: CUTLASS kernels' symbols run to thousands of characters
_REF_ATTRS = (
    "DW_AT_abstract_origin",
    "DW_AT_type",
    "DW_AT_sibling",
    "DW_AT_specification",
    "DW_AT_containing_type",
    "DW_AT_import",
    "DW_AT_call_origin",
)


@dataclass(frozen=True)
class Renamed:
    ptx: str
    old: str
    new: str
    sites: int  # how many places changed (tokens, mangled locals, DWARF strings)


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidName("empty entry name")
    if len(name) > MAX_NAME:
        raise InvalidName(f"entry name is {len(name)} characters; ptxprobe allows at most {MAX_NAME}")
    if not _IDENT_RE.fullmatch(name):
        bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "_$"))), None)
        why = f"character {bad!r} is not allowed" if bad else "must start with a letter, or _ or $ followed by more"
        raise InvalidName(
            f"{name!r} is not a valid PTX identifier: {why} (allowed: [a-zA-Z][a-zA-Z0-9_$]* or [_$][a-zA-Z0-9_$]+)"
        )
    return name


# for a kernel whose own name already holds the trigger: the name without it (baseline), as given, and a control
TRIGGER_FREE_NAMES = ("{base_untriggered}", "{base}", "{base_control}")
# for kernels of which only some hold the trigger (one PTX file with several entries): each gets the names it would
# get alone: x -> x, cutlass_x, xutlass_x; cutlass_y -> xutlass_y, cutlass_y (as given), zutlass_y
MIXED_TRIGGER_NAMES = ("{base_untriggered}", "{base_triggered}", "{base_triggered_control}")
# the entry as {base_untriggered}, and every other symbol of its module that holds the trigger (non-inlined .func
# callees, globals, the module's other entries) respelled the same way: ptxas reads their names too
MODULE_UNTRIGGERED = "{module_untriggered}"


def module_wide(template: str) -> bool:
    """Does the template respell the trigger out of the whole module, not only out of the entry?"""
    return MODULE_UNTRIGGERED in template


def module_respellings(ptx: str, renamed: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """``{symbol: the symbol without the trigger}`` for every symbol of the module holding it that is not one of
    ``renamed`` (the entries a template names itself)."""
    symbols = [s for s in (*entries_of(ptx), *module_symbols(ptx)) if s not in renamed and TRIGGER in s]
    return {s: untriggered(s) for s in dict.fromkeys(symbols)}


def untriggered(ident: str, replacement: str = "xutlass") -> str:
    """The text with every occurrence of the trigger replaced by a same-length spelling ptxas ignores (the same
    length keeps an Itanium length prefix true)."""
    return ident.replace(TRIGGER, replacement)


def _respelling(fields: set[str], holds: bool) -> str | None:
    """The spelling a template gives the trigger in the rest of the symbol (ptxas reads all of it)."""
    if "base_untriggered" in fields or "module_untriggered" in fields:
        return "xutlass"
    if "base_control" in fields or ("base_triggered_control" in fields and holds):
        return "zutlass"
    return None


def apply_template(template: str, entry: str) -> str:
    """Expand a name template (``cutlass_{base}``) for an entry symbol; keeps C++ mangling valid.

    ``{base}`` is the function's own identifier (``Marlin`` of ``_ZN6marlin6MarlinI…``): ``cutlass_{base}`` puts the
    trigger there and rewrites its length prefix. ``{base_untriggered}`` spells every ``cutlass`` of the *whole
    symbol* ``xutlass`` (template arguments and namespaces too: ptxas's strstr reads all of it), ``{base_control}``
    ``zutlass``. ``{base_triggered}`` is the symbol as given when it holds the trigger anywhere, else ``cutlass_``
    before its identifier, and ``{base_triggered_control}`` that name with the trigger spelled ``zutlass``
    (``xutlass_`` before the identifier of a symbol without it, whose baseline is itself): ``MIXED_TRIGGER_NAMES``.
    A renamed mangled symbol must still demangle.
    """
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise InvalidName(f"bad name template {template!r}: {exc}") from exc
    holds = TRIGGER in entry
    parts = symbol_parts(entry)
    respell = _respelling(fields, holds)
    if parts is None:  # a mangling ptxprobe cannot read: only respellings of the whole symbol keep it valid
        if template in ("{base}",) or (template in ("{base_triggered}",) and holds):
            return entry
        if template in (*TRIGGER_FREE_NAMES, MODULE_UNTRIGGERED) or (template == "{base_triggered_control}" and holds):
            return validate_name(untriggered(entry, respell or "xutlass"))
        raise InvalidName(f"cannot put a name into {entry}: its mangling is not one ptxprobe can read, so only "
                          "{base_untriggered} and {base_control} (the trigger respelled in place) apply")
    base = parts.identifier
    triggered = base if holds else f"{TRIGGER}_{base}"
    try:
        new_ident = template.format(base=base, base_untriggered=untriggered(base), module_untriggered=untriggered(base),
                                    base_control=untriggered(base, "zutlass"), base_triggered=triggered,
                                    base_triggered_control=untriggered(triggered, "zutlass" if holds else "xutlass"))
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidName(f"bad name template {template!r}: only {{base}}, {{base_untriggered}}, {{base_control}}, "
                          f"{{base_triggered}}, {{base_triggered_control}} and {{module_untriggered}} may be used "
                          f"({exc})") from exc
    if not parts.mangled:
        return validate_name(new_ident)
    head, tail = entry[: parts.start - len(str(len(base)))], entry[parts.end :]
    if respell:
        head, tail = untriggered(head, respell), untriggered(tail, respell)
    new = validate_name(f"{head}{len(new_ident)}{new_ident}{tail}")
    if new != entry and demangled(entry) is not None and demangled(new) is None:
        raise InvalidName(f"{new} (from {template} of {entry}) is not a valid mangled name")
    return new


def _alternatives(words) -> str:
    """A regex alternation of ``words``, the longest first (so no word stops at a shorter one it starts with)."""
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def _token_re(*names: str) -> re.Pattern:
    """Any of ``names`` as a whole token (group ``name``), or its ``_param_N`` (group ``param``): not part of a
    longer identifier, a path ("kernels/attention.py") or a dotted name."""
    return re.compile(r"(?<![\w$%/.])(?P<name>" + _alternatives(names) + r")(?P<param>_param_\d+)?(?![\w$.])")


def _rename_text(text: str, names: dict[str, str]) -> tuple[str, int]:
    """Every name's tokens, parameters and mangled locals rewritten in one pass each."""
    text, n1 = _token_re(*names).subn(lambda m: names[m.group("name")] + (m.group("param") or ""), text)
    prefixes = {local_prefix(o): local_prefix(n) for o, n in names.items()}
    text, n2 = re.subn(_alternatives(prefixes), lambda m: prefixes[m.group(0)], text)
    return text, n1 + n2


# --- DWARF sections written as .b8/.b32/.b64 directives -----------------------------------

_SECTION_RE = re.compile(r"^\s*\.section\s+(\.debug_\w+)\s*(?:\{\s*\})?\s*$")
_DIRECTIVE_RE = re.compile(r"^(\s*)\.b(8|16|32|64)\s+([^\s/]+)(\s*//.*)?$")


def _split_sections(lines: list[str]) -> list[tuple[str | None, int, int]]:
    """(section name or None, start, end) spans of the body of each ``.section .debug_*  { ... }``."""
    spans = []
    i = 0
    while i < len(lines):
        m = _SECTION_RE.match(lines[i])
        if m and not lines[i].rstrip().endswith("}"):
            j = i + 1
            while j < len(lines) and lines[j].strip() != "{":
                j += 1
            k = j + 1
            while k < len(lines) and lines[k].strip() != "}":
                k += 1
            spans.append((m.group(1), j + 1, k))
            i = k
        i += 1
    return spans


def rename_entry(ptx: str, old: str, new: str) -> Renamed:
    """Rename entry ``old`` to ``new`` everywhere the name lives in the PTX."""
    validate_name(new)
    entries = entries_of(ptx)
    if not entries:
        raise MalformedPtx("no .entry found in PTX")
    if old not in entries and old not in module_symbols(ptx):
        raise MalformedPtx(f"no entry {old!r} in PTX (have: {', '.join(entries)})")
    if new == old:
        return Renamed(ptx, old, new, 0)
    if _token_re(new).search(ptx):
        raise InvalidName(f"{new!r} already names something in this PTX; renaming would merge two symbols")
    lines = ptx.split("\n")
    sites = 0
    spans = _split_sections(lines)
    abbrev = next(((s, e) for name, s, e in spans if name == ".debug_abbrev"), None)
    # DWARF bodies first (their line count may change), from the end so spans stay valid
    for section, start, end in reversed(spans):
        if section == ".debug_info":
            sites += rename_debug_info(lines, (start, end), abbrev, old, new)
        elif section == ".debug_str":
            sites += rename_debug_str(lines, (start, end), abbrev, old, new)
    text, n = _rename_text("\n".join(lines), {old: new})
    return Renamed(text, old, new, sites + n)


def rename_entries(ptx: str, names: dict[str, str]) -> Renamed:
    """Rename several entries at once (``{old: new}``): one module in which every kernel carries its new name, so
    one ptxas run gives every kernel's code under that name template. A new name that is another symbol of the
    module already (``x`` -> ``cutlass_x`` beside ``cutlass_x``) is refused: rename those one at a time. Without
    DWARF the text is rewritten in one pass (a library's module holds hundreds of entries in megabytes)."""
    changing = {o: n for o, n in names.items() if o != n}
    for n in changing.values():
        validate_name(n)
    if not changing:
        return Renamed(ptx, "", "", 0)
    missing = [o for o in changing if o not in set(entries_of(ptx))]
    if missing:  # a module-wide rename names callees and globals too: read those only then (a module is megabytes)
        missing = [o for o in missing if o not in set(module_symbols(ptx))]
    if missing:
        raise MalformedPtx(f"no entry {missing[0]!r} in PTX")
    if set(changing.values()) & set(changing) or _token_re(*changing.values()).search(ptx):
        raise InvalidName("a new name already names something in this PTX; renaming would merge two symbols")
    if ".section .debug" in ptx:  # DWARF: each name through the renamer's DWARF half
        sites = 0
        for old, new in changing.items():
            r = rename_entry(ptx, old, new)
            ptx, sites = r.ptx, sites + r.sites
        return Renamed(ptx, ",".join(changing), ",".join(changing.values()), sites)
    text, n = _rename_text(ptx, changing)
    return Renamed(text, ",".join(changing), ",".join(changing.values()), n)


def template_renames(ptx: str, entry: str, template: str) -> dict[str, str]:
    """``{old: new}`` for every symbol ``template`` renames: the entry, and for a module-wide template every other
    symbol of the module holding the trigger."""
    names = {entry: apply_template(template, entry)}
    if module_wide(template):
        names.update(module_respellings(ptx, {entry}))
    return names


def rename_symbols(ptx: str, names: dict[str, str]) -> Renamed:
    """``{old: new}`` applied: one name through ``rename_entry`` (its messages name the name), several at once."""
    if len(names) == 1:
        ((old, new),) = names.items()
        return rename_entry(ptx, old, new)
    return rename_entries(ptx, names)


def template_ptx(ptx: str, entry: str, template: str) -> tuple[str, Renamed]:
    """(the entry's name under ``template``, the PTX that name is assembled from)."""
    names = template_renames(ptx, entry, template)
    return names[entry], rename_symbols(ptx, names)


def renamed_ptx(ptx: str, entry: str, name: str) -> str:
    """The PTX with its entry ``entry`` called ``name``: the text itself when that is its name already."""
    return ptx if name == entry else rename_entry(ptx, entry, name).ptx
