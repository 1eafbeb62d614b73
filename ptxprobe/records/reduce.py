"""``reduce.json``: a reduction's record, rewritten after every step (a reduction resumes from it).

Layout 1 (no ``schema_version``) nested each earlier step's record under ``last``, step inside step: the file grew
with the square of the steps. The outer record was always the newest step; ``last`` is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxprobe.records.record import Json, Record, doc, required


@dataclass(frozen=True, kw_only=True)
class ReduceRecord(Record):
    """``ptxprobe reduce``: the PTX cut down to what still makes the name change the machine code, step by step."""

    FILE = "reduce.json"
    SCHEMA_VERSION = 2
    VERSIONED = True

    ptxprobe_version: str = required("the ptxprobe that reduced")
    identity: Json = required("what the reduction is of: input PTX, entry, arch, ptxas, flags, names, predicate")
    input: str = required("the kernel reduced")
    entry: str = required("its entry")
    arch: str = required("the target")
    ptxas: Json = required("the ptxas release, sha256 and path")
    flags: tuple[str, ...] = doc("ptxas flags", default=())
    baseline_name: str = required("the baseline name")
    renamed_name: str = required("the name whose effect is reduced")
    predicate: Json = doc("what a step must keep: the static verdict, the rename check, --keep")
    before: Json = doc("the input's structure: instructions, blocks, lines")
    after: Json = doc("the current text's structure")
    resumed: bool = doc("this run went on from an earlier one's text", default=False)
    earlier_runs: tuple[Json, ...] = doc("the earlier runs it resumed: status, ptxas calls, wall seconds", default=())
    status: str = required("running, done, interrupted or no difference")
    why: str | None = doc("no difference: why the input does not show the name effect")
    steps: tuple[Json, ...] = doc("every step kept: what was cut and how much remains", default=())
    ptxas_calls: int = doc("ptxas runs", default=0)
    cache_hits: int = doc("judgements served from the cache", default=0)
    candidates: int | None = doc("candidate texts judged")
    judgements: Json = doc("candidates by why they were refused or kept")
    wall_seconds: float | None = doc("wall seconds")
    one_minimal: bool | None = doc("no single line more can go (done)")
    rounds: int | None = doc("passes over the text (done)")
    tests: int | None = doc("candidates tested (done)")
    dead_code_removed_with_each_candidate: bool | None = doc("each candidate was cleaned of dead code before judging")
    minimal_pair: Json = doc("the minimal text under both names: the sweep's facts per name and what differs")
    ablation: Json = doc("--ablate: which instruction kinds the effect needs, on the minimal text and the input")

    @classmethod
    def upgrade(cls, doc: dict, version: int, where: str) -> dict:
        if version == 1:
            doc.pop("last", None)
        return doc
