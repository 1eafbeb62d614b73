"""``ptxprobe rename-sweep``: the arguments as a request, its plan run, the answer first (then what ran)."""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ptxprobe.cli import FOUND_DIFFERENCES, INTERRUPTED, OK, TOOL_FAILED
from ptxprobe.cli.render import emit_json, fmt_set, note, say, show, show_answer, show_summary, table
from ptxprobe.core.cache import Cache
from ptxprobe.core.cluster import session_for
from ptxprobe.core.display import problem_label
from ptxprobe.core.errors import NoGpu
from ptxprobe.core.store import CALIBRATION, read_run_json
from ptxprobe.ptx.labels import table_names
from ptxprobe.runs.request import SweepPlan, SweepRequest, UserKernels, plan_sweep
from ptxprobe.sources import left_out, left_out_text
from ptxprobe.sources.library_notes import library_notes
from ptxprobe.static.experiment import parse_assignments
from ptxprobe.static.verdicts import MANY_KERNELS, NO, ONLY_ONE_NAME, YES, pivot, summarize, variant_label, variant_of

log = logging.getLogger("ptxprobe")


def request_from_args(args) -> SweepRequest:
    """rename-sweep's arguments as the request the plan is made from (the view's options stay here)."""
    kernels = UserKernels(ptx=tuple(args.ptx), cubin=tuple(args.cubin), cu=tuple(args.cu), triton=args.triton,
                          spec=args.spec, entry=args.entry, lib=tuple(args.lib))
    return SweepRequest(experiment=args.experiment, axes=parse_assignments(args.set or ()), kernels=kernels,
                        names_from_scan=args.names_from_scan, out=args.out, jobs=args.jobs, timeout=args.timeout,
                        use_cache=not args.no_cache, fresh=args.fresh, executor=args.executor,
                        ray_address=args.ray_address, run=args.run, explain=args.explain, regime=args.regime)


@dataclass(frozen=True)
class View:
    """How the answer is shown: JSON instead of tables, quiet, the per-variant table too."""

    json: bool = False
    quiet: bool = False
    details: bool = False


def cmd_rename_sweep(args) -> int:
    return run_request(request_from_args(args), View(args.json, bool(args.quiet_level), args.details))


def run_request(req: SweepRequest, view: View) -> int:
    """Plan the sweep (bad input refused before anything runs), then run it inside one executor session."""
    plan = plan_sweep(req)
    with session_for(req.executor, req.ray_address, req.jobs):
        return _sweep_and_time(plan, view)


def _say_libraries(libraries: list) -> None:
    """What a library's rows are (and are not) made of, before they are made; a wheel of many libraries, --entry
    choosing in a few: the rest counted."""
    unchosen = [lib for lib in libraries if lib.ptx_modules and not lib.modules]
    for lib in libraries:
        if lib not in unchosen or len(unchosen) == 1:
            print(f"ptxprobe: {lib.line()}", file=sys.stderr)
    if len(unchosen) > 1:
        print(f"ptxprobe: {len(unchosen)} other libraries hold no kernel --entry chose", file=sys.stderr)


def _sweep_notes(plan: SweepPlan, outcome, answer: list[dict]) -> list[str]:
    """The notes under a sweep's answer: templates that named a kernel once (said on stderr, not silent), options a
    release lacks, where --cu files were assembled, lowered .version lines."""
    alone = sorted({p["kernel"] for p in answer if p.get("not_compared") == ONLY_ONE_NAME})
    if alone:  # templates that give one name (a kernel plan_sweep could not know before building it)
        print(f"ptxprobe: names: the templates {', '.join(plan.experiment.names)} give one name to "
              f"{', '.join(alone)}: nothing to compare it with; give templates that make different names",
              file=sys.stderr)
    na = sorted({(r["ptxas_version"], r["error"]) for r in outcome.rows if r["status"] == "unsupported_option"})
    notes = [f"not applicable: {why}" for _, why in na]  # this release lacks an option another one of the sweep has
    if plan.nvcc_assembles:
        notes.append("note: --cu files are assembled by the ptxas of the CUDA toolkit whose nvcc compiles them; "
                     "-s ptxas=triton,newest,VERSION for others")
    return notes + [f"note: {n}" for n in sorted({r["note"] for r in outcome.rows if r.get("note")})]


def _timed(plan: SweepPlan, view: View, doc: dict, rc: int) -> int:
    """The sweep's names timed on the GPU (and profiled with --explain) into ``doc``; the exit code after it: a
    missing GPU or a failed calibration is a tool failure, the static answer standing."""
    try:
        runtime = _runtime(plan, view)
    except NoGpu as exc:
        print(f"ptxprobe: --run: {exc} (the static answer stands; nothing was timed)", file=sys.stderr)
        doc["runtime_error"] = f"NoGpu: {exc}"
        return TOOL_FAILED
    if runtime is None:
        return rc
    doc["runtime"], doc["calibration"] = runtime
    if not doc["calibration"].get("passed", True):
        rc = TOOL_FAILED  # the measurement failed its own check: its verdicts are not to be trusted
    if plan.request.explain:
        from ptxprobe.explain.run import analyze, profile_run

        profile_run(plan.out, [], timeout=plan.request.timeout)
        doc["explain"] = analyze(plan.out)
        say(f"explain: {len(doc['explain']['groups'])} comparisons in {plan.out}/explain.json")
    return rc


def _sweep_and_time(plan: SweepPlan, view: View) -> int:
    """The static sweep, its answer, and (with a GPU) the timed runs: one Ray session around both."""
    from ptxprobe.static.sweep import run_sweep

    exp, out, req = plan.experiment, plan.out, plan.request
    left = left_out(exp)
    if left:  # a narrowed experiment runs what supports it: what it leaves out is said first, on stderr
        print(f"ptxprobe: left out (not supported by the kernel): {left_out_text(left)}", file=sys.stderr)
    libraries = library_notes(exp, Cache(enabled=req.use_cache))
    _say_libraries(libraries)
    outcome = run_sweep(exp, out, jobs=req.jobs, cache=Cache(enabled=req.use_cache), timeout=req.timeout,
                        progress=not view.quiet and not view.json and sys.stderr.isatty(), argv=sys.argv,
                        fresh=req.fresh, executor=req.executor, ray_address=req.ray_address)
    summary = summarize(outcome.rows)
    answer = pivot(summary, list(exp.names), outcome.interrupted)
    failed = outcome.failed
    doc = {"experiment": exp.name, "out_dir": str(out), "pivot": answer, "summary": summary,
           "failures": _failure_records(failed), "emit_errors": outcome.emit_errors,
           "interrupted": outcome.interrupted, "left_out": outcome.left_out}
    if libraries:
        doc["libraries"] = [{**asdict(n), "note": n.line()} for n in libraries]
    if not view.json:
        _say_answer(exp, out, outcome, answer, view.details and summary)
    _report_failures(failed, outcome.emit_errors)
    doc["notes"] = notes = _sweep_notes(plan, outcome, answer)
    if not view.json:
        for line in notes:
            note(line)
    if outcome.interrupted:
        if view.json:
            emit_json(doc)
        return INTERRUPTED
    differs = any(p["name_matters"] for p in answer)
    compared = any(p["answer"] in (YES, NO) for p in answer)  # 0 says "nothing differs" only of what was compared
    rc = TOOL_FAILED if failed or outcome.emit_errors or not compared else (FOUND_DIFFERENCES if differs else OK)
    if req.run is not False:
        rc = _timed(plan, view, doc, rc)
    if view.json:
        emit_json(doc)
    return rc


def _say_answer(exp, out: Path, outcome, answer: list[dict], details: list[dict] | None) -> None:
    """The one-screen answer, then what was done and which files hold it (only files that exist)."""
    steps = ("" if details else "--details (every kernel and variant), ") + f"ptxprobe report {out} (HTML), --run on " \
        "a GPU (speed)"
    if len({p["kernel"] for p in answer}) > MANY_KERNELS and not details:
        show_summary(f"does the name matter? '{exp.name}' -> {out}", answer, list(exp.names), steps)
    elif answer:
        show_answer(f"does the name matter? '{exp.name}' -> {out}", answer, list(exp.names), steps)
    if details:
        show(_details_table(details))
    files = [str(out / f) for f in ("results.parquet", "variants.jsonl") if (out / f).exists()][:1]
    where = f"; results in {files[0]}" if files else ""
    if outcome.interrupted:
        todo = "" if outcome.emitted_all else f" planned so far ({outcome.to_emit} kernel builds not started)"
        note(f"interrupted: {len(outcome.rows)} of {outcome.planned} done{todo}; run again to resume{where}")
        return
    fresh = outcome.ran - outcome.from_cache
    made = f"{fresh} assembled" + (f", {outcome.from_cache} from the cache" if outcome.from_cache else "")
    say(f"{made}, {outcome.skipped} already done, {outcome.wall_seconds:.1f}s wall, "
        f"{outcome.ptxas_seconds:.1f}s ptxas{where}", wrap=True)


def _failure_records(failed: list[dict]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for r in failed:
        key = (r["kernel"], r["arch"], r["ptxas_version"], r["ptxas_flags"], variant_of(r))
        seen.setdefault(key, {"kernel": r["kernel"], "arch": r["arch"], "ptxas_version": r["ptxas_version"],
                              "ptxas_flags": r["ptxas_flags"], "name": variant_label(r), "status": r["status"],
                              "error": r["error"]})
    return list(seen.values())


def _report_failures(failed: list[dict], emit_errors: list[str]) -> None:
    """Every failure on stderr with the first lines of its tool's message: a failure never looks like success."""
    recs = _failure_records(failed)
    for r in recs[:20]:
        first = [ln for ln in (r["error"] or "").splitlines() if ln.strip()][:3]
        print(f"ptxprobe: {r['status']}: {r['kernel']} as {r['name']} on {r['arch']} (ptxas {r['ptxas_version']}"
              f"{' ' + r['ptxas_flags'] if r['ptxas_flags'] else ''})", file=sys.stderr)
        for ln in first:
            print(f"    {ln}", file=sys.stderr)
    if len(recs) > 20:
        print(f"ptxprobe: ... and {len(recs) - 20} more failed variants (see results.jsonl)", file=sys.stderr)
    for e in emit_errors:
        print(f"ptxprobe: could not build {e}", file=sys.stderr)


def _details_table(summary: list[dict]):
    short = table_names([s["kernel"] for s in summary], 40)
    rows = [[short[s["kernel"]], s["arch"], s["ptxas_version"], variant_label(s), f"{s['ok']}/{s['runs']}",
             s["distinct_outputs"],
             fmt_set(s["registers"]), fmt_set(s["capmerc_bytes"]), fmt_set(s["spill_bytes"]), s["verdict"],
             "" if s["verdict_confidence"] is None else f"{s['verdict_confidence']:.3f}"] for s in summary]
    return table("variants", ["kernel", "arch", "ptxas", "name", "ok", "outputs", "regs", "capmerc", "spill B",
                              "verdict", "conf"], rows)


def _runtime(plan: SweepPlan, view: View) -> tuple[list[dict], dict] | None:
    from ptxprobe.gpu import runtime_sweep
    from ptxprobe.reports.gpu_section import regime_text
    from ptxprobe.stats.regime import Regime

    out = plan.out
    try:
        rows = runtime_sweep(plan.experiment, out, progress=not view.quiet and not view.json, notify=log.warning,
                             executor=plan.request.executor)
    except NoGpu as exc:
        if plan.request.run:  # asked for: the static answer stands, but what was asked was not done (exit 3)
            raise
        log.info("--run: %s", exc)
        return None
    calibration = read_run_json(out, CALIBRATION)
    _say_calibration(calibration)
    shown = [r for r in rows if r.get("name_template") or r["label"].startswith("sdpa")]
    if view.json:
        return [{k: v for k, v in r.items() if k not in ("times_ms", "samples")} for r in rows], calibration

    def ci(r, a, lo, hi, fmt):
        return "-" if r.get(a) is None else f"{r[a]:{fmt}} [{r[lo]:{fmt}}, {r[hi]:{fmt}}]"

    def rate(r):
        if r.get("tflops") is not None:
            return ci(r, "tflops", "tflops_ci_low", "tflops_ci_high", ".1f") + " TFLOPS"
        return ci(r, "gbps", "gbps_ci_low", "gbps_ci_high", ".0f") + (" GB/s" if r.get("gbps") is not None else "")

    show(table(
        f"GPU runs ({rows[0]['gpu'] if rows else '-'}) -> {out}/runtime.parquet",
        ["kernel", "problem", "name", "rate [95% CI]", "ratio vs baseline [95% CI]", "verdict", "regime", "bitwise",
         "max ULP", "rel err"],
        [[r["kernel"], problem_label(r), r["name"], rate(r),
          ci(r, "ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high", ".4f"), r["runtime_verdict"],
          regime_text(Regime.from_fields(r)) if not r.get("is_baseline") else "-",
          ("own spread" if r.get("within_baseline_spread") and not r.get("bitwise_equal_to_baseline")
           else r.get("bitwise_equal_to_baseline", "-")), r.get("max_ulp_vs_baseline", "-"),
          "-" if r.get("rel_err_vs_reference") is None else f"{r['rel_err_vs_reference']:.2e}"] for r in shown],
    ))
    return rows, calibration


def _say_calibration(c: dict) -> None:
    """The calibration's verdict on stderr, with what it certifies: each plant's power as found and its exact
    one-sided 95 % lower bound (6 of 6 found certifies 61 %, not 100 %), the A/A rate with its upper bound; a
    failure is loud."""
    from ptxprobe.gpu.calibrate import delivered_counts  # numpy and scipy: loaded once a GPU run is there to say

    low = c.get("power_lower_95", {})
    found = c.get("detected_in_groups", {})
    counts = delivered_counts(c)

    def given(f: str) -> str:
        return str(counts[f][0]) if f in counts else "?"

    def undelivered(f: str) -> str:
        n = counts.get(f, (0, 0))[1]
        return f", {n} more undelivered" if n else ""

    power = ", ".join(f"{float(f) * 100:g}% in {found.get(f, '?')}/{given(f)}{undelivered(f)} (power >= "
                      f"{low[f]:.0%})" if low.get(f) is not None else f"{float(f) * 100:g}%: {p:.0%}"
                      for f, p in sorted(c.get("power", {}).items()))
    fp, fp_up = c.get("aa_false_positive_rate"), c.get("aa_false_positive_upper_95")
    aa = f"{fp:.2f}" + (f" (<= {fp_up:.0%})" if fp_up is not None else "") if fp is not None else "-"
    hw = c.get("aa_halfwidth_median")
    line = (f"calibration over {c.get('groups')} groups: A/A false positives {aa}, A/A half-width median "
            f"{'-' if hw is None else f'{hw:.3%}'}, planted found {power}, {c.get('gpu_seconds', 0):.0f} GPU s")
    print(f"ptxprobe: {line}", file=sys.stderr)
    if not c.get("passed", True):
        print("ptxprobe: CALIBRATION FAILED: " + "; ".join(c.get("failures", [])), file=sys.stderr)
