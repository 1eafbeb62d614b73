"""Commands over recorded runs and ptxas binaries: report, ptxas-scan, repro, bisect."""

from __future__ import annotations

import sys
from pathlib import Path

from ptxprobe.cli import FOUND_DIFFERENCES, INTERRUPTED, OK
from ptxprobe.cli.capture_cmd import show_program_ab
from ptxprobe.cli.render import emit_json, note, say, show, show_answer, show_speed, table
from ptxprobe.core.cluster import session_for
from ptxprobe.core.errors import SpecError
from ptxprobe.core.store import prepare_dir
from ptxprobe.static.experiment import check_arch
from ptxprobe.toolchain.tools import discover, select_ptxas


def _run_dir(path: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        why = "a file: give the directory a sweep wrote" if p.exists() else "no such directory"
        raise SpecError(f"{p}: not a run directory ({why})")
    return p


def _report_target(run: Path, out: str | None) -> None:
    """Before anything is written: RUN is a run directory (its manifest readable), and the report's directory
    can be made (not an existing file, not on a read-only file system)."""
    from ptxprobe.reports.html import no_results
    from ptxprobe.runs.rundir import RunDir

    rd = RunDir(run).static_part()
    if not rd.has_static:
        raise SpecError(no_results(RunDir(run) if rd.path != run else rd))
    rd.manifest  # noqa: B018 (a damaged manifest.json is said here)
    prepare_dir(Path(out) if out else run / "report")


def cmd_report(args) -> int:
    from ptxprobe.reports.html import build_report

    run = _run_dir(args.run_dir)
    out = Path(args.out) if args.out else run / "report"
    made = not out.exists()
    try:
        _report_target(run, args.out)
        res = build_report(run, args.out, notebook_html=args.notebook, sass=args.sass)
    except BaseException:  # a full disk, Ctrl-C: the directory made for the report goes too (nothing half-made)
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    recs = res["records"]
    if args.json:
        emit_json({"out_dir": str(res["out_dir"]), "records": recs, "pivot": res["answer"],
                   "program_ab": res["program_ab"]})
        return OK
    index = Path(res["out_dir"]) / "index.html"
    if res.get("speed"):  # a GPU run: the speed question first, then the machine code
        show_speed(f"does the name change speed? {run}", res["speed"], res["templates"])
    show_answer(f"does the name matter? {run}", res["answer"], res["templates"],
                f"open {index}" + ("" if args.sass else f"; ptxprobe report {run} --sass adds the SASS diffs"))
    if res["program_ab"]:
        show_program_ab(res["program_ab"], run / "ab")
    say(f"report: {index}", wrap=True)
    return OK


def _scan_targets(args) -> list[tuple[str, str]]:
    """(label, path) of the ptxas binaries to scan: given paths, --version matches, or every ptxas known."""
    if args.paths:
        missing = [p for p in args.paths if not Path(p).is_file()]
        if missing:
            raise SpecError(f"no such ptxas binary: {', '.join(missing)}")
        return [(p, p) for p in args.paths]
    tools = discover(("ptxas",))
    chosen = [t for v in args.version for t in select_ptxas("sm_90a", v, tools)] if args.version else tools
    if not chosen:
        raise SpecError("no ptxas found to scan")
    return [(f"{t.version} ({t.origin})", t.path) for t in chosen]


def cmd_ptxas_scan(args) -> int:
    from ptxprobe.toolchain.scan import across_versions, name_templates, scan

    results = [(label, scan(path)) for label, path in _scan_targets(args)]
    wanted_sites = {label: [s for s in r.sites if args.all or s.function in args.functions] for label, r in results}
    lits = sorted({s.literal for _, r in results for s in r.sites if s.function == "strstr"})
    if args.json:
        emit_json([{"ptxas": label, "path": r.path, "real_path": r.real_path, "sha256": r.sha256,
                    "seconds": r.seconds, "imports": r.imports, "note": r.note,
                    "sites": [s.to_json() for s in wanted_sites[label]]} for label, r in results])
        return OK
    for label, r in results:
        sites = wanted_sites[label]
        show(table(f"ptxas {label}: {len(sites)} compare sites with a literal ({r.seconds:.1f}s) {r.note}",
                   ["literal", "function", "arg", "literal @", "loaded @", "call @", "in function @"],
                   [[repr(s.literal), s.function, s.argument, hex(s.literal_address), hex(s.reference_address),
                     hex(s.call_address), hex(s.enclosing_function) if s.enclosing_function else "?"]
                    for s in sites]))
    if len(results) > 1:
        wanted = {s.literal for sites in wanted_sites.values() for s in sites}
        show(table("literals across ptxas versions", ["literal"] + [label for label, _ in results],
                   [[repr(t["literal"])] + ["yes" if t[label] else "-" for label, _ in results]
                    for t in across_versions(results) if t["literal"] in wanted]))
    say("name templates (--names-from-scan): " + ", ".join(name_templates(lits)))
    return OK


def cmd_repro(args) -> int:
    from ptxprobe.reports.repro import NOT_RUN, repro

    try:
        with session_for(args.executor, args.ray_address, args.jobs):
            res = repro(_run_dir(args.run_dir), args.out, jobs=args.jobs,
                        progress=not args.quiet_level and not args.json, executor=args.executor,
                        ray_address=args.ray_address)
    except KeyboardInterrupt:  # before the re-run began (or after it ended): nothing re-run to say anything of
        if args.json:
            emit_json({"ok": False, "interrupted": True, "exit_code": INTERRUPTED, "rerun": 0, "rows": [],
                       "runtime_rows": []})
        else:
            say("interrupted: nothing re-run")
        return INTERRUPTED
    rc = INTERRUPTED if res.interrupted else OK if res.ok else FOUND_DIFFERENCES
    total = len(res.rows) + len(res.runtime_rows)
    if args.json:
        emit_json({"ok": res.ok, "interrupted": res.interrupted, "exit_code": rc, "rerun": res.rerun,
                   "comparisons": total, "problems": res.problems, "notes": res.notes,
                   "runtime_note": res.runtime_note, "rows": [r.__dict__ for r in res.rows],
                   "runtime_rows": [r.__dict__ for r in res.runtime_rows], "between_run": res.between_run})
        return rc
    for p in res.problems:
        print(f"ptxprobe: environment: {p}", file=sys.stderr)
    for n in res.notes:
        print(f"ptxprobe: note: {n}", file=sys.stderr)
    shown = [r for r in res.rows if r.status != NOT_RUN] if res.interrupted else res.rows  # only what was re-run
    show(table(f"repro of {args.run_dir}", ["kernel", "arch", "ptxas", "name", "result", "recorded", "new", "why"],
               [[r.kernel, r.arch, r.ptxas_version, r.name, r.status, r.recorded_outputs, r.new_outputs, r.reason]
                for r in shown]))
    if res.runtime_rows and not res.interrupted or any(r.status != NOT_RUN for r in res.runtime_rows):
        show(table("runtime re-measured", ["kernel", "ptxas", "variant", "result", "why"],
                   [[r.kernel, r.ptxas_version, r.name, r.status, r.reason] for r in res.runtime_rows
                    if not res.interrupted or r.status != NOT_RUN]))
    if res.runtime_note:
        say(res.runtime_note)
    if res.interrupted:
        split = f"{len(res.diverged)} of them diverged" if res.diverged else "all of them as recorded"
        say(f"interrupted: {res.rerun} of {total} re-run ({split}); the rest was not re-checked, run repro again")
        return rc
    if res.ok:
        say(f"reproduced: {len(res.rows)} variant groups match the recorded results")
        return rc
    not_run = sum(1 for r in res.rows + res.runtime_rows if r.status == NOT_RUN)
    say(f"diverged: {len(res.diverged)} variant groups" + (f", {not_run} not re-run" if not_run else "")
        + f", {len(res.problems)} environment problems")
    return rc


def cmd_bisect(args) -> int:
    from ptxprobe.static.bisect import WEAK, bisect, transitions, weak_boundaries

    with session_for(args.executor, args.ray_address, args.jobs):
        steps = bisect(args.kernel, args.dtype, args.head_dim, args.causal, check_arch(args.arch), args.name,
                       versions=[v.strip() for v in args.versions.split(",") if v.strip()] if args.versions else None,
                       repeat=args.repeat, fetch=args.fetch, jobs=args.jobs, executor=args.executor,
                       ray_address=args.ray_address)
    if not steps:
        raise SpecError("no ptxas installed to bisect over (try --fetch or `ptxprobe toolchain install`)")
    trans = transitions(steps)
    weak = weak_boundaries(steps, trans)
    caveat = (f"caveat: the verdicts at {', '.join(s.ptxas_version for s in weak)} have confidence "
              f"{', '.join(f'{s.confidence:.3f}' for s in weak)} (below {WEAK}): too few assemblies to tell a "
              f"change from ptxas's own spread; run again with a larger --repeat before reading a release "
              f"boundary" if weak else None)
    if args.json:
        emit_json({"steps": [s.__dict__ for s in steps], "transitions": [t.__dict__ for t in trans],
                   "caveat": caveat})
        return FOUND_DIFFERENCES if trans else OK
    show(table(f"{args.name} on {args.kernel}/{args.dtype}/d{args.head_dim} for {args.arch}",
               ["ptxas", "verdict", "confidence", "registers baseline -> renamed"],
               [[s.ptxas_version, s.verdict, "" if s.confidence is None else f"{s.confidence:.3f}",
                 f"{list(s.baseline_registers)} -> {list(s.registers)}"] for s in steps]))
    tried = [s.ptxas_version for s in steps if s.differs is not None]
    if not trans:
        say(f"the name changes the code under none of the {len(tried)} versions answered ({', '.join(tried)})")
    for t in trans:
        say(f"{args.name}: {t.describe()}")
    if caveat:
        note(caveat)
    return FOUND_DIFFERENCES if trans else OK


def cmd_explain(args) -> int:
    from ptxprobe.explain.run import analyze, profile_run

    run = _run_dir(args.run_dir)
    if args.max_groups < 1:
        raise SpecError(f"--max-groups must be at least 1, got {args.max_groups}")
    if not args.analyze_only:
        profile_run(run, args.group, args.max_groups, args.timeout)
    doc = analyze(run)
    if args.json:
        emit_json(doc)
        return OK
    rows = []
    for g in doc["groups"]:
        top = sorted(g["stall_delta"].items(), key=lambda kv: -abs(kv[1]))[:3]
        t = g["timing"]
        rows.append([g["group_id"], g["variant"], "yes" if g["identical_code"] else "no",
                     _fmt_ratio(g["ncu_ratio_vs_baseline"]), _fmt_ratio(t.get("ratio_vs_baseline")),
                     f"{g['samples']['baseline']}->{g['samples']['variant']}",
                     ", ".join(f"{k.removeprefix('stall_')} {v:+d}" for k, v in top),
                     g["checks"]["instructions_beyond_noise"]])
    show(table(f"explain {run} -> {run}/explain.json",
               ["group", "variant", "same code", "ncu ratio", "timed ratio", "samples", "largest stall changes",
                "instr > noise"], rows))
    return OK


def _fmt_ratio(x) -> str:
    return "-" if x is None else f"{x:.4f}"
