"""The records of a program run with other kernels swapped in: ``apply.json`` (tuned kernels applied, A/B against
yours) and ``ab.json`` (a capture's name variants, A/B against the program's own)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxprobe.records.record import Json, Record, doc, required


@dataclass(frozen=True, kw_only=True)
class SwappedKernel(Record):
    """One kernel of the program in one arm: the cubin loaded in its place and the checks that it is the one meant."""

    entry: str = required("the entry the program compiled")
    name: str = required("the symbol the program loads: the tuned name, or (CuTe DSL) its own")
    cubin: str = required("the cubin loaded instead")
    ptx_sha256: str = required("the program's PTX of the kernel")
    ptxas_version: str = required("the ptxas release that assembled it")
    options: tuple[str, ...] = required("ptxas options besides the program's own")
    machine_code_sha256: str = required("the cubin's machine code (the name left out)")
    same_ptx_as_tuned: bool = required("the program's PTX is the one tune timed: its machine code must be tuned's")
    verified: bool = required("the cubin's entry is the name (and, with the same PTX, its code the tuned one)")
    compiled_as: str | None = doc("the name ptxas assembled it under (the tuned name)")
    change: str | None = doc("the tuned arm: the one-line change tune recommended")
    gain: Json = doc("the tuned arm: the gain tune predicted, with its interval")


@dataclass(frozen=True, kw_only=True)
class ApplyRecord(Record):
    """``ptxprobe apply`` with a program: the tuned kernels swapped in, its runs and its A/B against yours."""

    FILE = "apply.json"
    VERSIONED = True

    command: tuple[str, ...] = required("the program")
    rounds: int = required("A/B rounds (0: the program run once with the tuned kernels)")
    metric: str = required("the regular expression of the number it prints, or wall seconds")
    notes: tuple[str, ...] = doc("kernels not applied and why", default=())
    kernels: tuple[SwappedKernel, ...] = required("the tuned arm's kernels")
    yours: tuple[SwappedKernel, ...] = doc("your configuration's kernels (the yours and A/A arms)", default=())
    runs: tuple[Json, ...] = doc("every program run: arm, round, value, note", default=())
    comparisons: tuple[Json, ...] = doc("each arm against yours: ratio, interval, verdict, q-value", default=())
    calibration_failed: bool = doc("the A/A arm came out faster or slower than yours", default=False)
    prediction: Json = doc("whether the program bears out tune's predicted gain (one kernel swapped)")


@dataclass(frozen=True, kw_only=True)
class ProgramAB(Record):
    """``ptxprobe capture --rounds``: the program run with each name variant's kernels swapped in, A/B against its
    own."""

    FILE = "ab.json"
    VERSIONED = True

    command: tuple[str, ...] = required("the program")
    python: str | None = doc("the Python that ran it")
    arms: tuple[Json, ...] = required("each arm: label, name template, the kernels swapped")
    runs: tuple[Json, ...] = required("every program run: arm, round, value, note")
    comparisons: tuple[Json, ...] = required("each arm against the baseline: ratio, interval, verdict, q-value")
    calibration_failed: bool = required("the A/A arm came out faster or slower than the baseline")
    environment: Json = doc("the environment the program ran under")
    metric: str | None = doc("the regular expression of the number it prints, or wall seconds")
    ptxas: Json = doc("the ptxas that assembled the arms")
    rounds: int | None = doc("A/B rounds")
    interrupted: bool = doc("an interrupt (Ctrl-C) ended it: the runs that finished are kept", default=False)
