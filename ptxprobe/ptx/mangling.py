"""Itanium-mangled kernel symbols: where the function's own name lies, what a demangler reads, where a trigger sits.

ptxas's ``strstr`` looks at the whole symbol, so ``cutlass`` in a template argument (``…IN7cutlass6half_tE…``)
triggers it as surely as ``cutlass`` in the function's name. Renaming must therefore know the symbol's structure:
the function's own identifier (``flash_fwd_kernel`` in ``_ZN5flash16flash_fwd_kernelI…EEvT_``, whose length prefix
changes with it) and every other place the trigger occurs. A small recursive-descent reading of the ABI's grammar
finds the identifier; the C++ runtime's demangler (``cxxfilt``, ``abi::__cxa_demangle``) is the independent judge
that a renamed symbol is still a valid mangling, and gives the tables their readable names.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass

from ptxprobe.core.errors import ToolNotFound
from ptxprobe.core.proc import run_tool
from ptxprobe.core.text import split_last_group, split_top_level

_BUILTIN = set("vwbcahstijlmxynofdegz")
_QUALIFIER = set("PROCGrVK")
_SUBSTITUTION_ABBREVIATIONS = set("tabsiod")  # St, Sa, Sb, Ss, Si, So, Sd


_DEEPEST = 12000  # Python frames the reader may use: about 3 per template level, past c++filt's 2048-level limit


class _Unreadable(Exception):
    pass


class _Reader:
    """A cursor over a mangled symbol that skips grammar productions and remembers the function's source names."""

    def __init__(self, text: str):
        self.text, self.i = text, 0

    def peek(self, n: int = 1) -> str:
        return self.text[self.i : self.i + n]

    def take(self, s: str) -> bool:
        if self.text.startswith(s, self.i):
            self.i += len(s)
            return True
        return False

    def need(self, s: str) -> None:
        if not self.take(s):
            raise _Unreadable(f"expected {s!r} at {self.i}")

    def number(self) -> int:
        m = re.compile(r"n?\d+").match(self.text, self.i)
        if not m:
            raise _Unreadable(f"expected a number at {self.i}")
        self.i = m.end()
        return int(m.group(0).replace("n", "-"))

    def source_name(self) -> tuple[int, int]:
        """``<length><identifier>``: the identifier's span."""
        n = self.number()
        start = self.i
        if n <= 0 or start + n > len(self.text):
            raise _Unreadable(f"bad source name length at {start}")
        self.i += n
        return start, self.i

    def seq_id(self) -> None:  # S_ / S<base36>_ / T_ / T<n>_
        while self.peek() and self.peek() != "_":
            if not self.peek().isalnum():
                raise _Unreadable(f"bad sequence id at {self.i}")
            self.i += 1
        self.need("_")

    def substitution(self) -> None:
        self.need("S")
        if self.peek() in _SUBSTITUTION_ABBREVIATIONS:
            self.i += 1
        else:
            self.seq_id()

    def template_args(self) -> None:
        self.need("I")
        while not self.take("E"):
            self.template_arg()

    def template_arg(self) -> None:
        c = self.peek()
        if c == "L":
            self.literal()
        elif c == "X":
            self.i += 1
            self.expression_until_end()
        elif c == "J":
            self.i += 1
            while not self.take("E"):
                self.template_arg()
        else:
            self.type()

    def literal(self) -> None:
        self.need("L")
        if self.take("_Z"):  # an external name: the encoding of another entity
            self.encoding()
            self.need("E")
            return
        self.type()
        if self.peek() != "E":
            self.number()
        self.need("E")

    def expression_until_end(self) -> None:
        """An expression argument (rare in kernel symbols): skipped by balancing, reading source names whole."""
        depth = 1
        while depth:
            c = self.peek()
            if not c:
                raise _Unreadable("unterminated expression")
            if c.isdigit():
                self.source_name()
            elif c in "XNIJ":
                depth += 1
                self.i += 1
            elif c == "L":
                self.literal()
            elif c == "E":
                depth -= 1
                self.i += 1
            else:
                self.i += 1

    def type(self) -> None:
        c = self.peek()
        if not c:
            raise _Unreadable("type expected at the end")
        if c in _BUILTIN:
            self.i += 1
        elif c == "u":
            self.i += 1
            self.source_name()
        elif c == "D":
            two = self.peek(2)
            self.i += 2
            if two in ("DF", "DB", "DU"):  # DF16_, DB<n>_ ...
                self.number()
                self.take("_")
                self.take("b")
            elif two in ("Dp",):
                self.type()
            elif two in ("Dt", "DT"):
                self.expression_until_end()
        elif c in _QUALIFIER:
            self.i += 1
            self.type()
        elif c == "A":
            self.i += 1
            if self.peek().isdigit():
                self.number()
            self.need("_")
            self.type()
        elif c == "M":
            self.i += 1
            self.type()
            self.type()
        elif c == "F":
            self.i += 1
            self.take("Y")
            while not self.take("E"):
                self.type()
        elif c == "T":
            self.i += 1
            self.seq_id()
            if self.peek() == "I":
                self.template_args()
        elif c == "S":
            self.substitution()
            if self.peek() == "I":
                self.template_args()
        elif c == "N":
            self.nested_name()
        elif c.isdigit():
            self.source_name()
            if self.peek() == "I":
                self.template_args()
        elif c == "Z":
            self.local_name()
        else:
            raise _Unreadable(f"unknown type code {c!r} at {self.i}")

    def nested_name(self) -> tuple[int, int] | None:
        """``N [qualifiers] <prefix>… E``: the span of its last source name (the function's own, for an encoding)."""
        self.need("N")
        while self.peek() in ("r", "V", "K"):
            self.i += 1
        self.take("R") or self.take("O")
        last = None
        first = True
        while not self.take("E"):
            c = self.peek()
            if c.isdigit():
                last = self.source_name()
            elif c == "L":  # internal linkage marker before a source name
                self.i += 1
            elif c == "I":
                if first:
                    raise _Unreadable("template arguments before any name")
                self.template_args()
            elif c == "S":
                self.substitution()
            elif c == "T":
                self.i += 1
                self.seq_id()
            elif c in ("C", "D") and self.peek(2)[1:].isdigit():  # constructor / destructor
                self.i += 2
                last = None
            elif not c:
                raise _Unreadable("unterminated nested name")
            else:
                raise _Unreadable(f"unknown name component {c!r} at {self.i}")
            first = False
        return last

    def local_name(self) -> None:
        self.need("Z")
        self.encoding()
        self.need("E")
        if self.take("s"):
            return
        self.name()

    def name(self) -> tuple[int, int] | None:
        c = self.peek()
        if c == "N":
            return self.nested_name()
        if c == "Z":
            self.local_name()
            return None
        self.take("L")
        if self.take("St"):
            pass
        if not self.peek().isdigit():
            raise _Unreadable(f"unsupported name at {self.i}")
        span = self.source_name()
        if self.peek() == "I":
            self.template_args()
        return span

    def encoding(self) -> tuple[int, int] | None:
        span = self.name()
        while self.peek() and self.peek() != "E":  # the parameter (and return) types
            self.type()
        return span


@dataclass(frozen=True)
class SymbolParts:
    """Where a symbol's own function identifier lies (the whole symbol for a plain C name)."""

    symbol: str
    start: int
    end: int
    mangled: bool

    @property
    def identifier(self) -> str:
        return self.symbol[self.start : self.end]

    def with_identifier(self, identifier: str) -> str:
        """The symbol naming ``identifier`` instead, its length prefix rewritten (parameter encoding kept)."""
        if not self.mangled:
            return identifier
        digits = len(str(self.end - self.start))
        head = self.symbol[: self.start - digits]
        return f"{head}{len(identifier)}{identifier}{self.symbol[self.end :]}"


@functools.lru_cache(maxsize=8192)
def symbol_parts(symbol: str) -> SymbolParts | None:
    """The structure of ``symbol``: a plain name is its own identifier; an Itanium name is read by the grammar;
    None for a mangled name this reader does not understand (then only same-length respellings are safe)."""
    if not symbol.startswith("_Z"):
        return SymbolParts(symbol, 0, len(symbol), False)
    r = _Reader(symbol)
    r.i = 2
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _DEEPEST))  # CUTLASS nests templates hundreds deep; the reader recurses per level
    try:
        span = r.encoding()
    except (_Unreadable, IndexError, ValueError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(limit)
    if span is None or r.i != len(symbol):
        return None
    return SymbolParts(symbol, span[0], span[1], True)


def own_identifier(symbol: str) -> str:
    """``my_kernel`` of ``_Z9my_kernelPf`` and of ``_ZN2ns9my_kernelIfEEvPT_``; a plain or unreadable name itself."""
    parts = symbol_parts(symbol)
    return parts.identifier if parts else symbol


def is_mangled(symbol: str) -> bool:
    return symbol.startswith("_Z")


@functools.lru_cache(maxsize=8192)
def demangled(symbol: str) -> str | None:
    """What the C++ runtime's demangler reads (None: not a valid mangled name, or a plain C name)."""
    if not is_mangled(symbol):
        return None
    import cxxfilt

    try:
        out = cxxfilt.demangle(symbol, external_only=False)
    except cxxfilt.Error:
        out = _demangled_deep(symbol) if symbol_parts(symbol) is not None else None
    return out if out and out != symbol else None


def _demangled_deep(symbol: str) -> str | None:
    """The demangling of a symbol nested deeper than the runtime demangler's recursion limit allows (CUTLASS's
    ``cutlass::Kernel<SparseGemm<…>>`` in xformers is refused by ``__cxa_demangle``): binutils' ``c++filt`` reads
    it without the limit; None where c++filt is missing or refuses it too."""
    try:
        run = run_tool(["c++filt", "--no-recurse-limit"], stdin=symbol.encode(), timeout=30)
    except ToolNotFound:
        return None
    out = run.stdout.strip()
    return out if run.ok and out and out != symbol else None


def readable(symbol: str) -> str:
    """The demangled name, or the symbol itself where there is none."""
    return demangled(symbol) or symbol


# --- where the trigger sits ---------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerOrigin:
    """Where in a symbol ptxas's trigger substring occurs, said as a C++ reader sees it."""

    symbol: str
    in_identifier: bool  # the function's own name holds it
    elsewhere: bool  # a namespace, class, template argument or parameter type holds it
    names: tuple[str, ...]  # the demangled names that hold it elsewhere (``cutlass::half_t``)
    scope: str = ""  # the function's namespace or class where that holds it (``cutlass`` of ``cutlass::Kernel``)

    @property
    def holds(self) -> bool:
        return self.in_identifier or self.elsewhere

    def describe(self) -> str:
        """``the type cutlass::half_t in its template arguments``, ``its own name``, …: for the sweep's notes."""
        if self.in_identifier and not self.elsewhere:
            return "its own name"
        also = " and its own name" if self.in_identifier else ""
        if "_GLOBAL__N_" in self.symbol and not self.names:
            return "its anonymous namespace's mangled name (nvcc puts the file's name there)" + also
        if not self.names and not self.scope:
            return "its mangled symbol" + also
        read = _Readable.of(self.symbol)
        targs = ", ".join(read.targs or ())
        places = []
        for name in self.names:
            place = ("template arguments" if name in targs else "parameters" if name in read.params else
                     "qualified name")
            places.append(f"{name} in its {place}")
        kind = "the type " if len(self.names) == 1 else ""
        said = kind + "; ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
        if self.scope:  # cutlass::Kernel<…>: the function's own namespace or class says it first
            more = (f", and {len(places)} names in its arguments" if len(places) > 1 else
                    f", and {said}" if places else "")
            return f"its namespace or class {self.scope}" + more + also
        return said + also


_QUALIFIED_RE = re.compile(r"[A-Za-z_][\w]*(?:::[A-Za-z_~][\w]*)*")


def trigger_origin(symbol: str, trigger: str) -> TriggerOrigin:
    """Where ``trigger`` occurs in ``symbol``: its own identifier, or elsewhere (with the demangled names)."""
    parts = symbol_parts(symbol)
    own = parts.identifier if parts else symbol
    in_identifier = trigger in own
    outside = symbol[: parts.start] + symbol[parts.end :] if parts else ""
    elsewhere = trigger in outside
    names: list[str] = []
    text = demangled(symbol)
    if elsewhere and text:
        for m in _QUALIFIED_RE.finditer(text):
            word = m.group(0)
            if trigger in word and word.rsplit("::", 1)[-1] != own and word not in names:
                names.append(word)
    fn = _Readable.of(symbol).function if text else ""
    scope = fn.rsplit("::", 1)[0] if "::" in fn and trigger in fn.rsplit("::", 1)[0] else ""
    return TriggerOrigin(symbol, in_identifier, elsewhere, tuple(n for n in names if n != scope), scope)


# --- names for people --------------------------------------------------------------------------


def _split_top(text: str, open_: str, close: str) -> tuple[str, str, str] | None:
    """(head, inside, tail) of the first top-level ``open_…close`` group of ``text``."""
    start = text.find(open_)
    if start < 0:
        return None
    depth = 0
    for k in range(start, len(text)):
        if text[k] == open_:
            depth += 1
        elif text[k] == close:
            depth -= 1
            if depth == 0:
                return text[:start], text[start + 1 : k], text[k + 1 :]
    return None




@dataclass(frozen=True)
class _Readable:
    function: str  # ``flash::flash_fwd_kernel``
    targs: tuple[str, ...] | None
    params: str

    @classmethod
    def of(cls, symbol: str) -> _Readable:
        text = readable(symbol)
        params = ""
        split_params = split_last_group(text, "(", ")")  # the parameter list: the last top-level (...)
        if split_params and split_params[0]:
            text, params = split_params
        split = _split_top(text, "<", ">")
        if split is None or split[2].strip():
            head, targs = text, None
        else:
            head, targs = split[0], tuple(split_top_level(split[1], "<(", ">)"))
        head = head.split(" ")[-1] if " " in head and "<" not in head else head  # drop a return type
        return cls(head, targs, params)


def _differing(arg_lists: list[tuple[str, ...]]) -> list[list[str]]:
    """Per instantiation, its template arguments with those all instantiations share elided (``…``), reading into
    an argument that differs where every instantiation spells it as the same template (``SparseGemm<…, RowMajor>``
    rather than the whole operator type of a ``cutlass::Kernel<Operator>``)."""
    shown: list[list[str]] = [[] for _ in arg_lists]
    for k in range(len(arg_lists[0])):
        values = [a[k] for a in arg_lists]
        if all(v == values[0] for v in values):
            for row in shown:
                if not row or row[-1] != "…":
                    row.append("…")
            continue
        splits = [_split_top(v, "<", ">") for v in values]
        inner = [tuple(split_top_level(sp[1], "<(", ">)")) if sp and not sp[2].strip() else None for sp in splits]
        if all(i is not None and sp and sp[0] == splits[0][0] and len(i) == len(inner[0])  # type: ignore[index,arg-type]
               for i, sp in zip(inner, splits, strict=True)):
            for row, sub, sp in zip(shown, _differing(inner), splits, strict=True):  # type: ignore[arg-type]
                row.append(sp[0].rsplit("::", 1)[-1] + "<" + ", ".join(sub) + ">")  # type: ignore[index]
        else:
            for row, v in zip(shown, values, strict=True):
                row.append(v)
    return shown


def display_names(symbols: list[str]) -> dict[str, str]:
    """A readable, distinct name per symbol: the demangled function, with only the template arguments that tell
    instantiations of one function apart (``Marlin<…, 256, 1, true>``), and the parameters where overloads differ
    only by them. Plain names stay as they are."""
    reads = {s: _Readable.of(s) for s in dict.fromkeys(symbols)}
    by_fn: dict[str, list[str]] = {}
    for s, r in reads.items():
        by_fn.setdefault(r.function, []).append(s)
    out = {}
    for fn, group in by_fn.items():
        short = fn.rsplit("::", 1)[-1] if sum(r.function.rsplit("::", 1)[-1] == fn.rsplit("::", 1)[-1]
                                               for r in reads.values()) == len(group) else fn
        arg_lists = [reads[s].targs for s in group]
        same_arity = len(group) > 1 and all(a is not None and len(a) == len(arg_lists[0]) for a in arg_lists)
        shown = _differing(arg_lists) if same_arity else None  # type: ignore[arg-type]
        for k, s in enumerate(group):
            targs = reads[s].targs
            out[s] = short if targs is None else short + "<" + ", ".join(shown[k] if shown else targs) + ">"
        names = [out[s] for s in group]
        for s in group:  # overloads: the same name for different symbols -> add the parameters
            if names.count(out[s]) > 1 and reads[s].params:
                out[s] += reads[s].params
    taken: dict[str, int] = {}
    for s in out:  # anything still equal (unreadable symbols): the symbol itself decides
        taken[out[s]] = taken.get(out[s], 0) + 1
    return {s: (name if taken[name] == 1 else s) for s, name in out.items()}
