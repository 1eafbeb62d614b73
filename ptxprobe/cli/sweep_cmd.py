"""``ptxprobe rename-sweep``: build the experiment from the arguments, run it, answer the question first."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from ptxprobe.cli import FOUND_DIFFERENCES, INTERRUPTED, OK, TOOL_FAILED
from ptxprobe.cli.render import emit_json, fmt_set, say, show, show_answer, table
from ptxprobe.core.cluster import session_for
from ptxprobe.core.errors import NoGpu, SpecError
from ptxprobe.core.schema import short_names
from ptxprobe.static.verdicts import NO, YES

log = logging.getLogger("ptxprobe")


def experiment_from_args(args):
    """The experiment file, its overrides and the user's own kernels, as one Experiment."""
    from ptxprobe.static.experiment import load_experiment, override

    exp = load_experiment(args.experiment)
    sets = list(args.set or [])
    user_files = bool(args.ptx or args.cubin or args.cu)
    if args.triton and not args.spec:
        raise SpecError("--triton needs --spec SPEC.json|toml (signature, constexprs, divisible_by_16, num_warps)")
    if args.entry and not user_files:
        raise SpecError("--entry goes with --ptx, --cubin or --cu")
    with_spec = f"={args.spec}" if args.spec else ""
    with_entry = f":{args.entry}" if args.entry else ""
    user = {
        "ptx_files": [f + with_entry + with_spec for f in args.ptx],
        "cubin_files": [f + with_entry + with_spec for f in args.cubin],
        "cu_files": [f + with_entry + with_spec for f in args.cu],
        "triton_functions": [f"{args.triton}={args.spec}"] if args.triton else [],
    }
    if args.spec and not any(user.values()):
        raise SpecError("--spec goes with a user kernel: --ptx, --cubin, --cu or --triton")
    for axis, vals in user.items():
        if vals:
            sets.append(f"{axis}=" + ",".join(vals))
    if any(user.values()):
        if not any(s.startswith("kernels=") for s in sets):
            sets.append("kernels=")  # only the user's kernels
        if _cu_default_ptxas(args):
            sets.append("ptxas=nvcc")  # the PTX nvcc emits is its own toolkit's to assemble
        archs = next((s for s in reversed(sets) if s.startswith("archs=")), None)
        if archs and (args.ptx or args.cubin):
            sets.append("file_archs=" + archs.partition("=")[2])  # re-target the PTX files too
    exp = override(exp, sets) if sets else exp
    if any(user.values()) and exp.name == "default":
        from dataclasses import replace

        exp = replace(exp, name="user", description="user kernels given on the command line")
    if args.names_from_scan:
        exp = names_from_scan(exp)
    if (args.ptx or args.cubin or args.triton) and not any(s.startswith("names=") for s in sets):
        exp = names_for_triggered_entries(exp)
    return exp


def _cu_default_ptxas(args) -> bool:
    """--cu without a ptxas asked for: the toolkit whose nvcc compiles the file assembles it too."""
    return bool(args.cu) and not any(s.startswith("ptxas=") for s in args.set or [])


def names_for_triggered_entries(exp):
    """When every given kernel's own name already holds the trigger, ``cutlass_{base}`` beside ``xutlass_{base}``
    would compare two triggered names and read as "no effect". Compare instead the name without the trigger
    (baseline), the name as given, and a second trigger-free spelling (control), and say so."""
    from ptxprobe.core.cache import Cache
    from ptxprobe.ptx.rename import MIXED_TRIGGER_NAMES, TRIGGER, TRIGGER_FREE_NAMES
    from ptxprobe.sources import sources_of
    from ptxprobe.static.experiment import override

    entries = []
    for src in sources_of(exp):
        # ptx/cubin entries are known without compiling; a Triton/Gluon function's name (its repr= may add the
        # trigger, as Triton's Gluon attention example does for fp8) from its first emit, which is cached
        if src.kind in ("ptx", "cubin", "triton"):
            emitted = src.emit(src.build_archs(exp.archs)[0], Cache())
            entries += list(emitted.swept_entries)
    with_trigger = [e for e in entries if TRIGGER in e]
    if not entries or not with_trigger:
        return exp
    if len(with_trigger) < len(entries):  # each kernel compared as it would be alone: one template set for both
        log.warning("these kernels' own names already contain %r: each is compared with the trigger removed "
                    "(cutlass -> xutlass), as given, and a control (cutlass -> zutlass); the other kernels with "
                    "cutlass_ and xutlass_ before their names: %s", TRIGGER, ", ".join(with_trigger))
        return override(exp, ["names=" + ",".join(MIXED_TRIGGER_NAMES)])
    log.warning("every kernel's own name contains %r: comparing it with the trigger removed (baseline, "
                "cutlass -> xutlass), as given, and a control (cutlass -> zutlass)", TRIGGER)
    return override(exp, ["names=" + ",".join(TRIGGER_FREE_NAMES)])


def names_from_scan(exp):
    """Add a name template for every identifier-like strstr literal in the sweep's ptxas binaries."""
    from ptxprobe.static.experiment import override
    from ptxprobe.toolchain.scan import name_templates, scan
    from ptxprobe.toolchain.tools import discover, select_ptxas

    tools = discover(("ptxas",))
    paths = {t.path for arch in exp.archs for spec in exp.ptxas for t in select_ptxas(arch, spec, tools)}
    lits = sorted({s.literal for p in paths for s in scan(p).sites if s.function == "strstr"})
    extra = [t for t in name_templates(lits) if t not in exp.names]
    log.warning("names from ptxas-scan: %s", ", ".join(extra) or "none new")
    return override(exp, ["names=" + ",".join(list(exp.names) + extra)])


def cmd_rename_sweep(args) -> int:
    from ptxprobe.static.sweep import default_out_dir

    exp = experiment_from_args(args)
    if len(exp.names) < 2:  # one name is the baseline alone: an answer of "no" would claim a comparison never made
        raise SpecError(f"names: {exp.names[0] if exp.names else 'none'} alone is only the baseline, with nothing "
                        "to compare it with; give two or more, e.g. -s names={base},cutlass_{base}")
    out = Path(args.out) if args.out else default_out_dir(exp)
    if args.jobs is not None and args.jobs < 1:
        raise SpecError(f"--jobs must be at least 1, got {args.jobs}")
    if args.timeout <= 0:
        raise SpecError(f"--timeout must be positive, got {args.timeout}")
    if args.explain and args.run is False:
        raise SpecError("--explain profiles the GPU runs: it cannot go with --no-run")
    if args.run is not False:  # a bad [run] table is bad input on any machine, before the static sweep
        from ptxprobe.gpu.plan import run_config

        run_config(getattr(exp, "run", None))
    with session_for(args.executor, args.ray_address, args.jobs):
        return _sweep_and_time(exp, out, args)


def _sweep_and_time(exp, out: Path, args) -> int:
    """The static sweep, its answer, and (with a GPU) the timed runs: one Ray session around both."""
    from ptxprobe.core.cache import Cache
    from ptxprobe.sources import left_out, left_out_text
    from ptxprobe.static.sweep import run_sweep
    from ptxprobe.static.verdicts import pivot, summarize

    left = left_out(exp)
    if left:  # a narrowed experiment runs what supports it: what it leaves out is said first, on stderr
        print(f"ptxprobe: left out (not supported by the kernel): {left_out_text(left)}", file=sys.stderr)
    outcome = run_sweep(exp, out, jobs=args.jobs, cache=Cache(enabled=not args.no_cache), timeout=args.timeout,
                        progress=not args.quiet_level and not args.json and sys.stderr.isatty(), argv=sys.argv,
                        fresh=args.fresh, executor=args.executor, ray_address=args.ray_address)
    summary = summarize(outcome.rows)
    answer = pivot(summary, list(exp.names))
    failed = outcome.failed
    doc = {"experiment": exp.name, "out_dir": str(out), "pivot": answer, "summary": summary,
           "failures": _failure_records(failed), "emit_errors": outcome.emit_errors,
           "interrupted": outcome.interrupted, "left_out": outcome.left_out}
    if not args.json:
        _say_answer(exp, out, outcome, answer, args.details and summary)
    _report_failures(failed, outcome.emit_errors)
    if not args.json:
        na = sorted({(r["ptxas_version"], r["error"]) for r in outcome.rows if r["status"] == "unsupported_option"})
        for _, why in na:  # not a failure: this release lacks an option another release of the sweep has
            say(f"not applicable: {why}")
        if _cu_default_ptxas(args):
            say("note: --cu files are assembled by the ptxas of the CUDA toolkit whose nvcc compiles them; "
                "-s ptxas=triton,newest,VERSION for others")
        for note in sorted({r["note"] for r in outcome.rows if r.get("note")}):  # e.g. a lowered PTX .version
            say(f"note: {note}")
    if outcome.interrupted:
        if args.json:
            emit_json(doc)
        return INTERRUPTED
    differs = any(p["name_matters"] for p in answer)
    compared = any(p["answer"] in (YES, NO) for p in answer)  # 0 says "nothing differs" only of what was compared
    rc = TOOL_FAILED if failed or outcome.emit_errors or not compared else (FOUND_DIFFERENCES if differs else OK)
    if args.run is not False:
        runtime = _runtime(exp, out, args)
        if runtime is not None:
            doc["runtime"], doc["calibration"] = runtime
            if not doc["calibration"].get("passed", True):
                rc = TOOL_FAILED  # the measurement failed its own check: its verdicts are not to be trusted
            if args.explain:
                from ptxprobe.explain.run import analyze, profile_run

                profile_run(out, [], timeout=args.timeout)
                doc["explain"] = analyze(out)
                say(f"explain: {len(doc['explain']['groups'])} comparisons in {out}/explain.json")
    if args.json:
        emit_json(doc)
    return rc


def _say_answer(exp, out: Path, outcome, answer: list[dict], details: list[dict] | None) -> None:
    """The one-screen answer, then what was done and which files hold it (only files that exist)."""
    if answer:
        show_answer(f"does the name matter? '{exp.name}' -> {out}", answer, list(exp.names),
                    f"--details (every variant), ptxprobe report {out} (HTML), --run on a GPU (speed)")
    if details:
        show(_details_table(details))
    files = [str(out / f) for f in ("results.parquet", "variants.jsonl") if (out / f).exists()][:1]
    where = f"; results in {files[0]}" if files else ""
    if outcome.interrupted:
        todo = "" if outcome.emitted_all else f" planned so far ({outcome.to_emit} kernel builds not started)"
        say(f"interrupted: {len(outcome.rows)} of {outcome.planned} done{todo}; run again to resume{where}", wrap=True)
        return
    say(f"{outcome.ran} assembled, {outcome.skipped} already done, {outcome.wall_seconds:.1f}s wall, "
        f"{outcome.ptxas_seconds:.1f}s ptxas{where}", wrap=True)


def _failure_records(failed: list[dict]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for r in failed:
        key = (r["kernel"], r["arch"], r["ptxas_version"], r["ptxas_flags"], r["name"])
        seen.setdefault(key, {"kernel": r["kernel"], "arch": r["arch"], "ptxas_version": r["ptxas_version"],
                              "ptxas_flags": r["ptxas_flags"], "name": r["name"], "status": r["status"],
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
    short = short_names([s["kernel"] for s in summary], 40)
    rows = [[short[s["kernel"]], s["arch"], s["ptxas_version"], s["name"], f"{s['ok']}/{s['runs']}",
             s["distinct_outputs"],
             fmt_set(s["registers"]), fmt_set(s["capmerc_bytes"]), fmt_set(s["spill_bytes"]), s["verdict"],
             "" if s["verdict_confidence"] is None else f"{s['verdict_confidence']:.3f}"] for s in summary]
    return table("variants", ["kernel", "arch", "ptxas", "name", "ok", "outputs", "regs", "capmerc", "spill B",
                              "verdict", "conf"], rows)


def _runtime(exp, out: Path, args) -> tuple[list[dict], dict] | None:
    from ptxprobe.core.schema import problem_label
    from ptxprobe.core.store import CALIBRATION, read_run_json
    from ptxprobe.gpu import runtime_sweep

    try:
        rows = runtime_sweep(exp, out, progress=not args.quiet_level and not args.json, notify=log.warning,
                             executor=args.executor)
    except NoGpu as exc:
        (log.warning if args.run else log.info)("--run: %s", exc)
        return None
    calibration = read_run_json(out, CALIBRATION)
    _say_calibration(calibration)
    shown = [r for r in rows if r.get("name_template") or r["label"].startswith("sdpa")]
    if args.json:
        return [{k: v for k, v in r.items() if k not in ("times_ms", "samples")} for r in rows], calibration

    def ci(r, a, lo, hi, fmt):
        return "-" if r.get(a) is None else f"{r[a]:{fmt}} [{r[lo]:{fmt}}, {r[hi]:{fmt}}]"

    def rate(r):
        if r.get("tflops") is not None:
            return ci(r, "tflops", "tflops_ci_low", "tflops_ci_high", ".1f") + " TFLOPS"
        return ci(r, "gbps", "gbps_ci_low", "gbps_ci_high", ".0f") + (" GB/s" if r.get("gbps") is not None else "")

    show(table(
        f"GPU runs ({rows[0]['gpu'] if rows else '-'}) -> {out}/runtime.parquet",
        ["kernel", "problem", "name", "rate [95% CI]", "ratio vs baseline [95% CI]", "verdict", "bitwise", "max ULP",
         "rel err"],
        [[r["kernel"], problem_label(r), r["name"], rate(r),
          ci(r, "ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high", ".4f"), r["runtime_verdict"],
          r.get("bitwise_equal_to_baseline", "-"), r.get("max_ulp_vs_baseline", "-"),
          "-" if r.get("rel_err_vs_reference") is None else f"{r['rel_err_vs_reference']:.2e}"] for r in shown],
    ))
    return rows, calibration


def _say_calibration(c: dict) -> None:
    """The calibration's verdict on stderr; a failure is loud."""
    power = ", ".join(f"{float(f) * 100:g}%: {p:.0%}" for f, p in sorted(c.get("power", {}).items()))
    line = (f"calibration over {c.get('groups')} groups: A/A false positives {c.get('aa_false_positive_rate')}, "
            f"A/A half-width median {c.get('aa_halfwidth_median')}, planted detected {power}, "
            f"{c.get('gpu_seconds', 0):.0f} GPU s")
    print(f"ptxprobe: {line}", file=sys.stderr)
    if not c.get("passed", True):
        print("ptxprobe: CALIBRATION FAILED: " + "; ".join(c.get("failures", [])), file=sys.stderr)
