"""``ptxprobe reduce``: the smallest kernel whose machine code a name still changes, and what it is made of."""

from __future__ import annotations

import logging
import os
import shlex

from ptxprobe.cli import FOUND_DIFFERENCES, OK
from ptxprobe.cli.render import emit_json, say
from ptxprobe.core.errors import SpecError
from ptxprobe.reduce.remains import counted

log = logging.getLogger("ptxprobe")

def request_from_args(args):
    from ptxprobe.reduce.run import Request

    if args.input and (args.ptx or args.cu or args.cubin or args.triton or args.lib):
        raise SpecError("give one input: a registered kernel name or --ptx/--cu/--cubin/--triton/--lib, not both")
    try:
        flags = tuple(shlex.split(args.flags)) if args.flags is not None else None
    except ValueError as exc:
        raise SpecError(f"--flags {args.flags!r}: {exc}") from None
    kw = {"flags": flags} if flags is not None else {}
    return Request(arch=args.arch, out=args.out, kernel=args.input, ptx=args.ptx, cu=args.cu, cubin=args.cubin,
                   triton=args.triton, lib=args.lib, spec=args.spec, entry=args.entry, dtype=args.dtype,
                   head_dim=args.head_dim,
                   causal=args.causal, config=args.config, ptxas=args.ptxas, name=args.name, keep=args.keep,
                   jobs=args.jobs or os.cpu_count() or 1, ablate=args.ablate, timeout=args.timeout,
                   fresh=args.fresh, **kw)


def _progress(step) -> None:
    log.warning("  %s: %d instructions, %d lines (%d candidates tested, %.1f s)", step.pass_name, step.instructions,
                step.lines, step.tests, step.seconds)


def cmd_reduce(args) -> int:
    from ptxprobe.reduce.run import NO_DIFFERENCE, reduce_request

    req = request_from_args(args)
    progress = None if args.quiet_level or args.json else _progress
    if args.ladder is not None:
        return _ladder(args, req, progress)
    res = reduce_request(req, progress=progress)
    rec = res.record
    if args.json:
        emit_json({**rec, "out": str(res.out)})
        return OK if res.status == NO_DIFFERENCE else FOUND_DIFFERENCES
    cost = (f"{rec.get('ptxas_calls', 0)} ptxas calls ({rec.get('cache_hits', 0)} served by the cache), "
            f"{rec.get('wall_seconds', 0):.1f} s")
    if res.status == NO_DIFFERENCE:
        say(f"no difference to start from: {rec['renamed_name']} does not change {rec['input']}'s machine code "
            f"for {rec['arch']} with ptxas {rec['ptxas']['version']} ({rec['why']}{_keep_words(rec)}); nothing "
            f"to reduce ({cost})")
        return OK
    before, after = rec["before"], rec["after"]
    pair = rec.get("minimal_pair", {})
    deltas = ", ".join(f"{k} {v:+d}" for k, v in pair.get("deltas", {}).items()) or "same sizes, other code"
    say(f"reduced {rec['input']} ({rec['entry']}, {rec['arch']}, ptxas {rec['ptxas']['version']}) from "
        f"{before['instructions']} to {counted(after['instructions'])}: {after['in_words']}")
    say(f"  {rec['renamed_name']} still changes the code ({pair.get('verdict', '?')}: {deltas}){_keep_words(rec)}; "
        + ("1-minimal: no single removal the reducer knows keeps it" if rec.get("one_minimal") else "not 1-minimal"))
    say(f"  {rec.get('candidates', 0)} candidates, {cost}; {res.out / 'minimal.ptx'}, {res.out / 'reduce.json'}")
    for where, results in rec.get("ablation", {}).items():
        stops = [a["option"] for a in results if a["outcome"] == "name stops mattering"]
        said = ", ".join(stops) if stops else "none of the " + str(len(results)) + " options tried"
        say(f"  options that make the name stop mattering on the {where if where == 'input' else 'minimal kernel'}: "
            f"{said}")
    return FOUND_DIFFERENCES


def _keep_words(rec: dict) -> str:
    keep = rec["predicate"].get("keep")
    return f", keeping {keep}" if keep else ""


def _ladder(args, req, progress) -> int:
    from ptxprobe.reduce.ladder import parse_ladder, run_ladder
    from ptxprobe.reduce.run import DONE

    if args.keep is not None:
        raise SpecError("--ladder and --keep: give one (the ladder's levels are --keep expressions)")
    expr, thresholds = parse_ladder(args.ladder)
    doc = run_ladder(req, expr, thresholds, progress)
    if args.json:
        emit_json(doc)
    else:
        say(f"ladder of {expr} from {doc['input'].get('instructions')} instructions:")
        for lv in doc["levels"]:
            what = lv["keep"] or "plain predicate"
            if lv["status"] == DONE:
                say(f"  {what}: {counted(lv['instructions'])}: {lv['remains']} ({lv['ptxas_calls']} ptxas calls, "
                    f"{lv['wall_seconds']:.1f} s)")
            else:
                say(f"  {what}: no difference to start from ({lv['why']})")
    return FOUND_DIFFERENCES if any(lv["status"] == DONE for lv in doc["levels"]) else OK
