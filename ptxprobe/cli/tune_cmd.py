"""``ptxprobe tune`` and ``ptxprobe apply``: the arguments as one plan, the plan run, its records rendered."""

from __future__ import annotations

import sys
from pathlib import Path

from ptxprobe.cli import CHOICE_SLOWER, CHOICE_UNCONFIRMED, FOUND_DIFFERENCES, INTERRUPTED, OK, TOOL_FAILED
from ptxprobe.cli.capture_cmd import program_regime, say_contaminated
from ptxprobe.cli.render import emit_json, say, show, table
from ptxprobe.cli.tune_args import program_settings
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.records.program import ApplyRecord, SwappedKernel
from ptxprobe.records.tuned import TunedDocument
from ptxprobe.runs.request import UserKernels
from ptxprobe.static.experiment import parse_assignments
from ptxprobe.tune.space import parse_option_sets


def _code_of(swap: SwappedKernel) -> str:
    """The name the swapped code was assembled under; a CuTe DSL kernel's is loaded under its own."""
    compiled = swap.compiled_as or swap.name
    return compiled if compiled == swap.name else f"{compiled} (loaded as its own name)"


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
