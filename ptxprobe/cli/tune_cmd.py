"""``ptxprobe tune`` and ``ptxprobe apply``: the arguments as one plan, the plan run, its records rendered."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ptxprobe.cli import CHOICE_SLOWER, CHOICE_UNCONFIRMED, FOUND_DIFFERENCES, INTERRUPTED, OK, TOOL_FAILED
from ptxprobe.cli.capture_cmd import program_regime, say_contaminated
from ptxprobe.cli.render import emit_json, say, show, table
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.records.program import ApplyRecord, SwappedKernel
from ptxprobe.records.tuned import TunedDocument
from ptxprobe.runs.request import UserKernels
from ptxprobe.static.experiment import check_arch, parse_assignments
from ptxprobe.tune.space import PREFERENCES, parse_option_sets

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


def add_parsers(sub, formatter, common, seconds, at_least, regime_arg) -> None:
    """The two commands, registered beside the others (``cli.parser`` calls this)."""
    s = sub.add_parser("tune", help="the fastest name x ptxas release x options per kernel: pruned statically, "
                       "raced on the GPU, gated on numerics", description=TUNE_DESCRIPTION, formatter_class=formatter,
                       epilog=TUNE_EPILOG)
    s.set_defaults(func=cmd_tune)
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
    s.add_argument("--no-cache", action="store_true", help="do not read or write the content-addressed cache")
    program_args(s, seconds, at_least, rounds=10,
                 what="then run this program with the tuned configuration, A/B against yours (as `apply`)")
    common(s, "print tuned.json as one JSON document")

    s = sub.add_parser("apply", help="run a program with the tuned configuration swapped in (or print the source "
                       "change)", description="run a program with the tuned configuration swapped in",
                       formatter_class=formatter, epilog=APPLY_EPILOG)
    s.set_defaults(func=cmd_apply)
    s.add_argument("tune_dir", metavar="DIR", help="a `ptxprobe tune` output dir (its tuned.json)")
    s.add_argument("--out", "-o", help="where the capture, cubins and apply.json go (default: DIR/apply)")
    program_args(s, seconds, at_least, rounds=0,
                 what="the program to run; without one the source changes are printed")
    common(s, "print apply.json as one JSON document")


def _code_of(swap: SwappedKernel) -> str:
    """The name the swapped code was assembled under; a CuTe DSL kernel's is loaded under its own."""
    compiled = swap.compiled_as or swap.name
    return compiled if compiled == swap.name else f"{compiled} (loaded as its own name)"


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


def cmd_tune(args) -> int:
    """Plan (bad input refused first), run, render tuned.json; the exit code says whether to change anything."""
    from ptxprobe.tune.pipeline import tune
    from ptxprobe.tune.program import ProgramRace, program_race_plan
    from ptxprobe.tune.race import RacePlan
    from ptxprobe.tune.run import TuneRequest

    program_settings(args)
    kernels = UserKernels(ptx=tuple(args.ptx), cubin=tuple(args.cubin), cu=tuple(args.cu), triton=args.triton,
                          spec=args.spec, entry=args.entry)
    try:
        race = RacePlan(first_rounds=args.first_rounds, max_rounds=max(args.max_rounds, args.first_rounds),
                        target_halfwidth=args.target, prefer=args.prefer)
    except ValueError as exc:
        raise SpecError(str(exc)) from exc
    req = TuneRequest(out=args.out, experiment=args.experiment, axes=parse_assignments(args.set), kernels=kernels,
                      names=tuple(n.strip() for n in args.names.split(",") if n.strip()) if args.names else None,
                      ptxas=tuple(p.strip() for p in args.ptxas.split(",")) if args.ptxas is not None else None,
                      option_sets=parse_option_sets(args.options), numerics=args.numerics, race=race, run=args.run,
                      jobs=args.jobs, timeout=args.timeout, use_cache=not args.no_cache, fresh=args.fresh,
                      regime=args.regime)
    quiet = bool(args.quiet_level) or args.json
    notify = (lambda text: None) if quiet else (lambda text: print(f"ptxprobe: {text}", file=sys.stderr))
    if args.install:
        from ptxprobe.tune.run import install_missing

        install_missing(req.ptxas, notify=notify)
    progress = not quiet and sys.stderr.isatty()
    program = (ProgramRace(tuple(args.program), args.metric, args.program_timeout,
                           program_race_plan(args.rounds, args.prefer), arch=args.arch) if args.program else None)
    outcome = tune(req, program, progress=progress, notify=notify)
    doc = outcome.doc
    if outcome.static_only_reason:
        print(f"ptxprobe: {outcome.static_only_reason}: nothing was timed; tuned.json lists the distinct codes a GPU "
              "would race", file=sys.stderr)
    elif outcome.interrupted:
        print(f"ptxprobe: {doc.note} ({outcome.path})", file=sys.stderr)
    for e in outcome.emit_errors:
        print(f"ptxprobe: could not build {e}", file=sys.stderr)
    found = any(k.best_is_yours is False for k in doc.kernels)
    proof = bool(args.program) and found and not outcome.interrupted
    if args.json and not proof:
        emit_json(doc.to_json())
    elif not args.json:
        show_tuned(doc, outcome.path)
    if outcome.interrupted:
        return INTERRUPTED
    if outcome.emit_errors or any(k.user is None for k in doc.kernels):
        return TOOL_FAILED
    if proof:  # the program with the recommendation, A/B against yours
        rc = run_program_tuned(doc, list(args.program), unused_dir(outcome.path.parent, "apply"), args,
                               tuned=doc.to_json())
        return rc if args.rounds or rc != OK else tune_exit(doc)  # run once, no A/B: tune's own answer
    if args.program:
        print("ptxprobe: the program was not run: " + (f"nothing was raced ({outcome.static_only_reason})"
              if outcome.static_only_reason else "your configuration stays"), file=sys.stderr)
    return tune_exit(doc)


def tune_exit(doc: TunedDocument) -> int:
    """The exit code of tune's answer (``answer.outcome_of``): 1 confirmed, 6 slower, 5 unconfirmed, else 0."""
    from ptxprobe.tune.answer import outcome_of

    return exit_of_outcome(outcome_of(doc))


def exit_of_outcome(outcome: str | None) -> int:
    """What a proof says of the race's choice (``tune.proof``'s outcomes) as an exit code, for tune's answer and
    apply's A/B alike: 1 confirmed, 6 slower, 5 unconfirmed, 0 nothing to say."""
    from ptxprobe.tune.proof import CONFIRMED, REFUTED, UNCONFIRMED

    return {CONFIRMED: FOUND_DIFFERENCES, REFUTED: CHOICE_SLOWER, UNCONFIRMED: CHOICE_UNCONFIRMED}.get(outcome, OK)


def show_tuned(doc: TunedDocument, path: Path) -> None:
    """The one-screen answer: per kernel the best, its gain [interval], the runner-up, codes timed of candidates."""
    from ptxprobe.reports.gpu_section import regime_text
    from ptxprobe.stats.regime import BURST, PROGRAM, SUSTAINED, Regime
    from ptxprobe.tune.answer import table_rows

    raced_in_program = doc.program and doc.race_plan  # the program had the GPU, not ptxprobe
    gpu = (doc.gpu or {}).get("gpu") or ("raced inside the program" if raced_in_program
                                                else "no GPU: static pruning only")
    regimes = [Regime.from_fields(k.regime) if k.regime else None for k in doc.kernels]
    cells = [regime_text(r) if r else ("the program's own runs" if raced_in_program and k.proof else "-")
             for r, k in zip(regimes, doc.kernels, strict=True)]
    show(table(f"tuned ({gpu}; gain = your time / its time, > 1 faster) -> {path}",
               ["kernel", "arch", "best", "gain [interval]", "regime of the proof", "runner-up", "codes", "GPU s"],
               [[*r[:4], cell, *r[4:]] for r, cell in zip(table_rows(doc), cells, strict=True)]))
    measured = {r.regime for r in regimes if r} - {PROGRAM}
    if measured:  # which regime the gains hold in, and the other offered (a program's runs have no other)
        other = BURST if measured == {SUSTAINED} else SUSTAINED
        say(f"the proofs ran in the {' and '.join(sorted(measured))} regime; --regime {other} measures "
            + ("each arm held alone for seconds at the card's power limit (what a long job sees)" if other == SUSTAINED
               else "short interleaved bursts under one clock (what the code does per cycle)"))
    for k in doc.kernels:
        if k.user is None:
            say(f"{k.kernel} {k.arch}: your own configuration did not assemble; see {doc.static_sweep}")
        elif k.change and not k.best_is_yours:
            say(f"{k.kernel}: {k.change}")
            if k.fastest:
                f = k.fastest
                say(f"  (the fewest changes among {len(k.tied or ())} the race could not tell apart; the fastest "
                    f"estimate, {f['label']} at {f['ratio']:.4f}, is `--prefer fastest`)")
    reasons: dict[str, int] = {}
    for k in doc.kernels:
        for p in k.pruned or ():
            reasons[p["reason"]] = reasons.get(p["reason"], 0) + 1
    if reasons:
        say("pruned: " + ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) + f" ({path} says which)")


def cmd_apply(args) -> int:
    """Without a program: the source changes. With one: the program run with the tuned kernels swapped in, and
    with --rounds its A/B against your configuration."""
    from ptxprobe.tune.answer import read_tuned
    from ptxprobe.tune.apply import changes

    program_settings(args)
    doc = read_tuned(args.tune_dir)
    argv = list(args.program)
    if not argv:
        rows = changes(doc)
        if not rows:
            raise SpecError(f"{args.tune_dir}: tuned.json holds no raced kernel (static pruning only): nothing to "
                            "apply; run `ptxprobe tune` on a GPU")
        if args.json:
            emit_json({"changes": rows})
        else:
            show(table("the change per kernel", ["kernel", "arch", "change"],
                       [[r["kernel"], r["arch"], r["change"]] for r in rows]))
        return OK
    out = Path(args.out) if args.out else unused_dir(Path(args.tune_dir), "apply")
    return run_program_tuned(doc, argv, out, args)


def unused_dir(parent: Path, stem: str) -> Path:
    """``parent/stem``, or ``stem-2``, ``stem-3``... where an earlier apply (or tune's proof) left its record."""
    from ptxprobe.tune.apply import APPLIED

    n, path = 1, parent / stem
    while (path / APPLIED).exists():
        n += 1
        path = parent / f"{stem}-{n}"
    return path


def run_program_tuned(doc: TunedDocument, argv: list[str], out: Path, args, tuned: dict | None = None) -> int:
    """The program run with the tuned kernels swapped in (``--rounds``: A/B against yours and an A/A copy), its
    record rendered (under --json with ``tuned``, tune's answer, in the same document); the exit code is the
    program's verdict."""
    from ptxprobe.tune.apply import APPLIED, apply_program

    quiet = bool(args.quiet_level) or args.json
    rec = apply_program(doc, argv, out, rounds=args.rounds, metric=args.metric, timeout=args.program_timeout,
                        cache=Cache(), log=(lambda m: None) if quiet else say, arch=args.arch)
    if args.json:
        emit_json({**rec.to_json(), "tuned": tuned} if tuned else rec.to_json())
    else:
        show(table(f"applied to {' '.join(argv)[:60]} -> {out / APPLIED}",
                   ["entry", "code of", "ptxas", "options", "checked", "change"],
                   [[k.entry, _code_of(k), k.ptxas_version, " ".join(k.options) or "default",
                     "name+hash" if k.same_ptx_as_tuned else "name (program's own PTX)", k.change]
                    for k in rec.kernels]))
        for c in rec.comparisons:
            if "ratio" in c:
                say(f"{c['arm']} vs yours: {c['ratio']:.4f} [{c['low']:.4f}, {c['high']:.4f}] {c['verdict']} "
                    f"({c['rounds']} rounds, p {c['p_value']:.3f}; {program_regime(c)})")
            else:
                say(f"{c['arm']} vs yours: {c['verdict']} ({c['rounds']} rounds)")
        say_contaminated(rec.comparisons)
        pred = rec.prediction
        if pred:
            p, m = pred["predicted"], pred["measured"]
            where = ("inside" if pred["inside"] else "outside") + " the predicted interval" + (
                "" if pred["inside"] else (", the intervals overlap" if pred["overlap"] else ", no overlap"))
            say(f"predicted by tune {p['ratio']:.4f} [{p['low']:.4f}, {p['high']:.4f}]; the program "
                f"{m['ratio']:.4f}: {where} ({pred['difference']:+.2%})")
    if rec.calibration_failed:
        print("ptxprobe: CALIBRATION FAILED: the A/A arm differs from yours or had too few rounds; the A/B is not "
              "trusted", file=sys.stderr)
    return proof_exit(rec)


def proof_exit(rec: ApplyRecord) -> int:
    """apply.json's exit code: 3 when the A/A calibration failed; with an A/B, 1 when the tuned program is faster
    beyond the margin, 6 slower beyond it, 5 anything else (not confirmed); 0 when it ran once."""
    from ptxprobe.tune.proof import outcome_of_verdict

    if rec.calibration_failed:
        return TOOL_FAILED
    tuned = next((c for c in rec.comparisons if c["arm"] == "tuned"), None)
    return OK if tuned is None else exit_of_outcome(outcome_of_verdict(tuned["verdict"]))
