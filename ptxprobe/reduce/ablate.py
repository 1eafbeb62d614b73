"""Options ablation: which ptxas options make the name stop mattering, on the minimal kernel and on the input.

Each option is added to the reduction's flags, one at a time, and the same predicate judges the kernel (the
sweep's verdict and ``--keep``). Only options this ptxas's own ``--help`` lists are tried
(``toolchain.tools.ptxas_options``); the values come from the table below (the ones that shape code: the
optimisation level, expensive optimisations, FMA contraction, the register-usage level, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ptxprobe.reduce.predicate import Judge, Setup
from ptxprobe.toolchain.tools import ptxas_options

# option -> values to try (None: a switch without a value)
CODE_OPTIONS: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    ("--opt-level", ("0", "1", "2")),
    ("--allow-expensive-optimizations", ("false", "true")),
    ("--fmad", ("false",)),
    ("--register-usage-level", ("0", "10")),
    ("--Ofast-compile", ("max",)),
    ("--disable-optimizer-constants", (None,)),
    ("--dont-merge-basicblocks", (None,)),
    ("--return-at-end", (None,)),
    ("--extensible-whole-program", (None,)),
    ("--optimize-float-atomics", (None,)),
)
STOPS, STILL, NOT_COMPARED = "name stops mattering", "name still matters", "not compared"


@dataclass(frozen=True)
class Ablation:
    option: str  # as passed to ptxas (--fmad=false)
    outcome: str  # STOPS | STILL | NOT_COMPARED
    why: str  # the judgement's reason (same machine code, differs, baseline fails, ...)


def options_to_try(help_options: dict | None) -> list[str]:
    """The code-shaping options this ptxas lists in its ``--help``, each with its values (``--fmad=false``)."""
    listed = set((help_options or {}).get("long", ()))
    return [opt if value is None else f"{opt}={value}"
            for opt, values in CODE_OPTIONS if opt in listed for value in values]


def ablate(ptx: str, setup: Setup, judge: Judge) -> list[Ablation]:
    """Each option alone on top of the reduction's flags: does the name still change the code?"""
    out = []
    for option in options_to_try(ptxas_options(setup.tool)):
        trial = Judge(replace(setup, flags=(*setup.flags, option)), judge.pool, judge.cache)
        j = trial.judge([ptx])[0]
        judge.ptxas_calls += trial.ptxas_calls
        judge.cache_hits += trial.cache_hits
        if j.interesting:
            outcome = STILL
        elif j.why in ("baseline fails", "both names fail", "renamed fails", "rename check failed"):
            outcome = NOT_COMPARED
        else:
            outcome = STOPS
        out.append(Ablation(option, outcome, j.why))
    return out


def as_json(results: list[Ablation]) -> list[dict]:
    return [asdict(a) for a in results]


def stopping(results: list[Ablation]) -> list[str]:
    """The options under which the name stops mattering."""
    return [a.option for a in results if a.outcome == STOPS]
