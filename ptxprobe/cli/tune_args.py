"""The arguments of ``tune`` and ``apply``, and the program options ``capture`` shares with them: what building the
parser needs, without the commands' own modules (every ``ptxprobe`` call builds the parser)."""

from __future__ import annotations

import argparse
import re

from ptxprobe.core.errors import SpecError
from ptxprobe.static.experiment import check_arch
from ptxprobe.tune.space import PREFERENCES

NO_CACHE_HELP = ("do not read or write results in the content-addressed cache (facts about the tools and the "
                 "registered kernels, keyed by their hashes, are still remembered there)")

TUNE_DESCRIPTION = """the fastest entry name x ptxas release x ptxas options per kernel: every candidate assembled
once (OUT/static), candidates with the same machine code pruned, the rest raced on the GPU against your own
configuration with the calibrated paired timing and gated on their numbers; then, with a program after --, that
program run with the recommendation, A/B against yours. A program given alone (no sources) is tuned by its own
measure: its captured kernels swept and pruned, each raced inside the program (docs/tune.md)"""

TUNE_EPILOG = """exit codes: 0 tuned (or pruned without a GPU) and your configuration stays: nothing raced faster;
1 confirmed: for some kernel the race's choice was faster than yours beyond the 0.5 % margin again on fresh rounds
(the proof), and is recommended; 5 unconfirmed: the race chose a configuration but the fresh rounds did not confirm
it (yours stays, tuned.json says why); 6 slower: the fresh rounds found the choice slower than yours; 2 bad usage or
input (an empty search space, an unknown gate); 3 a tool failed (your own configuration did not assemble, a kernel
did not build); 4 internal error; 130 interrupted. tuned.json is in --out. With `-- python prog.py` and a
recommendation, the program then runs with it swapped in, A/B against yours (--rounds, as `apply`; --json prints
apply.json with tuned.json inside), and the exit code is that A/B's verdict on the tuned program, as apply's (not the
program's own exit status); with --rounds 0 it runs once and the code stays tune's"""

APPLY_EPILOG = """exit codes: 0 applied (run once, no --rounds); with --rounds the A/B of the tuned program against
yours decides: 1 confirmed (faster beyond the 0.5 % margin), 5 not confirmed (equivalent, negligible, inside or
across the margin, inconclusive), 6 slower; 2 bad usage or input (no tuned.json, nothing to apply, an unknown
--arch, a kernel compiled for another target than it was tuned for); 3 the program failed (its own words) or printed
no --metric number, compiled none of the tuned kernels, or the A/A calibration failed; 4 internal error"""


def add_parsers(sub, formatter, common, seconds, at_least, regime_arg, command) -> None:
    """The two commands, registered beside the others (``cli.parser`` calls this)."""
    s = sub.add_parser("tune", help="the fastest name x ptxas release x options per kernel: pruned statically, "
                       "raced on the GPU, gated on numerics", description=TUNE_DESCRIPTION, formatter_class=formatter,
                       epilog=TUNE_EPILOG)
    s.set_defaults(func=command("cmd_tune"))
    s.add_argument("--out", "-o", required=True, help="output dir: tuned.json, the static sweep in OUT/static")
    s.add_argument("--experiment", "-e", default="default",
                   help="registered kernels and [run] problem sizes, as rename-sweep takes them")
    s.add_argument("--set", "-s", action="append", metavar="AXIS=V1,V2", default=[],
                   help="override an axis (kernels, dtypes, archs, ...; not names/ptxas/flags: see below)")
    s.add_argument("--ptx", action="append", metavar="FILE", default=[], help="a PTX file of your own (repeatable)")
    s.add_argument("--cubin", action="append", metavar="FILE", default=[], help="a cubin with embedded PTX")
    s.add_argument("--cu", action="append", metavar="FILE", default=[], help="CUDA C++ source (nvcc's ptxas is yours)")
    s.add_argument("--entry", help="with --ptx/--cubin/--cu: the kernel to take")
    s.add_argument("--triton", metavar="FILE.py:FUNCTION", help="a triton.jit or gluon.jit function; needs --spec")
    s.add_argument("--spec", help="the kernel spec (docs/spec.md); its [launch] table times it on the GPU")
    s.add_argument("--names", help="name templates, yours ({base}) first (default: {base}, the name with the trigger "
                                   "and the trigger-free spelling)")
    s.add_argument("--ptxas", help="ptxas releases besides yours (Triton's, or nvcc's for --cu): comma list of "
                                   "all, newest, VERSION, PATH (default: all installed)")
    s.add_argument("--install", action="store_true",
                   help="first install the --ptxas releases that are not installed (from their pip wheels)")
    s.add_argument("--options", metavar="'default;-O2;...'",
                   help="ptxas option sets on top of your flags, ';'-separated (default: 'default;-O2'); a set a "
                        "release's --help lacks is pruned there as not applicable")
    s.add_argument("--numerics", choices=("bitwise", "tolerance"), default="bitwise",
                   help="gate: outputs bitwise equal to your configuration's, or within the spec's tolerance of the "
                        "float64 reference")
    s.add_argument("--first-rounds", type=at_least(3), default=10, help="rounds of the race's first rung")
    s.add_argument("--max-rounds", type=at_least(3), default=80, help="rounds per contender at most")
    s.add_argument("--target", type=float, default=0.002, help="the winner's interval half-width to reach")
    s.add_argument("--prefer", choices=PREFERENCES, default=PREFERENCES[0],
                   help="among configurations the race cannot tell from its leader: the fewest changes from yours "
                        "(a rename or an option before another ptxas release), or the fastest estimate")
    s.add_argument("--no-run", dest="run", action="store_false", default=None, help="static pruning only")
    regime_arg(s, "the proof's regime (the race itself runs in bursts)")
    s.add_argument("--jobs", "-j", type=at_least(1), help="parallel ptxas processes (default: all cores)")
    s.add_argument("--timeout", type=seconds, default=600.0, help="seconds before a ptxas run counts as hung")
    s.add_argument("--fresh", action="store_true", help="discard the static sweep's earlier results")
    s.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    program_args(s, seconds, at_least, rounds=10,
                 what="then run this program with the tuned configuration, A/B against yours (as `apply`)")
    common(s, "print tuned.json as one JSON document")

    s = sub.add_parser("apply", help="run a program with the tuned configuration swapped in (or print the source "
                       "change)", description="run a program with the tuned configuration swapped in",
                       formatter_class=formatter, epilog=APPLY_EPILOG)
    s.set_defaults(func=command("cmd_apply"))
    s.add_argument("tune_dir", metavar="DIR", help="a `ptxprobe tune` output dir (its tuned.json)")
    s.add_argument("--out", "-o", help="where the capture, cubins and apply.json go (default: DIR/apply)")
    program_args(s, seconds, at_least, rounds=0,
                 what="the program to run; without one the source changes are printed")
    common(s, "print apply.json as one JSON document")


def program_arch(text: str) -> str:
    """``--arch`` of a program (capture, tune, apply): a target ptxprobe knows, refused before the program runs."""
    try:
        return check_arch(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def metric_regex(text: str) -> str:
    """``--metric``: a regular expression with one group at most (the number is the group, or the whole match)."""
    try:
        groups = re.compile(text).groups
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression ({exc}): {text!r}") from None
    if groups > 1:
        raise argparse.ArgumentTypeError(f"one group (the number) at most, got {groups}: {text!r}")
    return text


def rounds_for_verdicts(text: str) -> int:
    """``--rounds``: 0 (run the program once) or enough rounds for a verdict (``capture.ab.MIN_ROUNDS``)."""
    from ptxprobe.capture.ab import MIN_ROUNDS

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n != 0 and n < MIN_ROUNDS:
        raise argparse.ArgumentTypeError(f"0 (run the program once) or at least {MIN_ROUNDS} (a verdict needs "
                                         f"them), got {n}")
    return n


def program_settings(args) -> None:
    """``--rounds``/``--metric`` without a program would be ignored: refused; the default rounds filled in."""
    if not args.program and (args.rounds is not None or args.metric or args.arch):
        raise SpecError("--rounds, --metric and --arch go with a program: put it after --, e.g. -- python prog.py")
    if args.rounds is None:
        args.rounds = args.default_rounds


def program_args(s, seconds, at_least, *, rounds: int, what: str) -> None:
    """The program a tuned configuration is applied to, and its A/B (``apply``; ``tune`` ends with it)."""
    s.add_argument("program", nargs="*", default=[], metavar="-- CMD", help=f"after --: {what}")
    s.add_argument("--rounds", type=rounds_for_verdicts, default=None,
                   help=f"with a program: 0 runs it once with the tuned kernels; N: A/B of N rounds against your "
                        f"configuration and an A/A copy (verdicts need at least 6; default {rounds})")
    s.set_defaults(default_rounds=rounds)
    s.add_argument("--metric", metavar="REGEX", type=metric_regex,
                   help="with a program: measure a number it prints (smaller is better) instead of its wall time")
    s.add_argument("--program-timeout", type=seconds, default=1800.0, help="seconds the program may run")
    s.add_argument("--arch", type=program_arch,
                   help="with a program: its CuTe DSL target, pinned (CUTE_DSL_ARCH) so it compiles without a GPU "
                        "(an export_to_c of the tuned code on a build machine); else the DSL asks the GPU")

