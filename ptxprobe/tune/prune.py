"""Static pruning: candidates whose machine code equals one already chosen are not timed.

"Same machine code" has one definition, ``KernelFacts.machine_code_sha256`` (code, records, constant banks,
relocations, sizes, callees: the column ``static.verdicts.SAME_CODE`` names); two candidates with that hash equal
run the same code on the GPU, so timing both would be an A/A run. Pure: sweep rows (or facts of cubins assembled
for the GPU) in, frozen records out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ptxprobe.static.verdicts import SAME_CODE
from ptxprobe.toolchain.tools import version_key
from ptxprobe.tune.space import TuneSpace

SAME_CODE_AS = "same machine code as"
NOT_APPLICABLE = "not applicable"
FAILED = "assembly failed"
NOT_LOADABLE = "not loadable"  # the program cannot load this configuration (a CuTe DSL kernel under a name of
# another length): pruned before representatives are chosen, so a code it shares is raced under a loadable candidate


@dataclass(frozen=True)
class Candidate:
    """One configuration of one kernel, as assembled: the name it gets, the ptxas, the extra options, and the
    machine code ptxas made of it (None when the assembly did not give a cubin)."""

    kernel: str
    arch: str
    name_template: str
    name: str
    ptxas_version: str
    ptxas_sha256: str
    options: tuple[str, ...]
    machine_code_sha256: str | None
    status: str = "ok"
    error: str | None = None
    registers: int | None = None
    is_user: bool = False
    ptxas_tag: str = ""  # the release, with the binary's sha256 prefix when two binaries share it (``arranged``)

    @property
    def label(self) -> str:
        """How the candidate is named in the answer and the race: name, ptxas release, options (unique per kernel)."""
        return f"{self.name} | ptxas {self.ptxas_tag or self.ptxas_version} | {' '.join(self.options) or 'default'}"

    @classmethod
    def from_json(cls, d: dict, kernel: str, arch: str) -> Candidate:
        """A candidate as ``to_json`` wrote it in tuned.json (its label's ptxas tag kept)."""
        tag = d["label"].split(" | ptxas ")[1].split(" | ")[0] if " | ptxas " in d.get("label", "") else ""
        return cls(kernel, arch, d["name_template"], d["name"], d["ptxas_version"], d["ptxas_sha256"],
                   tuple(d["options"]), d.get("machine_code_sha256"), d.get("status", "ok"), None, d.get("registers"),
                   bool(d.get("is_user")), "" if tag == d["ptxas_version"] else tag)

    def to_json(self) -> dict:
        return {"label": self.label, "name_template": self.name_template, "name": self.name,
                "ptxas_version": self.ptxas_version, "ptxas_sha256": self.ptxas_sha256, "options": list(self.options),
                "machine_code_sha256": self.machine_code_sha256, "registers": self.registers,
                "status": self.status, "is_user": self.is_user}


@dataclass(frozen=True)
class PrunedCandidate:
    candidate: Candidate
    reason: str  # SAME_CODE_AS, NOT_APPLICABLE or FAILED
    representative: str | None = None  # the chosen candidate with the same machine code
    detail: str = ""

    def to_json(self) -> dict:
        return {**self.candidate.to_json(), "reason": self.reason, "representative": self.representative,
                "detail": self.detail}


@dataclass(frozen=True)
class Pruned:
    """One kernel's candidates split: the distinct codes to time (the user's first) and what was pruned, why."""

    kernel: str
    arch: str
    user: Candidate | None  # None: the user's own configuration did not assemble
    distinct: tuple[Candidate, ...]
    pruned: tuple[PrunedCandidate, ...]

    @property
    def contenders(self) -> tuple[Candidate, ...]:
        """The distinct codes other than the user's: what a race times against it."""
        return tuple(c for c in self.distinct if not c.is_user)


def options_of(flags: str | Sequence[str], user_flags: Sequence[str]) -> tuple[str, ...]:
    """A row's extra options: its flags after the user's own."""
    words = tuple(flags.split()) if isinstance(flags, str) else tuple(flags)
    n = len(user_flags)
    return words[n:] if words[:n] == tuple(user_flags) else words


def candidates_from_rows(rows: Iterable[dict], space: TuneSpace, user_sha256: dict[str, str]) -> dict[tuple, list]:
    """The sweep's rows as candidates per (kernel, arch), in the order representatives are chosen.

    ``user_sha256`` maps an arch to the sha256 of the user's own ptxas there: the user's configuration is its first
    name with that ptxas and no extra options."""
    out: dict[tuple, list[Candidate]] = {}
    for r in rows:
        if r.get("repeat", 0) != 0:
            continue  # one assembly per candidate: a repeat re-runs ptxas on the same input
        opts = options_of(r["ptxas_flags"], space.user_flags)
        is_user = (r["name_template"] == space.names[0] and not opts
                   and r["ptxas_sha256"] == user_sha256.get(r["arch"]))
        code = r.get(SAME_CODE) if r["status"] == "ok" else None
        out.setdefault((r["kernel"], r["arch"]), []).append(Candidate(
            r["kernel"], r["arch"], r["name_template"], r["name"], r["ptxas_version"], r["ptxas_sha256"], opts, code,
            r["status"], r.get("error"), r.get("registers"), is_user))
    return {key: arranged(cands, space) for key, cands in out.items()}


def arranged(cands: Iterable[Candidate], space: TuneSpace) -> list[Candidate]:
    """One kernel's candidates in the order representatives are chosen, each configuration once: a template that
    spells the same name as another (``{base_untriggered}`` of a name without the trigger) is the same candidate, and
    two binaries of one release are told apart by their sha256 prefix."""
    cands = list(cands)
    shas: dict[str, set[str]] = {}
    for c in cands:
        shas.setdefault(c.ptxas_version, set()).add(c.ptxas_sha256)
    seen: set[tuple] = set()
    out = []
    for c in sorted(cands, key=lambda c: order_key(c, space)):
        key = (c.name, c.ptxas_sha256, c.options)
        if key in seen:
            continue
        seen.add(key)
        tag = c.ptxas_version if len(shas[c.ptxas_version]) == 1 else f"{c.ptxas_version}@{c.ptxas_sha256[:8]}"
        out.append(replace(c, ptxas_tag=tag))
    return out


def order_key(c: Candidate, space: TuneSpace) -> tuple:
    """The user's first, then by ptxas release, option set and name as the space lists them."""
    opt = space.option_sets.index(c.options) if c.options in space.option_sets else len(space.option_sets)
    name = space.names.index(c.name_template) if c.name_template in space.names else len(space.names)
    return (not c.is_user, version_key(c.ptxas_version), c.ptxas_sha256, opt, name)


def prune(candidates: Sequence[Candidate], unloadable: Callable[[Candidate], str | None] | None = None) -> Pruned:
    """Keep the first candidate of every distinct machine code; the rest are pruned with their representative.

    A candidate without a cubin is pruned as not applicable (an option its ptxas lacks) or failed (ptxas's words);
    one that ``unloadable`` gives a reason for, as not loadable, before it could represent a code."""
    if not candidates:
        raise ValueError("prune needs the candidates of one kernel")
    chosen: dict[str, Candidate] = {}
    pruned: list[PrunedCandidate] = []
    for c in candidates:
        if c.machine_code_sha256 is None:
            reason = NOT_APPLICABLE if c.status == "unsupported_option" else FAILED
            pruned.append(PrunedCandidate(c, reason, None, (c.error or c.status).strip().splitlines()[0][:200]
                                          if (c.error or c.status) else ""))
            continue
        why = unloadable(c) if unloadable is not None and not c.is_user else None
        if why:
            pruned.append(PrunedCandidate(c, NOT_LOADABLE, None, why))
            continue
        rep = chosen.get(c.machine_code_sha256)
        if rep is None:
            chosen[c.machine_code_sha256] = c
        else:
            pruned.append(PrunedCandidate(c, SAME_CODE_AS, rep.label))
    user = next((c for c in candidates if c.is_user and c.machine_code_sha256 is not None), None)
    distinct = tuple(chosen.values())
    if user is not None and user not in distinct:  # the user's own code was chosen under another label: never
        raise AssertionError("the user's configuration comes first and so represents its own code")
    return Pruned(candidates[0].kernel, candidates[0].arch, user, distinct, tuple(pruned))
