"""The ``ptxprobe`` command. Sub-commands map one-to-one onto pipeline stages; output is
rendered here (rich tables or JSON) from the records the stages return."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .errors import PtxprobeError

console = Console() if sys.stdout.isatty() else Console(width=200)  # pipes and logs get full rows
errors = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=200)


def _table(title: str, columns: list[str], rows: list[list]) -> Table:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    return t


def _fmt_set(values) -> str:
    return "/".join(str(v) for v in values) if values else "-"


def cmd_rename_sweep(args) -> int:
    from .sweep import DEFAULT_EXPERIMENT, default_out_dir, load_experiment, override, run_sweep, summarize

    exp = load_experiment(args.experiment or DEFAULT_EXPERIMENT)
    sets = list(args.set or [])
    if args.triton and not args.spec:
        raise PtxprobeError("--triton needs --spec SPEC.json|toml (signature, constexprs, divisible_by_16, num_warps)")
    with_spec = f"={args.spec}" if args.spec else ""
    user = {
        "ptx_files": [f + with_spec for f in args.ptx or []],
        "cubin_files": [f + with_spec for f in args.cubin or []],
        "cu_files": [(f"{f}:{args.entry}" if args.entry else f) + with_spec for f in (args.cu or [])],
        "triton_functions": [f"{args.triton}={args.spec}"] if args.triton else [],
    }
    if args.spec and not any(user.values()):
        raise PtxprobeError("--spec goes with a user kernel: --ptx, --cubin, --cu or --triton")
    for axis, vals in user.items():
        if vals:
            sets.append(f"{axis}=" + ",".join(vals))
    if any(user.values()) and not any(s.startswith("kernels=") for s in sets):
        sets.append("kernels=")  # only the user's kernels
    if sets:
        exp = override(exp, sets)
    if args.names_from_scan:
        exp = _names_from_scan(exp)
    out = Path(args.out) if args.out else default_out_dir(exp)
    from .cache import Cache

    outcome = run_sweep(
        exp,
        out,
        jobs=args.jobs,
        cache=Cache(enabled=not args.no_cache),
        timeout=args.timeout,
        progress=not args.quiet,
        argv=sys.argv,
        fresh=args.fresh,
    )
    summary = summarize(outcome.rows)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        rows = [
            [
                s["kernel"],
                s["arch"],
                s["ptxas_version"],
                s["name"],
                f"{s['ok']}/{s['runs']}",
                s["distinct_outputs"],
                _fmt_set(s["registers"]),
                _fmt_set(s["capmerc_bytes"]),
                _fmt_set(s["spill_bytes"]),
                s["verdict"],
                "" if s["verdict_confidence"] is None else f"{s['verdict_confidence']:.3f}",
            ]
            for s in summary
        ]
        console.print(
            _table(
                f"rename sweep '{exp.name}' -> {out}",
                ["kernel", "arch", "ptxas", "name", "ok", "outputs", "regs", "capmerc", "spill B", "verdict", "conf"],
                rows,
            )
        )
        console.print(
            f"{outcome.ran} assembled, {outcome.skipped} already done, {outcome.wall_seconds:.1f}s wall, "
            f"{outcome.ptxas_seconds:.1f}s ptxas; results in {out}/results.parquet"
            + (" [interrupted: re-run to resume]" if outcome.interrupted else "")
        )
    if outcome.interrupted:
        return 130
    if args.run is not False:
        return _runtime(exp, out, args)
    return 0


def _names_from_scan(exp):
    """Add a name template for every identifier-like strstr literal in the sweep's ptxas binaries."""
    from .scan import name_templates, scan
    from .sweep import override
    from .toolchain import discover, select_ptxas

    tools = discover(("ptxas",))
    paths = {t.path for arch in exp.archs for spec in exp.ptxas for t in select_ptxas(arch, spec, tools)}
    lits = sorted({s.literal for p in paths for s in scan(p).sites if s.function == "strstr"})
    extra = [t for t in name_templates(lits) if t not in exp.names]
    console.print(f"names from ptxas-scan: {', '.join(extra) or 'none new'}")
    return override(exp, ["names=" + ",".join(list(exp.names) + extra)])


def _runtime(exp, out: Path, args) -> int:
    from .errors import NoGpu
    from .run import problem_label, runtime_sweep

    try:
        rows = runtime_sweep(exp, out, progress=not args.quiet, notify=lambda m: console.print(f"[yellow]{m}[/]"))
    except NoGpu as exc:
        if args.run:  # asked for explicitly
            console.print(f"[yellow]--run: {exc}[/]")
        return 0
    shown = [r for r in rows if r.get("name_template") or r["label"].startswith("sdpa")]
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "times_ms"} for r in rows], indent=1))
        return 0

    def ci(r, a, lo, hi, fmt):
        return "-" if r.get(a) is None else f"{r[a]:{fmt}} [{r[lo]:{fmt}}, {r[hi]:{fmt}}]"

    def rate(r):
        if r.get("tflops") is not None:
            return ci(r, "tflops", "tflops_ci_low", "tflops_ci_high", ".1f") + " TFLOPS"
        return ci(r, "gbps", "gbps_ci_low", "gbps_ci_high", ".0f") + (" GB/s" if r.get("gbps") is not None else "")

    console.print(
        _table(
            f"GPU runs ({rows[0]['gpu'] if rows else '-'}) -> {out}/runtime.parquet",
            [
                "kernel",
                "problem",
                "name",
                "rate [95% CI]",
                "ratio vs baseline [95% CI]",
                "verdict",
                "bitwise",
                "max ULP",
                "rel err",
            ],
            [
                [
                    r["kernel"],
                    problem_label(r),
                    r["name"],
                    rate(r),
                    ci(r, "ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high", ".4f"),
                    r["runtime_verdict"],
                    r.get("bitwise_equal_to_baseline", "-"),
                    r.get("max_ulp_vs_baseline", "-"),
                    "-" if r.get("rel_err_vs_reference") is None else f"{r['rel_err_vs_reference']:.2e}",
                ]
                for r in shown
            ],
        )
    )
    return 0


def cmd_toolchain(args) -> int:
    from .toolchain import discover, install, max_ptx_isa

    if args.action == "install":
        if not args.versions:
            raise PtxprobeError("toolchain install needs one or more CUDA versions, e.g. 12.4.131 or 12.6")
        kinds = tuple(args.kinds.split(","))
        for v in args.versions:
            for rec in install(v, kinds):
                console.print(f"installed {rec.kind} {rec.version} from {rec.wheel} -> {rec.path}")
        return 0
    tools = discover()
    recs = [
        {**t.to_dict(), "max_ptx_isa": ".".join(map(str, max_ptx_isa(t))) if t.kind == "ptxas" else None} for t in tools
    ]
    if args.json:
        print(json.dumps(recs, indent=1))
    else:
        console.print(
            _table(
                "toolchain",
                ["kind", "version", "origin", "max PTX ISA", "sha256", "path"],
                [[r["kind"], r["version"], r["origin"], r["max_ptx_isa"], r["sha256"][:12], r["path"]] for r in recs],
            )
        )
    return 0


def cmd_kernels(args) -> int:
    from .registry import families

    rows = [
        [
            f.name,
            f.frontend,
            ",".join(f.dtypes),
            ",".join(map(str, f.head_dims)),
            ",".join(c.label for c in f.configs),
            f.description,
        ]
        for f in families().values()
    ]
    console.print(_table("kernels", ["name", "frontend", "dtypes", "head dims", "configs", "description"], rows))
    return 0


def cmd_emit(args) -> int:
    from .emit import emit_triton
    from .registry import Problem, family

    fam = family(args.kernel)
    spec = fam.spec(args.dtype, args.head_dim, args.causal, args.config)
    e = emit_triton(fam, spec, args.arch, name=args.name, problem=Problem(seq_len=args.seq_len))
    if args.output:
        Path(args.output).write_text(e.ptx)
        console.print(f"{spec.key} {args.arch} entry={e.entry} -> {args.output}")
    else:
        sys.stdout.write(e.ptx)
    return 0


def cmd_rename(args) -> int:
    from .emit import load_ptx
    from .rename import apply_template, check_equivalent, rename_entry

    src = load_ptx(args.ptx, args.entry)
    new = apply_template(args.name, src.entry) if "{base}" in args.name else args.name
    r = rename_entry(src.ptx, src.entry, new)
    eq = check_equivalent(src.ptx, src.entry, r.ptx, new)
    if args.output:
        Path(args.output).write_text(r.ptx)
    else:
        sys.stdout.write(r.ptx)
    print(
        json.dumps({"old": src.entry, "new": new, "sites": r.sites, "equivalent": eq.equal, "detail": eq.detail}),
        file=sys.stderr,
    )
    return 0 if eq.equal else 1


def cmd_assemble(args) -> int:
    from .assemble import TRITON_FLAGS, assemble
    from .cubin import read_cubin
    from .emit import load_ptx
    from .toolchain import select_ptxas

    src = load_ptx(args.ptx)
    arch = args.arch or src.arch
    tool = select_ptxas(arch, args.ptxas)[0]
    flags = tuple(args.flags.split()) if args.flags is not None else TRITON_FLAGS
    art = assemble(src.ptx, arch, tool, flags, timeout=args.timeout)
    rec = {k: v for k, v in art.to_json().items() if k != "stderr"}
    if art.ok:
        facts = read_cubin(art.cubin())
        rec["kernels"] = {
            k: {
                "text_bytes": f.text_bytes,
                "capmerc_bytes": f.capmerc_bytes,
                "registers": f.regcount,
                "n_instructions": f.n_instructions,
            }
            for k, f in facts.kernels.items()
        }
        if args.output:
            Path(args.output).write_bytes(art.cubin())
    else:
        rec["stderr"] = art.stderr
    print(json.dumps(rec, indent=1))
    return 0 if art.ok else 1


def cmd_cubin(args) -> int:
    from .cubin import read_cubin

    facts = read_cubin(Path(args.cubin).read_bytes())
    rec = {"sha256": facts.sha256, "arch": facts.arch, "tkinfo": facts.tkinfo, "kernels": {}}
    for name, k in facts.kernels.items():
        rec["kernels"][name] = {
            "text_bytes": k.text_bytes,
            "text_sha256": k.text_sha256,
            "n_instructions": k.n_instructions,
            "capmerc_bytes": k.capmerc_bytes,
            "registers": k.regcount,
            "function_attrs": k.function_attrs,
            "eiattrs": [[a.name, a.value] for a in k.attrs],
        }
    print(json.dumps(rec, indent=1))
    return 0


def cmd_disasm(args) -> int:
    from .sass import disassemble

    listings = disassemble(Path(args.cubin))
    if args.kernel:
        if args.kernel not in listings:
            raise PtxprobeError(f"no kernel {args.kernel!r} in {args.cubin} (have: {', '.join(listings)})")
        listings = {args.kernel: listings[args.kernel]}
    if args.json:
        print(json.dumps({k: [i.to_json() for i in v.instructions] for k, v in listings.items()}))
        return 0
    for name, lst in listings.items():
        print(f"// {name}: {len(lst.instructions)} instructions")
        where = {off: lab for lab, off in lst.labels.items()}
        for ins in lst.instructions:
            if ins.offset in where:
                print(f"{where[ins.offset]}:")
            print(f"  /*{ins.offset:05x}*/ {ins.control.compact()}  {ins.text}")
    return 0


def _diff_inputs(args) -> tuple[bytes, bytes, str | None, str | None]:
    """Two cubins from files, or from one PTX assembled under its own name and under --rename."""
    if args.ptx:
        from .assemble import assemble
        from .emit import load_ptx
        from .rename import apply_template, rename_entry
        from .toolchain import select_ptxas

        src = load_ptx(args.ptx)
        arch = args.arch or src.arch
        new = apply_template(args.rename, src.entry) if "{base}" in args.rename else args.rename
        tool = select_ptxas(arch, args.ptxas)[0]
        arts = [assemble(src.ptx, arch, tool), assemble(rename_entry(src.ptx, src.entry, new).ptx, arch, tool)]
        for art in arts:
            if not art.ok:
                raise PtxprobeError(f"ptxas {art.status}: {art.stderr.strip()[-500:]}")
        return arts[0].cubin(), arts[1].cubin(), src.entry, new
    if not (args.a and args.b):
        raise PtxprobeError("diff needs two cubins (A B) or --ptx FILE --rename NAME")
    return Path(args.a).read_bytes(), Path(args.b).read_bytes(), args.kernel_a, args.kernel_b


def cmd_diff(args) -> int:
    from .diff import diff_cubins

    a, b, ka, kb = _diff_inputs(args)
    d = diff_cubins(a, b, ka, kb)
    if args.json:
        print(json.dumps(d.to_json(with_rows=args.rows), indent=1, default=str))
        return 0
    c = d.cubin_deltas
    console.print(
        f"[bold]{d.kernel_a} -> {d.kernel_b}[/]: {d.verdict}  " + ", ".join(f"{k} {v}" for k, v in d.counts.items())
    )
    rows = [[k, c[k][0], c[k][1]] for k in ("registers", "frame_size", "text_bytes", "capmerc_bytes")]
    rows += [
        ["instructions", d.a.instructions, d.b.instructions],
        ["stall cycles", d.a.stall_cycles, d.b.stall_cycles],
        ["barrier waits", d.a.barrier_waits, d.b.barrier_waits],
        ["LDL/STL", f"{d.a.local_loads}/{d.a.local_stores}", f"{d.b.local_loads}/{d.b.local_stores}"],
    ]
    rows += [
        [
            f"loop {lp['loop']} instr/stall/waits",
            "/".join(str(x[0]) for x in (lp["instructions"], lp["stall_cycles"], lp["barrier_waits"])),
            "/".join(str(x[1]) for x in (lp["instructions"], lp["stall_cycles"], lp["barrier_waits"])),
        ]
        for lp in d.loop_deltas
        if (lp["instructions"][0] or 0) > 4
    ]
    console.print(_table("diff", ["", d.kernel_a, d.kernel_b], rows))
    if d.opcode_delta:
        console.print("opcodes (B-A): " + ", ".join(f"{k} {v:+d}" for k, v in d.opcode_delta.items()))
    return 0 if d.verdict == "identical" else 1


def cmd_report(args) -> int:
    from .report import build_report

    res = build_report(args.run_dir, args.out, notebook_html=args.notebook)
    recs = res["records"]
    console.print(
        _table(
            f"report -> {res['out_dir']}/index.html",
            ["kernel", "arch", "name", "static verdict", "SASS", "regs", "capmerc"],
            [
                [
                    r["kernel"],
                    r["arch"],
                    r["name"],
                    r["verdict"],
                    r.get("sass_verdict") or r.get("note"),
                    f"{r['baseline_registers']}->{r['registers']}",
                    f"{r['baseline_capmerc_bytes']}->{r['capmerc_bytes']}",
                ]
                for r in recs
            ],
        )
    )
    return 0


def _scan_targets(args) -> list[tuple[str, str]]:
    """(label, path) of the ptxas binaries to scan: given paths, --version matches, or every ptxas known."""
    from .toolchain import discover, select_ptxas

    if args.paths:
        return [(p, p) for p in args.paths]
    tools = discover(("ptxas",))
    if args.version:
        chosen = [t for v in args.version for t in select_ptxas("sm_90a", v, tools)]
    else:
        chosen = tools
    if not chosen:
        raise PtxprobeError("no ptxas found to scan")
    return [(f"{t.version} ({t.origin})", t.path) for t in chosen]


def cmd_ptxas_scan(args) -> int:
    from .scan import across_versions, name_templates, scan

    results = [(label, scan(path)) for label, path in _scan_targets(args)]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "ptxas": label,
                        "path": r.path,
                        "real_path": r.real_path,
                        "sha256": r.sha256,
                        "seconds": r.seconds,
                        "imports": r.imports,
                        "note": r.note,
                        "sites": [s.to_json() for s in r.sites if args.all or s.function in args.functions],
                    }
                    for label, r in results
                ],
                indent=1,
            )
        )
        return 0
    for label, r in results:
        sites = [s for s in r.sites if args.all or s.function in args.functions]
        console.print(
            _table(
                f"ptxas {label}: {len(sites)} compare sites with a literal ({r.seconds:.1f}s) {r.note}",
                ["literal", "function", "arg", "literal @", "loaded @", "call @", "in function @"],
                [
                    [
                        repr(s.literal),
                        s.function,
                        s.argument,
                        hex(s.literal_address),
                        hex(s.reference_address),
                        hex(s.call_address),
                        hex(s.enclosing_function) if s.enclosing_function else "?",
                    ]
                    for s in sites
                ],
            )
        )
    if len(results) > 1:
        table = across_versions([(label, r) for label, r in results])
        wanted = {s.literal for _, r in results for s in r.sites if args.all or s.function in args.functions}
        console.print(
            _table(
                "literals across ptxas versions",
                ["literal"] + [label for label, _ in results],
                [
                    [repr(t["literal"])] + ["yes" if t[label] else "-" for label, _ in results]
                    for t in table
                    if t["literal"] in wanted
                ],
            )
        )
    lits = sorted({s.literal for _, r in results for s in r.sites if s.function == "strstr"})
    console.print("name templates (--names-from-scan): " + ", ".join(name_templates(lits)))
    return 0


def cmd_repro(args) -> int:
    from .repro import repro

    res = repro(args.run_dir, args.out, jobs=args.jobs, progress=not args.quiet)
    for p in res.problems:
        console.print(f"[bold red]environment:[/] {p}", highlight=False, soft_wrap=True)
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False, soft_wrap=True)
    console.print(
        _table(
            f"repro of {args.run_dir}",
            ["kernel", "arch", "ptxas", "name", "result", "recorded", "new", "why"],
            [
                [r.kernel, r.arch, r.ptxas_version, r.name, r.status, r.recorded_outputs, r.new_outputs, r.reason]
                for r in res.rows
            ],
        )
    )
    if res.runtime_rows:
        console.print(
            _table(
                "runtime re-measured",
                ["kernel", "ptxas", "variant", "result", "why"],
                [[r.kernel, r.ptxas_version, r.name, r.status, r.reason] for r in res.runtime_rows],
            )
        )
    if res.runtime_note:
        console.print(res.runtime_note)
    diverged = [r for r in res.rows + res.runtime_rows if r.status not in ("match", "within_recorded_set", "within_ci")]
    if res.ok:
        console.print(f"[green]reproduced: {len(res.rows)} variant groups match the recorded results[/]")
        return 0
    console.print(f"[bold red]diverged:[/] {len(diverged)} variant groups, {len(res.problems)} environment problems")
    return 1


def cmd_bisect(args) -> int:
    from .repro import bisect, first_difference

    steps = bisect(
        args.kernel,
        args.dtype,
        args.head_dim,
        args.causal,
        args.arch,
        args.name,
        versions=args.versions.split(",") if args.versions else None,
        repeat=args.repeat,
        fetch=args.fetch,
        jobs=args.jobs,
    )
    console.print(
        _table(
            f"{args.name} on {args.kernel}/{args.dtype}/d{args.head_dim} for {args.arch}",
            ["ptxas", "verdict", "confidence", "registers baseline -> renamed"],
            [
                [
                    s.ptxas_version,
                    s.verdict,
                    "" if s.confidence is None else f"{s.confidence:.3f}",
                    f"{list(s.baseline_registers)} -> {list(s.registers)}",
                ]
                for s in steps
            ],
        )
    )
    first = first_difference(steps)
    console.print(f"first ptxas where the name changes the code: {first.ptxas_version if first else 'none'}")
    return 0


def _kernel_args(s: argparse.ArgumentParser, dtype: str) -> None:
    """--kernel/--dtype/--head-dim/--causal/--arch, shared by the commands that pick one registered kernel."""
    s.add_argument("--kernel", default="attention")
    s.add_argument("--dtype", default=dtype)
    s.add_argument("--head-dim", type=int, default=128)
    s.add_argument("--causal", action="store_true")
    s.add_argument("--arch", default="sm_90a")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ptxprobe", description="What does ptxas do differently depending on a kernel's entry name?"
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("rename-sweep", help="compile, rename, assemble and compare (no GPU needed)")
    s.add_argument("--experiment", "-e", help="experiment TOML (default: experiments/default.toml)")
    s.add_argument(
        "--set",
        "-s",
        action="append",
        metavar="AXIS=V1,V2",
        help="override an axis, e.g. -s archs=sm_100a -s names='{base},cutlass_{base}' -s repeat=3",
    )
    s.add_argument("--ptx", action="append", metavar="FILE", help="sweep a PTX file of your own (repeatable)")
    s.add_argument("--cubin", action="append", metavar="FILE", help="a cubin with embedded PTX (built with -lineinfo)")
    s.add_argument("--cu", action="append", metavar="FILE", help="CUDA C++ source, compiled by nvcc for each arch")
    s.add_argument("--entry", help="with --cu: the kernel to take (source name or symbol)")
    s.add_argument("--triton", metavar="MODULE:FUNCTION", help="a triton.jit function of your own (needs --spec)")
    s.add_argument(
        "--spec",
        help="JSON/TOML for the user kernel(s) given: a [launch] table (arguments, grid, sizes, reference) to run "
        "them with --run; for --triton also signature, constexprs, divisible_by_16, num_warps",
    )
    s.add_argument("--out", "-o", help="output dir (default runs/<experiment>); re-running resumes it")
    s.add_argument("--jobs", "-j", type=int, help="parallel ptxas processes (default: all cores)")
    s.add_argument("--timeout", type=float, default=600.0, help="seconds before a ptxas run counts as hung")
    s.add_argument("--fresh", action="store_true", help="discard finished variants in the output dir")
    s.add_argument("--no-cache", action="store_true", help="do not read or write the content-addressed cache")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument(
        "--names-from-scan",
        action="store_true",
        help="also test a name for every trigger literal ptxas-scan finds in the sweep's ptxas",
    )
    s.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    s.add_argument(
        "--run",
        dest="run",
        action="store_true",
        default=None,
        help="also time every name on the GPU (default: when a GPU is visible)",
    )
    s.add_argument("--no-run", dest="run", action="store_false", help="static analysis only")
    s.set_defaults(func=cmd_rename_sweep)

    s = sub.add_parser("toolchain", help="list ptxas/nvdisasm/cuobjdump/nvcc found, or install more from pip wheels")
    s.add_argument("action", nargs="?", choices=["list", "install"], default="list")
    s.add_argument("versions", nargs="*", help="CUDA versions to install (e.g. 12.4.131, 12.6)")
    s.add_argument("--kinds", default="ptxas", help="with install: comma list of ptxas,nvdisasm,cuobjdump")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_toolchain)

    s = sub.add_parser("kernels", help="list the registered kernel families")
    s.set_defaults(func=cmd_kernels)

    s = sub.add_parser("emit", help="compile one registered kernel to PTX for a target (no GPU)")
    _kernel_args(s, "fp16")
    s.add_argument("--config", default="default")
    s.add_argument("--name", help="entry name, set through Triton's repr= (the frontend path)")
    s.add_argument("--seq-len", type=int, default=4096)
    s.add_argument("--output", "-o")
    s.set_defaults(func=cmd_emit)

    s = sub.add_parser("rename", help="rename a PTX file's entry and prove nothing else changed")
    s.add_argument("ptx")
    s.add_argument("--name", required=True, help="new name or template such as cutlass_{base}")
    s.add_argument("--entry", help="which entry (default: the first)")
    s.add_argument("--output", "-o")
    s.set_defaults(func=cmd_rename)

    s = sub.add_parser("assemble", help="run ptxas on a PTX file and report resources")
    s.add_argument("ptx")
    s.add_argument("--arch", help="default: the PTX's .target")
    s.add_argument("--ptxas", default="triton", help="triton | newest | VERSION | PATH")
    s.add_argument("--flags", help="ptxas flags (default: Triton's -lineinfo)")
    s.add_argument("--timeout", type=float, default=600.0)
    s.add_argument("--output", "-o", help="write the cubin here")
    s.set_defaults(func=cmd_assemble)

    s = sub.add_parser("disasm", help="SASS listing with decoded control codes (or JSON)")
    s.add_argument("cubin")
    s.add_argument("--kernel")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_disasm)

    s = sub.add_parser("diff", help="how two cubins' SASS differs (exit 1 if not identical)")
    s.add_argument("a", nargs="?", help="cubin A (baseline)")
    s.add_argument("b", nargs="?", help="cubin B")
    s.add_argument("--kernel-a")
    s.add_argument("--kernel-b")
    s.add_argument("--ptx", help="instead of cubins: assemble this PTX under its name and under --rename")
    s.add_argument("--rename", default="cutlass_{base}")
    s.add_argument("--arch")
    s.add_argument("--ptxas", default="triton")
    s.add_argument("--json", action="store_true")
    s.add_argument("--rows", action="store_true", help="with --json: include the per-instruction alignment")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("report", help="HTML + JSON report of a sweep's run directory")
    s.add_argument("run_dir")
    s.add_argument("--out", "-o", help="default: RUN_DIR/report")
    s.add_argument("--notebook", help="link to an HTML export of the analysis notebook")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("ptxas-scan", help="find string-compare calls with literal arguments inside ptxas")
    s.add_argument("paths", nargs="*", help="ptxas binaries (default: every ptxas the toolchain knows)")
    s.add_argument("--version", action="append", help="scan the ptxas of this version (repeatable)")
    s.add_argument("--functions", nargs="+", default=["strstr", "strcmp", "strncmp", "strcasecmp", "memcmp"])
    s.add_argument("--all", action="store_true", help="every compare function, not just --functions")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ptxas_scan)

    s = sub.add_parser("repro", help="re-run a recorded sweep with its recorded tools and compare")
    s.add_argument("run_dir")
    s.add_argument("--out", "-o", help="where the re-run goes (default: a temporary directory)")
    s.add_argument("--jobs", "-j", type=int)
    s.add_argument("--quiet", "-q", action="store_true")
    s.set_defaults(func=cmd_repro)

    s = sub.add_parser("bisect", help="first ptxas release where a name changes the code beyond noise")
    s.add_argument("--name", default="cutlass_{base}")
    _kernel_args(s, "fp8e5")
    s.add_argument("--versions", help="comma list (default: every ptxas installed)")
    s.add_argument("--fetch", action="store_true", help="first install the releases from their pip wheels")
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--jobs", "-j", type=int)
    s.set_defaults(func=cmd_bisect)

    s = sub.add_parser("cubin", help="facts of a cubin: sections, EIATTR records, registers, capmerc")
    s.add_argument("cubin")
    s.set_defaults(func=cmd_cubin)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PtxprobeError as exc:
        errors.print(f"[bold red]ptxprobe: {type(exc).__name__}:[/] {exc}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
