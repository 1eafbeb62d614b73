"""``tuned.json``: tune's answer, per kernel the configuration it recommends and why, as a typed record.

Layout 1 named its version ``format`` (1); from layout 2 on the file carries ``schema_version`` like every record.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptxprobe.records.record import Json, Record, doc, required


@dataclass(frozen=True, kw_only=True)
class TunedKernel(Record):
    """One kernel at one target (and problem): the configuration tune recommends, its gain, what it raced and pruned."""

    kernel: str = required("the source's label (file, function), the entry when it has several")
    arch: str = required("the target (sm_90a, ...)")
    status: str = required("tuned (raced on a GPU) or static-only (pruned, not timed)")
    entry: str | None = doc("the entry symbol as the program compiles it (apply swaps it)")
    source_kind: str | None = doc("registered, ptx, cubin, cuda or triton")
    frontend: str | None = doc("what compiled the program's kernel (triton, cute, cuda): how apply hooks it")
    ptx_sha256: str | None = doc("the PTX tune assembled (apply checks the program compiles the same)")
    group_id: str | None = doc("the timed group of the race")
    sizes: str | None = doc("the problem raced at (a user kernel's size set)")
    batch: int | None = doc("the problem raced at (attention: batch)")
    heads: int | None = doc("the problem raced at (attention: heads)")
    seq_len: int | None = doc("the problem raced at (attention: sequence length)")
    user: Json = doc("your configuration: name template, ptxas release and sha256, options (null: it did not "
                     "assemble)")
    best: Json = doc("the configuration recommended (yours when nothing was confirmed faster)")
    best_is_yours: bool | None = doc("the recommendation is your own configuration (null: not raced)")
    change: str | None = doc("the one-line source change, or why yours stays")
    gain: Json = doc("your time / the recommendation's time with its interval, from the proof's fresh rounds")
    runner_up: Json = doc("the next configuration of the race")
    fastest: Json = doc("the race's fastest estimate where the recommendation is the fewest changes among ties")
    tied: tuple[Json, ...] | None = doc("the configurations the race could not tell from its leader")
    prefer: str | None = doc("fewest-changes or fastest: which of the tied the race chose")
    distinct: tuple[Json, ...] | None = doc("the distinct machine codes among the candidates, each with its configs")
    pruned: tuple[Json, ...] | None = doc("candidates left out before the race, each with its reason")
    race: Json = doc("the race: its standings, rounds, rungs, verdicts and q-values")
    race_choice: Json = doc("the race's choice before its proof, with the race's own (biased) numbers")
    leader_verdict: str | None = doc("the race leader's verdict against yours")
    proof: Json = doc("the choice timed again on fresh rounds: ratio, interval, verdict, q-value, outcome")
    proof_interrupted: bool | None = doc("an interrupt ended the proof before it decided")
    outcome: str | None = doc("confirmed, unconfirmed, slower, nothing faster or unproven")
    regime: Json = doc("the sampled regime of the proof: burst, sustained or the program's runs, with clocks")
    numerics: str | None = doc("the numerics gate: bitwise or tolerance")
    note: str | None = doc("why it was not raced or what cut the race")
    gpu: str | None = doc("the GPU it raced on")
    gpu_seconds: float | None = doc("GPU seconds the race and proof took")
    wall_seconds: float | None = doc("wall seconds of the race and proof")
    command: tuple[str, ...] | None = doc("a program tune: the program raced in")
    metric: str | None = doc("a program tune: the regular expression of the number it prints")
    program_runs: Json = doc("a program tune: every program run that finished, per configuration, with GPU seconds")


@dataclass(frozen=True, kw_only=True)
class TunedDocument(Record):
    """What ``ptxprobe tune`` answered: every kernel's record, the search space, the ptxas binaries, the GPU."""

    FILE = "tuned.json"
    SCHEMA_VERSION = 2
    VERSIONED = True

    command: tuple[str, ...] = required("the command line tune ran as")
    space: Json = required("the search space: names, ptxas releases, options, your configuration")
    ptxas: Json = required("every ptxas binary of the answer by sha256: release, path, origin")
    gpu: Json = doc("the GPU raced on (null: static pruning only)")
    static_sweep: str = required("the static sweep's run directory")
    note: str = doc("why only static pruning, or what cut the race", default="")
    race_plan: Json = doc("the race's plan: rounds, rungs, margin, level (null: not raced)")
    kernels: tuple[TunedKernel, ...] = required("every kernel's record")
    gpu_seconds: float = doc("GPU seconds of every race and proof", default=0.0)
    numerics: str | None = doc("the numerics gate: bitwise or tolerance")
    program: Json = doc("a program tune: the program, its metric and the static answers of its kernels")

    @classmethod
    def upgrade(cls, doc: dict, version: int, where: str) -> dict:
        if version == 1:  # layout 1 said its version as ``format``
            doc.pop("format", None)
        return doc
