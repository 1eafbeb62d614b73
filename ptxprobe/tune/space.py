"""The search space of ``tune``: entry names x ptxas releases x option sets, the user's configuration first.

The user's own configuration is the first of every axis (its own name ``{base}``, the ptxas it builds with, its
flags): every other candidate is measured against it, so it must be unambiguous. Option sets are extra ptxas
flags on top of the user's; whether a release has an option is learnt from its ``--help`` by the sweep
(``toolchain.tools.unsupported_flags``): a set a release lacks is pruned there as not applicable, not failed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ptxprobe.core.errors import SpecError
from ptxprobe.ptx.rename import apply_template

# the user's name, the name with the trigger (``cutlass_x``; a name that holds it is kept), the trigger-free
# spelling (``xutlass`` for ``cutlass``; a name without it is itself): per kernel, names that come out equal to an
# earlier one are the same candidate and pruned as such
DEFAULT_NAMES = ("{base}", "{base_triggered}", "{base_untriggered}")
DEFAULT_OPTION_SETS: tuple[tuple[str, ...], ...] = ((), ("-O2",))
PREFERENCES = ("simplest", "fastest")  # among configurations a race cannot tell apart: fewest changes, or leader
DEFAULT_PTXAS = ("all",)  # every installed ptxas that supports the arch, after the user's own


@dataclass(frozen=True)
class Config:
    """One candidate configuration: a name template, a ptxas (as the sweep spells it) and the extra options."""

    name_template: str
    ptxas: str
    options: tuple[str, ...] = ()

    @property
    def options_text(self) -> str:
        return " ".join(self.options) or "default"

    def to_json(self) -> dict:
        return {"name_template": self.name_template, "ptxas": self.ptxas, "options": list(self.options)}


@dataclass(frozen=True)
class TuneSpace:
    """The axes; ``names[0]``, ``ptxas[0]`` and ``option_sets[0]`` (no extra options) are the user's own."""

    names: tuple[str, ...]
    ptxas: tuple[str, ...]
    option_sets: tuple[tuple[str, ...], ...]
    user_flags: tuple[str, ...] = ()  # the flags every assembly passes (Triton's -lineinfo); option sets add to it

    @property
    def user(self) -> Config:
        return Config(self.names[0], self.ptxas[0], self.option_sets[0])

    def configs(self) -> list[Config]:
        """Every candidate, the user's first, in the order representatives are chosen (names vary fastest)."""
        return [Config(n, p, o) for p, o, n in itertools.product(self.ptxas, self.option_sets, self.names)]

    def flags(self, options: tuple[str, ...]) -> tuple[str, ...]:
        """The full ptxas flag list of an option set (the user's flags, then the set's)."""
        return (*self.user_flags, *options)

    def sweep_axes(self) -> dict[str, object]:
        """The sweep's axes that assemble every candidate once."""
        return {"names": list(self.names), "ptxas": list(self.ptxas),
                "flags": [list(self.flags(o)) for o in self.option_sets], "repeat": 1, "max_repeat": 0}

    def to_json(self) -> dict:
        return {"names": list(self.names), "ptxas": list(self.ptxas),
                "option_sets": [list(o) for o in self.option_sets], "user_flags": list(self.user_flags),
                "candidates": len(self.configs())}


def parse_option_sets(text: str | None) -> tuple[tuple[str, ...], ...]:
    """``'default;-O2;--allow-expensive-optimizations=false'`` -> option sets, the user's (none) first."""
    if text is None:
        return DEFAULT_OPTION_SETS
    sets: list[tuple[str, ...]] = [()]
    for part in text.split(";"):
        words = tuple(part.split())
        if words in ((), ("default",)):
            continue
        if any(not w.startswith("-") and i == 0 for i, w in enumerate(words)):
            raise SpecError(f"--options: {part.strip()!r} is not a ptxas option (options start with -, sets are "
                            "separated by ';', e.g. 'default;-O2')")
        if words not in sets:
            sets.append(words)
    return tuple(sets)


def build_space(names: tuple[str, ...] | None, user_ptxas: str, more_ptxas: tuple[str, ...] | None,
                option_sets: tuple[tuple[str, ...], ...], user_flags: tuple[str, ...]) -> TuneSpace:
    """The axes, the user's value first on each; an axis left empty is refused (one line, exit 2): a tune of the
    user's configuration alone would compare nothing."""
    names = tuple(dict.fromkeys(names if names is not None else DEFAULT_NAMES))
    ptxas = tuple(dict.fromkeys((user_ptxas, *(DEFAULT_PTXAS if more_ptxas is None else more_ptxas))))
    if not names or not option_sets or not user_ptxas:
        raise SpecError("the search space is empty: give at least one name, ptxas and option set")
    if names[0] != "{base}":
        raise SpecError(f"--names: the first name is the user's own and must be {{base}} (got {names[0]!r})")
    for t in names:
        apply_template(t, "kernel")  # a template that cannot make an identifier is refused here
    space = TuneSpace(names, ptxas, tuple(option_sets), tuple(user_flags))
    if len(space.configs()) < 2:
        raise SpecError("the search space is empty: only the user's own configuration "
                        f"({names[0]}, ptxas {user_ptxas}, default options); add names, --ptxas or --options")
    return space
