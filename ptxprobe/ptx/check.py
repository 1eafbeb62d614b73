"""Check, independently of the renamer, that two PTX texts differ only at the entry name's sites.

The checker never calls ``ptxprobe.ptx.rename``. It tokenises both texts itself (comments
dropped), and outside the DWARF sections (``.file`` paths aside) requires equal token streams except where a base
token's *image under the rename rule* stands in the variant: the entry itself, its
``<entry>_param_N`` parameters, and Itanium-mangled locals ``_ZZ<encoding>E...`` whose
length prefix it derives on its own. DWARF sections are decoded from their ``.bN`` data
directives into bytes (label operands kept as relocations); ``.debug_info`` is parsed with
pyelftools against ``.debug_abbrev`` and the DIE trees are compared modulo the name: every
unit must tile its section exactly (a wrong unit length fails), every DIE reference must
land on a DIE and point to the same DIE on both sides, and string attributes must be equal
or the rule's image.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ptxprobe.core.errors import MalformedPtx
from ptxprobe.core.text import one_spelling, split_last_group
from ptxprobe.ptx.dwarf import dwarf_info, is_decode_error
from ptxprobe.ptx.mangling import demangled
from ptxprobe.ptx.text import read_text_file

_TOKEN_RE = re.compile(
    r'"(?:[^"\\\n]|\\.)*"'  # string literal
    r"|0[fFdD][0-9a-fA-F]+"  # float bit patterns
    r"|0[xX][0-9a-fA-F]+U?"
    r"|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?U?"
    r"|[A-Za-z_$%][\w$]*(?:\.[\w$]+)*"  # a dotted compound (add.s64, %tid.x) is one token: no symbol has a dot
    r"|\S"
)
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_SECTION_RE = re.compile(r"^\s*\.section\s+(\.debug_\w+)\s*(\{)?\s*(\})?\s*$")
_DATA_RE = re.compile(r"^\s*\.b(8|16|32|64)\s+(.+?)\s*$")
_LABEL_DEF_RE = re.compile(r"^[$A-Za-z_.][\w$.]*:$")
_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")


@dataclass(frozen=True)
class Site:
    line: int  # 1-based line in the variant
    base: str
    variant: str
    where: str  # code | debug:<section> | dwarf:<attribute>


@dataclass(frozen=True)
class RenameCheck:
    equal: bool
    name_a: str
    name_b: str
    sites: tuple[Site, ...] = ()
    detail: str = ""

    def to_json(self) -> dict:
        return {"equal": self.equal, "name_a": self.name_a, "name_b": self.name_b, "detail": self.detail,
                "sites": [asdict(s) for s in self.sites]}

    @classmethod
    def from_json(cls, d: dict) -> RenameCheck:
        return cls(d["equal"], d["name_a"], d["name_b"], tuple(Site(**s) for s in d["sites"]), d["detail"])


# --- the rename rule, derived here from the Itanium ABI, not from the renamer -----------------


def _mangled_parts(name: str) -> tuple[str, str] | None:
    """(identifier, rest) of ``_Z<len><identifier><rest>``, or None for a plain C name."""
    m = re.match(r"_Z(\d+)", name)
    if not m:
        return None
    n = int(m.group(1))
    ident = name[m.end() : m.end() + n]
    return (ident, name[m.end() + n :]) if len(ident) == n else None


def _locals_prefix(name: str) -> str:
    return f"_ZZ{name[2:]}E" if name.startswith("_Z") else f"_ZZ{len(name)}{name}E"


def _strip_group(text: str, opening: str, closing: str) -> str:
    """``text`` without the bracketed group that ends it, if one does."""
    split = split_last_group(text, opening, closing)
    return split[0] if split else text


def _function_name(symbol: str) -> str | None:
    """A mangled symbol's own function name as the demangler reads it (``flash_fwd_kernel`` of
    ``void flash::flash_fwd_kernel<…>(…)``), the DWARF ``DW_AT_name`` of the kernel."""
    parts = _mangled_parts(symbol)
    if parts:
        return parts[0]

    text = demangled(symbol)
    if text is None:
        return None
    text = _strip_group(_strip_group(text.strip(), "(", ")"), "<", ">").strip()
    return text.rsplit("::", 1)[-1].rsplit(" ", 1)[-1] or None


def _meaning_problem(base: str, new: str) -> str | None:
    """A renamed mangled symbol means the same function to the C++ runtime's demangler (not ptxprobe's grammar
    reader), apart from the trigger's spelling and the function's name."""
    read_base, read_new = demangled(base), demangled(new)
    if read_base is None:
        return None
    if read_new is None:
        return f"{new} is not a valid mangled name (the demangler rejects it), where {base} is"
    words_b, words_n = re.findall(r"\w+|\W", read_base), re.findall(r"\w+|\W", read_new)
    if len(words_b) != len(words_n):
        return f"{new} demangles to {read_new!r}, another shape than {read_base!r}"
    other = [(a, b) for a, b in zip(words_b, words_n, strict=True)
             if a != b and one_spelling(a) != one_spelling(b)]
    renamed = (_function_name(base), _function_name(new))
    if any((a, b) != renamed for a, b in other) or len(other) > 1:
        return (f"{new} demangles to {read_new!r}: it differs from {read_base!r} in more than the function's name "
                f"and the trigger's spelling ({', '.join(f'{a} -> {b}' for a, b in other[:3])})")
    return None


@dataclass(frozen=True)
class Rule:
    base: str
    new: str
    _base_locals: str = field(init=False, default="")
    _new_locals: str = field(init=False, default="")

    def __post_init__(self):
        object.__setattr__(self, "_base_locals", _locals_prefix(self.base))
        object.__setattr__(self, "_new_locals", _locals_prefix(self.new))

    def problem(self) -> str | None:
        """A new name that is not a consistent Itanium rename of the base (wrong length prefix, other encoding, not
        demangling to the same function apart from its name and the trigger's spelling)."""
        b, n = _mangled_parts(self.base), _mangled_parts(self.new)
        if not self.base.startswith("_Z") and re.match(r"_Z\d", self.new):
            return f"{self.new} looks mangled but {self.base} is not"
        if self.base.startswith("_Z") and not self.new.startswith("_Z"):
            return f"{self.new} is not a mangled name like {self.base}"
        if b is not None:
            if n is None:
                return f"{self.new} is not a mangled name of the form _Z<length><identifier> like {self.base}"
            if one_spelling(n[1]) != one_spelling(b[1]):
                return (f"{self.new}: its length prefix says the identifier is {n[0]!r}, leaving parameter encoding "
                        f"{n[1]!r} where {self.base} has {b[1]!r}")
        return _meaning_problem(self.base, self.new) if self.base.startswith("_Z") else None

    def image(self, token: str, dwarf: bool = False) -> str | None:
        """What ``token`` of the base must become in the variant (None: it must stay as it is).

        In DWARF strings a mangled entry's source identifier (``DW_AT_name``) is the name too.
        """
        if token == self.base:
            return self.new
        if dwarf:
            b, n = _function_name(self.base), _function_name(self.new)
            if b and n and token == b:
                return n
        if token.startswith(self.base + "_param_") and token[len(self.base) + 7 :].isdigit():
            return self.new + token[len(self.base) :]
        if token.startswith(self._base_locals):
            return self._new_locals + token[len(self._base_locals) :]
        return None


@dataclass(frozen=True)
class Rules:
    """Several entries renamed at once (one module holding every kernel under a name template): a token's image is
    the one rule that claims it."""

    rules: tuple[Rule, ...]

    def problem(self) -> str | None:
        return next((p for r in self.rules if (p := r.problem())), None)

    def image(self, token: str, dwarf: bool = False) -> str | None:
        exact = self._exact.get(token)
        if exact is not None:
            return exact
        return next((i for r in self.rules if (i := r.image(token, dwarf)) is not None), None)

    @functools.cached_property
    def _exact(self) -> dict[str, str]:
        return {r.base: r.new for r in self.rules}


# --- tokenising ----------------------------------------------------------------------------------


@dataclass
class Parsed:
    tokens: list[tuple[int, str]]  # (line, token) outside DWARF data
    sections: dict[str, tuple[bytes, list[tuple[int, int, str]], int]]  # name -> (bytes, relocs, first line)
    lines: list[str] = field(default_factory=list)

    def line(self, n: int) -> str:
        return self.lines[n - 1].strip() if 0 < n <= len(self.lines) else ""


def _line_tokens(line: str) -> list[str]:
    found = _TOKEN_RE.findall(line)
    if found[:1] == ["."] and found[1:2] == ["file"]:  # a source path is not code: .file N "<path>"
        found = [t if not t.startswith('"') else '"<path>"' for t in found]
    return found


def _uncommented_lines(ptx: str) -> list[str]:
    return _COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), ptx).split("\n")


def _line_by_line(base_ptx: str, variant_ptx: str, rule: Rules) -> list[Site] | None:
    """The token comparison done only on the lines that differ or could hold a renamed name (a module of hundreds
    of entries is megabytes, nearly all of it untouched); None when it does not apply (DWARF sections, other line
    structure, or any mismatch: then the whole comparison decides, and says where)."""
    if ".section" in base_ptx or ".section" in variant_ptx:
        return None
    a, b = _uncommented_lines(base_ptx), _uncommented_lines(variant_ptx)
    if len(a) != len(b):
        return None
    cores = {r.base[2:] if r.base.startswith("_Z") else r.base for r in rule.rules}
    marker = re.compile("|".join(re.escape(c) for c in sorted(cores, key=len, reverse=True)))
    sites: list[Site] = []
    found = set()
    for i, (la, lb) in enumerate(zip(a, b, strict=True)):
        if la == lb and not marker.search(la):
            continue
        ta, tb = _line_tokens(la), _line_tokens(lb)
        if len(ta) != len(tb):
            return None
        for x, y in zip(ta, tb, strict=True):
            want = rule.image(x) or x
            if y != want:
                return None
            found.add(x)
            if want != x:
                sites.append(Site(i + 1, x, y, "code"))
    return sites if all(r.base in found for r in rule.rules) else None


def parse(ptx: str) -> Parsed:
    lines = ptx.split("\n")
    tokens: list[tuple[int, str]] = []
    sections: dict = {}
    i = 0
    text_lines = _uncommented_lines(ptx)
    while i < len(lines):
        m = _SECTION_RE.match(text_lines[i])
        if m:
            name, first = m.group(1), i + 1
            tokens.append((i + 1, f".section {name}"))
            if m.group(3):  # '{ }' on one line: an empty body
                sections[name] = (b"", [], first)
                i += 1
                continue
            if not m.group(2):
                i += 1
                while i < len(lines) and not text_lines[i].strip():
                    i += 1
                if i >= len(lines) or text_lines[i].strip() != "{":
                    raise MalformedPtx(f"line {first}: .section {name} without a body")
            i += 1
            data, relocs = bytearray(), []
            while i < len(lines) and text_lines[i].strip() != "}":
                s = text_lines[i].strip()
                if s and _LABEL_DEF_RE.match(s):  # a label inside the data: kept as a zero-width marker
                    relocs.append((len(data), 0, s[:-1]))
                elif s:
                    d = _DATA_RE.match(s)
                    if not d:
                        raise MalformedPtx(f"line {i + 1}: cannot read {name} data {s!r}")
                    width = int(d.group(1)) // 8
                    for operand in d.group(2).split(","):
                        operand = operand.strip()
                        try:
                            value = int(operand, 0)
                        except ValueError:
                            relocs.append((len(data), width, operand))
                            value = 0
                        data += (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
                i += 1
            sections[name] = (bytes(data), relocs, first)
            i += 1
            continue
        tokens.extend((i + 1, t) for t in _line_tokens(text_lines[i]))
        i += 1
    return Parsed(tokens, sections, lines)


# --- comparing -----------------------------------------------------------------------------------


class _Mismatch(Exception):
    pass


def _compare_tokens(a: Parsed, b: Parsed, rule: Rule | Rules, sites: list[Site]) -> None:
    for (la, ta), (lb, tb) in zip(a.tokens, b.tokens, strict=False):
        want = rule.image(ta) or ta
        if tb != want:
            raise _Mismatch(f"base line {la} {a.line(la)!r} vs variant line {lb} {b.line(lb)!r}: {ta!r} became "
                            f"{tb!r}" + (f" (the rule gives {want!r})" if want != ta else ""))
        if want != ta:
            sites.append(Site(lb, ta, tb, "code"))
    if len(a.tokens) != len(b.tokens):
        k = min(len(a.tokens), len(b.tokens))
        extra = (a.tokens if len(a.tokens) > k else b.tokens)[k]
        raise _Mismatch(f"one text has more: {'base' if len(a.tokens) > k else 'variant'} line {extra[0]} {extra[1]!r}")


def _compare_relocs(name: str, ra: list, rb: list, rule: Rule | Rules, first_line: int, sites: list[Site]) -> None:
    if len(ra) != len(rb):
        raise _Mismatch(f"{name}: {len(ra)} vs {len(rb)} label operands")
    for (_, wa, sa), (_, wb, sb) in zip(ra, rb, strict=True):
        want = rule.image(sa) or sa
        if wa != wb or sb != want:
            raise _Mismatch(f"{name}: label operand {sa!r} became {sb!r}" + (f" (the rule gives {want!r})"
                                                                              if want != sa else ""))
        if want != sa:
            sites.append(Site(first_line, sa, sb, f"debug:{name}"))


def _compare_strings(da: bytes, db: bytes, rule: Rule | Rules, line: int, sites: list[Site]) -> None:
    """A string table: the same strings in the same order, each equal or the rule's image."""
    sa, sb = da.split(b"\0"), db.split(b"\0")
    if len(sa) != len(sb):
        raise _Mismatch(f".debug_str: {len(sa)} vs {len(sb)} strings")
    for x, y in zip(sa, sb, strict=True):
        a, b = x.decode("latin-1"), y.decode("latin-1")
        want = rule.image(a, dwarf=True) or a
        if b != want:
            raise _Mismatch(f".debug_str: {a!r} vs {b!r}")
        if want != a:
            sites.append(Site(line, a, b, "debug:.debug_str"))


def _resolved(sections: dict, name: str) -> bytes:
    """A section's bytes with label operands that name a label in a debug section replaced by its offset
    (so DW_FORM_strp finds its string); labels elsewhere (code addresses) stay 0."""
    defined = {label: off for data, relocs, _ in sections.values() for off, width, label in relocs if width == 0}
    data, relocs, _ = sections[name]
    out = bytearray(data)
    for off, width, label in relocs:
        if width and label in defined:
            out[off : off + width] = defined[label].to_bytes(width, "little")
    return bytes(out)


_REF_FORMS = {"DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata"}


def _die_trees(info: bytes, abbrev: bytes, strs: bytes | None, side: str) -> list[list[tuple]]:
    """Per unit, the DIEs in order as (tag, depth, [(attribute, form, value)]) with references as DIE indices."""
    try:
        di = dwarf_info(info, abbrev, strs)
        units = []
        end = 0
        for cu in di.iter_CUs():
            cu_end = cu.cu_offset + cu.size
            if cu_end > len(info):
                raise _Mismatch(f"{side}: .debug_info unit at {cu.cu_offset} claims {cu.size} bytes, past the "
                                f"section's {len(info)}: its unit length is wrong")
            dies, index = [], {}
            stack = [(die, 0) for die in [cu.get_top_DIE()]]
            order = []
            while stack:  # pre-order walk, children in order
                die, depth = stack.pop()
                order.append((die, depth))
                index[die.offset - cu.cu_offset] = len(order) - 1
                stack.extend((c, depth + 1) for c in reversed(list(die.iter_children())))
            for die, depth in order:
                attrs = []
                for a in die.attributes.values():
                    v = a.value
                    if a.form in _REF_FORMS:
                        if v not in index:
                            raise _Mismatch(f"{side}: {a.name} of DIE at {die.offset} points to offset {v}, "
                                            "not to a DIE")
                        v = ("die", index[v])
                    elif isinstance(v, bytes):
                        v = v.decode("latin-1")
                    attrs.append((a.name, a.form, v))
                dies.append((die.tag, depth, attrs))
            units.append(dies)
            end = cu_end
        if end != len(info):
            raise _Mismatch(f"{side}: .debug_info units end at byte {end} of {len(info)}: a unit length is wrong")
        return units
    except _Mismatch:
        raise
    except Exception as exc:  # pyelftools or construct on a truncated or misaligned stream
        if is_decode_error(exc):
            raise _Mismatch(f"{side}: .debug_info does not decode ({type(exc).__name__}: {exc})") from exc
        raise


def _compare_dwarf(a: Parsed, b: Parsed, rule: Rule | Rules, sites: list[Site]) -> None:
    names = sorted(set(a.sections) | set(b.sections))
    for name in names:
        if name not in a.sections or name not in b.sections:
            raise _Mismatch(f"section {name} only in {'base' if name in a.sections else 'variant'}")
        (da, ra, _), (db, rb, lb) = a.sections[name], b.sections[name]
        _compare_relocs(name, ra, rb, rule, lb, sites)
        if name == ".debug_str":
            _compare_strings(da, db, rule, lb, sites)
        elif name != ".debug_info" and da != db:
            raise _Mismatch(f"{name} bytes differ")
    if ".debug_info" not in a.sections or not a.sections[".debug_info"][0]:
        return
    abbrev_a = a.sections.get(".debug_abbrev", (b"", [], 0))[0]
    abbrev_b = b.sections.get(".debug_abbrev", (b"", [], 0))[0]
    strs_a = a.sections.get(".debug_str", (None,))[0]
    strs_b = b.sections.get(".debug_str", (None,))[0]
    ua = _die_trees(_resolved(a.sections, ".debug_info"), abbrev_a, strs_a, "base")
    ub = _die_trees(_resolved(b.sections, ".debug_info"), abbrev_b, strs_b, "variant")
    if len(ua) != len(ub):
        raise _Mismatch(f".debug_info: {len(ua)} vs {len(ub)} units")
    line = b.sections[".debug_info"][2]
    for u, (da_, db_) in enumerate(zip(ua, ub, strict=True)):
        if len(da_) != len(db_):
            raise _Mismatch(f".debug_info unit {u}: {len(da_)} vs {len(db_)} DIEs")
        for k, ((tag_a, dep_a, at_a), (tag_b, dep_b, at_b)) in enumerate(zip(da_, db_, strict=True)):
            if (tag_a, dep_a) != (tag_b, dep_b) or len(at_a) != len(at_b):
                raise _Mismatch(f".debug_info unit {u} DIE {k}: {tag_a} vs {tag_b}")
            for (na, fa, va), (nb, fb, vb) in zip(at_a, at_b, strict=True):
                if (na, fa) != (nb, fb):
                    raise _Mismatch(f".debug_info unit {u} DIE {k} ({tag_a}): {na} vs {nb}")
                want = (rule.image(va, dwarf=True) or va) if isinstance(va, str) else va
                if vb != want:
                    raise _Mismatch(f".debug_info unit {u} DIE {k} ({tag_a}) {na}: {va!r} vs {vb!r}")
                if want != va:
                    sites.append(Site(line, va, vb, f"dwarf:{na}"))


def check_rename(base_ptx: str, variant_ptx: str, base_name: str, new_name: str) -> RenameCheck:
    """Do ``variant_ptx`` (entry ``new_name``) and ``base_ptx`` (entry ``base_name``) differ only by the name?"""
    return check_renames(base_ptx, variant_ptx, {base_name: new_name})


def check_renames(base_ptx: str, variant_ptx: str, names: dict[str, str]) -> RenameCheck:
    """Do the two texts differ only at the sites of the entries renamed ``{base name: new name}``?"""
    base_label, new_label = ",".join(names), ",".join(names.values())
    rule = Rules(tuple(Rule(b, n) for b, n in names.items() if b != n))
    sites: list[Site] = []
    try:
        if not rule.rules and base_ptx == variant_ptx:
            return RenameCheck(True, base_label, new_label, (), "")
        problem = rule.problem()
        if problem:
            raise _Mismatch(problem)
        if rule.rules and (quick := _line_by_line(base_ptx, variant_ptx, rule)) is not None:
            return RenameCheck(True, base_label, new_label, tuple(quick), "")
        a, b = parse(base_ptx), parse(variant_ptx)
        have = {t for _, t in a.tokens}
        missing = [n for n in names if n not in have]
        if missing:
            raise _Mismatch(f"base has no {missing[0]!r}")
        _compare_tokens(a, b, rule, sites)
        _compare_dwarf(a, b, rule, sites)
    except _Mismatch as exc:
        return RenameCheck(False, base_label, new_label, tuple(sites), str(exc))
    return RenameCheck(True, base_label, new_label, tuple(sites), "")


def _only_entry(ptx: str, given: str | None, path: str) -> str:
    entries = _ENTRY_RE.findall(ptx)
    if given is not None:
        if given not in entries:
            raise MalformedPtx(f"{path}: no entry {given!r} (have: {', '.join(entries) or 'none'})")
        return given
    if not entries:
        raise MalformedPtx(f"{path}: no .entry in PTX")
    return entries[0]


def check_files(base: str | Path, variant: str | Path, base_name: str | None = None,
                new_name: str | None = None) -> RenameCheck:
    a, b = read_text_file(base, "PTX"), read_text_file(variant, "PTX")
    ea, eb = _only_entry(a, base_name, str(base)), _only_entry(b, new_name, str(variant))
    if base_name is None and new_name is None and len(_ENTRY_RE.findall(a)) > 1:
        # several entries: the renamed one is the entry whose name differs between the files
        diff = [(x, y) for x, y in zip(_ENTRY_RE.findall(a), _ENTRY_RE.findall(b), strict=False) if x != y]
        if len(diff) == 1:
            ea, eb = diff[0]
    return check_rename(a, b, ea, eb)
