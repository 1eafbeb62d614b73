"""One ``tune``, whatever its subject: a program given alone is tuned from the kernels it compiles, raced inside it
(``tune.program``); sources or an experiment are tuned from their specs on the GPU (``tune.run``), a program beside
them only running the proof after. Both share the static sweep and pruning (``run.static_pruning``) and the last
stage (``run.finish``); which racer runs is decided here, from the request, not by the command line."""

from __future__ import annotations

from ptxprobe.core.errors import SpecError
from ptxprobe.runs.request import UserKernels
from ptxprobe.tune.program import ProgramRace, run_program_tune
from ptxprobe.tune.run import TuneOutcome, TuneRequest, plan_tune, run_tune


def program_is_subject(req: TuneRequest) -> bool:
    """A program with no sources, experiment or axes beside it is what is tuned (its own kernels)."""
    return req.kernels == UserKernels() and req.experiment == "default" and not req.axes


def tune(req: TuneRequest, program: ProgramRace | None = None, progress: bool = False,
         notify=lambda text: None) -> TuneOutcome:
    """Plan (bad input refused first) and run one tune; tuned.json written. ``program``: the command after ``--``,
    its measure and race (the subject when given alone, else the proof's program, run by the caller after)."""
    if program is not None and program_is_subject(req):
        if req.regime:
            raise SpecError("--regime: a program tuned alone is measured by its own runs, each a whole program run "
                            "(the regime it reports is `program`); --regime applies to kernels tuned from sources")
        return run_program_tune(req, program, progress=progress, notify=notify)
    if program is not None and program.arch:
        raise SpecError("--arch pins the target of a program tuned alone; with sources or an experiment use "
                        "-s archs=...")
    if program is not None:  # sources or axes given beside the program: the program is the proof, not the subject
        notify("tuning the sources and experiment given; the program after -- only runs the proof (give the "
               "program alone to tune its own kernels)")
    return run_tune(plan_tune(req), progress=progress, notify=notify)
