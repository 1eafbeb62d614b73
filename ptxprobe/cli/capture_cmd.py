"""``ptxprobe capture``: a program's Triton and CuTe DSL kernels, rename-swept, and with ``--run`` timed A/B."""

from __future__ import annotations

from pathlib import Path

from ptxprobe.capture.program import run_program
from ptxprobe.cli import FOUND_DIFFERENCES, OK, TOOL_FAILED
from ptxprobe.cli.render import emit_json, say, show, table
from ptxprobe.cli.sweep_cmd import View, run_request
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError, ToolFailed
from ptxprobe.runs.request import SweepRequest, UserKernels
from ptxprobe.static.experiment import parse_assignments
from ptxprobe.toolchain.tools import discover, select_ptxas, triton_ptxas


def cmd_capture(args) -> int:
    """Run the program with the frontends' dump knobs, then the rename sweep on what it compiled; with ``--run``
    the A/B of the whole program (exit 1 when a name changes code or speed, 3 when the A/A calibration fails)."""
    argv = list(args.program)
    out = Path(args.out)
    names = tuple(args.names.split(",")) if args.names else None
    if names is not None and len(names) != 3:
        raise SpecError("--names takes three templates: BASE,TRIGGER,CONTROL")
    if args.interpret and args.run:
        raise SpecError("capture --interpret runs the program without a GPU and --run times it on one: drop one")
    kernels, record = run_program(argv, out, args.program_timeout, arch=args.arch, interpret=args.interpret,
                                  replace=args.fresh or not (out / "sweep").exists())
    if not args.json:
        how = f" under Triton's interpreter ({args.interpret})" if args.interpret else ""
        show(table(f"captured from {' '.join(argv)[:60]}{how} -> {out}/captured.json",
                   ["entry", "frontend", "arch", "warps", "launched as", "ptx"],
                   [[k.entry[:60], k.frontend, k.arch or "-", k.metadata.get("num_warps", "-"),
                     k.metadata.get("via", "-"), k.ptx] for k in kernels]))
    ptx_files = dict.fromkeys(k.ptx for k in kernels)  # a CuTe DSL file may hold several entries

    sweep = SweepRequest(experiment=args.experiment, axes=parse_assignments(args.set),
                         kernels=UserKernels(ptx=tuple(str(out / p) for p in ptx_files)), out=str(out / "sweep"),
                         jobs=args.jobs or None, use_cache=not args.no_cache, fresh=args.fresh,
                         executor=args.executor, ray_address=args.ray_address, run=False)
    code = run_request(sweep, View(json=args.json and not args.run, quiet=bool(args.quiet_level)))
    if not args.run:
        return code
    ab = run_ab(args, argv, out, kernels, names)
    return max(code, ab)


def run_ab(args, argv: list[str], out: Path, kernels: list, names: tuple[str, ...] | None) -> int:
    from ptxprobe.capture.ab import build_arms, compare, run_rounds, write_ab

    default_arch = args.arch or "sm_90a"
    tools = discover(("ptxas",))
    by_arch = {}
    for arch in sorted({k.arch or default_arch for k in kernels}):
        by_arch[arch] = (triton_ptxas(arch, tools) if args.ab_ptxas == "triton"
                         else select_ptxas(arch, args.ab_ptxas, tools)[0])
    ab_dir = out / "ab"
    arms = build_arms(kernels, out, ab_dir, by_arch, default_arch, Cache(), names)
    log = (lambda m: None) if args.quiet_level else say
    # Inductor launches through Triton (so the hook sees its kernels), and every run shares one compile cache
    env = {"TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER": "0", "TRITON_CACHE_DIR": str((ab_dir / "triton-cache").resolve())}
    meta = {"metric": args.metric or "wall seconds", "rounds": args.rounds,
            "ptxas": {a: {"version": t.version, "sha256": t.sha256, "path": t.path} for a, t in by_arch.items()},
            "environment": env}
    runs: list = []
    try:
        run_rounds(argv, arms, ab_dir, args.rounds, args.program_timeout, args.metric, env_extra=env, log=log,
                   runs=runs)
    except KeyboardInterrupt:  # the finished runs are kept, judged by the same rule (too few rounds say so)
        write_ab(ab_dir, argv, arms, runs, compare(runs), {**meta, "interrupted": True})
        say(f"interrupted after {len(runs)} runs: they are in {ab_dir / 'ab.json'}")
        raise
    if not any(r.value is not None for r in runs):
        first = next((r.note for r in runs if r.note), "no run measured anything")
        raise ToolFailed(f"capture --run: no run of the program could be measured ({first})")
    from ptxprobe.gpu.timing import Nvml

    rows = compare(runs, power_limit_w=Nvml().power_limit_w())
    rec = write_ab(ab_dir, argv, arms, runs, rows, meta)
    if args.json:
        emit_json(rec)
    else:
        show_program_ab(rec, ab_dir)
    return program_ab_exit(rec)


def show_program_ab(rec: dict, ab_dir: Path) -> None:
    """The whole program's A/B (``ab.json``) as a table, and a failed A/A calibration said plainly."""
    show(table(f"A/B of the whole program ({rec.get('metric')}; ratio > 1: the arm is faster) -> {ab_dir}/ab.json",
               ["arm", "rounds", "ratio", "95% interval", "verdict", "p", "regime"],
               [[r["arm"], r["rounds"], *([f"{r['ratio']:.4f}", f"[{r['low']:.4f}, {r['high']:.4f}]"]
                                          if "ratio" in r else ["-", "-"]),
                 r["verdict"], f"{r['p_value']:.3f}" if "p_value" in r else "-", program_regime(r)]
                for r in rec["comparisons"]]))
    say_contaminated(rec["comparisons"])
    aa = next((r for r in rec["comparisons"] if r["arm"] == "aa"), None)
    if rec["calibration_failed"]:
        why = (f"too few paired rounds to calibrate ({aa['rounds']})" if aa and aa["verdict"] == "too_few_runs"
               else "the A/A arm differs from the baseline it copies")
        say(f"CALIBRATION FAILED: {why}; the A/B verdicts are not trusted")


def program_regime(row: dict) -> str:
    """A program A/B row's regime cell (rows recorded before regimes were: "-")."""
    from ptxprobe.reports.gpu_section import regime_text
    from ptxprobe.stats.regime import Regime

    return regime_text(Regime.from_fields({**row["regime"], "rounds": row["rounds"]}) if row.get("regime") else None)


def say_contaminated(rows: list[dict]) -> None:
    """Arms whose ratio of means and Hodges-Lehmann ratio part by more than the half-width: one-sided outliers."""
    for r in rows:
        if r.get("contaminated"):
            say(f"{r['arm']}: the ratio of means {r['ratio_of_means']:.4f} and the Hodges-Lehmann ratio "
                f"{r['ratio']:.4f} part by more than the half-width: a few rounds of one arm are outliers (the mean "
                "follows them, the pseudo-median does not); look at ab.json's runs before quoting either")


def program_ab_exit(rec: dict) -> int:
    """3 when the A/A calibration failed, 1 when a renamed arm is faster or slower, else 0."""
    from ptxprobe.stats.paired import SIGNIFICANT

    if rec["calibration_failed"]:
        return TOOL_FAILED
    return FOUND_DIFFERENCES if any(r["verdict"] in SIGNIFICANT for r in rec["comparisons"] if r["arm"] != "aa") \
        else OK
