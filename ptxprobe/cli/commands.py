"""The small commands: one stage each, its record rendered as a table or one JSON document."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

import tomllib

from ptxprobe.binary.sass import disassemble
from ptxprobe.cli import FOUND_DIFFERENCES, OK, TOOL_FAILED, USAGE
from ptxprobe.cli.render import emit_json, say, show, table
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import CubinError, SpecError, ToolNotFound
from ptxprobe.core.stages import STAGES
from ptxprobe.ptx.check import check_files, check_renames
from ptxprobe.ptx.rename import TRIGGER, module_wide, rename_symbols, template_renames, validate_name
from ptxprobe.ptx.text import retargeted
from ptxprobe.sources import RegisteredSource
from ptxprobe.sources.files import load_ptx
from ptxprobe.sources.launch import unfilled
from ptxprobe.sources.registry import families, family
from ptxprobe.sources.spec_init import spec_for, write_spec
from ptxprobe.static.experiment import check_arch
from ptxprobe.toolchain.assemble import TRITON_FLAGS, assemble
from ptxprobe.toolchain.tools import discover, expand_versions, install, max_ptx_isa, select_ptxas


def _read_bytes(path: str, what: str) -> bytes:
    p = Path(path)
    if p.is_dir():
        raise CubinError(f"{p} is a directory, not a {what}")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise CubinError(f"{p}: no such {what} file") from None
    except OSError as exc:
        raise CubinError(f"{p}: cannot read ({exc.strerror})") from None


def _write(path: str, data: bytes | str) -> None:
    p = Path(path)
    try:
        p.write_bytes(data) if isinstance(data, bytes) else p.write_text(data)
    except OSError as exc:
        raise SpecError(f"cannot write {p}: {exc.strerror or exc}") from None


def _arch(arch: str | None) -> str | None:
    return None if arch is None else check_arch(arch)


def cmd_cache(args) -> int:
    """``cache info``: where the cache is and what each stage holds; ``cache clear``: remove it, or some stages."""
    cache = Cache()
    if args.action == "clear":
        known = {u.namespace for u in cache.usage()} | set(STAGES) | {"cubin"}
        unknown = sorted(set(args.stage or ()) - known)
        if unknown:
            raise SpecError(f"cache clear --stage: no stage {', '.join(unknown)} (stages: {', '.join(sorted(known))})")
        usage = cache.clear(args.stage)
        verb = "removed"
    elif args.stage:
        raise SpecError("--stage goes with `ptxprobe cache clear`")
    else:
        usage, verb = cache.usage(), "holds"
    rows = [asdict(u) for u in usage]
    if args.json:
        emit_json({"root": str(cache.root), "action": args.action, "namespaces": rows})
        return OK
    say(f"cache {cache.root} ({'PTXPROBE_CACHE' if 'PTXPROBE_CACHE' in os.environ else 'default'}) {verb} "
        f"{sum(u.entries for u in usage)} entries, {sum(u.bytes for u in usage) / 1e6:.1f} MB")
    if rows:
        show(table("", ["namespace", "entries", "bytes"], [[r["namespace"], r["entries"], r["bytes"]] for r in rows]))
    return OK


def cmd_spec(args) -> int:
    """``spec init TARGET``: a commented spec from the kernel's own parameters, on stdout or in ``-o FILE``."""
    spec_dir = Path(args.output).parent if args.output not in (None, "-") else None
    text = spec_for(args.target, _arch(args.arch), tuple(args.include_dir), spec_dir)
    written = write_spec(text, args.output, args.force)

    todo = len(unfilled(tomllib.loads(text)))
    if args.json:
        emit_json({"target": args.target, "written": str(written) if written else None, "todo": todo,
                   "spec": None if written else text})
    elif written is None:
        sys.stdout.write(text)
    else:
        say(f"wrote {written}" + (f": fill in its {todo} \"TODO\" value(s) and check the guesses" if todo else
                                  ": check the values marked guess"))
    return OK


def cmd_toolchain(args) -> int:
    if args.action == "install":
        if not args.versions:
            raise SpecError("toolchain install needs one or more CUDA versions, e.g. 12.4.131, 12.6 or all")
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
        versions = expand_versions(args.versions)
        recs, missing = [], []
        for v in versions:
            for kind in kinds:
                try:
                    recs += install(v, (kind,))
                except ToolNotFound as exc:  # no wheel of this kind for this release: said, the rest goes on
                    missing.append(f"{kind} {v}: {exc}")
        if args.json:
            emit_json({"installed": [r.__dict__ for r in recs], "missing": missing})
        else:
            for rec in recs:
                say(f"{rec.kind} {rec.version}: {rec.path} (wheel sha256 {rec.wheel_sha256[:12]}, "
                    f"binary {rec.sha256[:12]})")
        for m in missing:
            print(f"ptxprobe: not installed: {m}", file=sys.stderr)
        return TOOL_FAILED if missing and (len(versions) == 1 or not recs) else OK
    tools = discover()
    recs = [{**t.to_dict(), "max_ptx_isa": ".".join(map(str, max_ptx_isa(t))) if t.kind == "ptxas" else None}
            for t in tools]
    if args.json:
        emit_json(recs)
        return OK
    show(table("toolchain", ["kind", "version", "origin", "max PTX ISA", "sha256", "path"],
               [[r["kind"], r["version"], r["origin"], r["max_ptx_isa"], r["sha256"][:12], r["path"]] for r in recs]))
    return OK


def cmd_kernels(args) -> int:
    fams = list(families().values())
    recs = [{"name": f.name, "frontend": f.frontend, "dtypes": list(f.dtypes), "head_dims": list(f.head_dims),
             "configs": [c.label for c in f.configs], "archs": list(f.archs), "description": f.description}
            for f in fams]
    if args.json:
        emit_json(recs)
        return OK
    show(table("kernels", ["name", "frontend", "dtypes", "head dims", "configs", "archs", "description"],
               [[r["name"], r["frontend"], ",".join(r["dtypes"]), ",".join(map(str, r["head_dims"])),
                 ",".join(r["configs"]), ",".join(r["archs"]) or "any", r["description"]] for r in recs]))
    return OK


def cmd_emit(args) -> int:
    fam = family(args.kernel)
    arch = _arch(args.arch)
    spec = fam.spec(args.dtype, args.head_dim, args.causal, args.config)
    src = RegisteredSource(fam.name, spec.dtype, spec.head_dim, spec.causal, spec.config.label, args.seq_len)
    if args.name is not None:
        validate_name(args.name)
        if fam.frontend != "triton":
            raise SpecError(f"--name renames through Triton's repr=; {fam.name} is {fam.frontend}: "
                            "use `ptxprobe rename` on its PTX")
        e = src.emit(arch, Cache(), name=args.name)
    else:
        e = src.emit(arch, Cache())
    if args.output:
        _write(args.output, e.ptx)
        print(f"{spec.key} {arch} entry={e.entry} -> {args.output}", file=sys.stderr)
    if args.json:
        emit_json({"kernel": spec.key, "arch": arch, "entry": e.entry, "ptx_sha256": e.ptx_sha256,
                   "written": args.output, "ptx": None if args.output else e.ptx})
    elif not args.output:
        sys.stdout.write(e.ptx)
    return OK


def cmd_rename(args) -> int:
    src = load_ptx(args.ptx)
    entry = args.entry or src.entry
    if entry not in src.swept_entries:
        raise SpecError(f"{args.ptx}: no entry {entry!r} (have: {', '.join(src.swept_entries)})")
    names = template_renames(src.ptx, entry, args.name) if "{" in args.name else {entry: args.name}
    new = names[entry]
    if all(old == to for old, to in names.items()):  # what the sweep refuses too: a kernel is its own baseline
        why = f"; no other symbol of its module holds {TRIGGER!r}" if module_wide(args.name) else ""
        raise SpecError(f"--name {args.name} gives {entry} its own name{why}: nothing to rename")
    r = rename_symbols(src.ptx, names)
    check = check_renames(src.ptx, r.ptx, names)
    if args.output:
        _write(args.output, r.ptx)
    also = f" and {len(names) - 1} other symbols holding the trigger" if len(names) > 1 else ""
    if args.json:
        emit_json({"entry": entry, "name": new, "renamed": names, "sites": r.sites, "check": check.to_json(),
                   "written": args.output, "ptx": None if args.output else r.ptx})
    else:
        if not args.output:
            sys.stdout.write(r.ptx)
        print(f"renamed {entry} -> {new}{also}: {r.sites} sites; independent check: "
              f"{'only name sites differ' if check.equal else check.detail}", file=sys.stderr)
    return OK if check.equal else FOUND_DIFFERENCES


def cmd_check_rename(args) -> int:
    res = check_files(args.base, args.variant, args.base_name, args.name)
    if args.json:
        emit_json(res.to_json())
    else:
        if res.equal:
            say(f"{res.name_a} -> {res.name_b}: only name sites differ ({len(res.sites)} sites)")
            show(table("name sites", ["line", "base", "variant", "where"],
                       [[s.line, s.base, s.variant, s.where] for s in res.sites]))
        else:
            say(f"{res.name_a} -> {res.name_b}: NOT a pure rename: {res.detail}")
    return OK if res.equal else FOUND_DIFFERENCES


def cmd_assemble(args) -> int:
    from ptxprobe.binary.cubin import read_cubin

    src = load_ptx(args.ptx)
    arch = _arch(args.arch) or src.arch
    tool = select_ptxas(arch, args.ptxas)[0]
    flags = tuple(args.flags.split()) if args.flags is not None else TRITON_FLAGS
    ptx = src.ptx if arch == src.arch else retargeted(src.ptx, arch)  # --arch: as the sweep and diff retarget
    art = assemble(ptx, arch, tool, flags, timeout=args.timeout)
    rec = {k: v for k, v in art.to_json().items() if k != "stderr"}
    rec["reports"] = {k: asdict(v) for k, v in art.reports.items()}
    if art.ok:
        facts = read_cubin(art.cubin())
        rec["kernels"] = {k: {"text_bytes": f.text_bytes, "capmerc_bytes": f.capmerc_bytes, "registers": f.regcount,
                              "n_instructions": f.n_instructions} for k, f in facts.kernels.items()}
        if args.output:
            _write(args.output, art.cubin())
    else:
        rec["error"] = art.message
    emit_json(rec)
    if not art.ok:
        print(f"ptxprobe: {art.message.splitlines()[0]}", file=sys.stderr)
    if art.status == "unsupported_option":  # an option this ptxas lacks is the user's input, as in the sweep and tune
        return USAGE
    return OK if art.ok else TOOL_FAILED


def cmd_cubin(args) -> int:
    from ptxprobe.binary.cubin import read_cubin

    facts = read_cubin(_read_bytes(args.cubin, "cubin"))
    rec = {"sha256": facts.sha256, "arch": facts.arch, "tkinfo": facts.tkinfo, "kernels": {}}
    for name, k in facts.kernels.items():
        rec["kernels"][name] = {"text_bytes": k.text_bytes, "text_sha256": k.text_sha256,
                                "n_instructions": k.n_instructions, "capmerc_bytes": k.capmerc_bytes,
                                "registers": k.regcount, "function_attrs": k.function_attrs,
                                "eiattrs": [[a.name, a.value] for a in k.attrs]}
    emit_json(rec)
    return OK


def cmd_disasm(args) -> int:
    from ptxprobe.binary.cubin import read_cubin

    data = _read_bytes(args.cubin, "cubin")
    read_cubin(data)  # not a cubin: an input error, said before the disassembler is asked
    listings = disassemble(data)
    if args.kernel:
        if args.kernel not in listings:
            raise SpecError(f"no kernel {args.kernel!r} in {args.cubin} (have: {', '.join(listings)})")
        listings = {args.kernel: listings[args.kernel]}
    if args.json:
        emit_json({k: {"disassembler": v.disassembler, "control_decode": v.control_decode,
                       "instructions": [i.to_json() for i in v.instructions]} for k, v in listings.items()})
        return OK
    out = sys.stdout
    for name, lst in listings.items():
        out.write(f"// {name}: {len(lst.instructions)} instructions (by {lst.disassembler}; control words: "
                  f"{lst.control_decode})\n")
        where = {off: lab for lab, off in lst.labels.items()}
        for ins in lst.instructions:
            if ins.offset in where:
                out.write(f"{where[ins.offset]}:\n")
            out.write(f"  /*{ins.offset:05x}*/ {ins.control.compact()}  {ins.text}\n")
    out.flush()
    return OK


def cmd_diff(args) -> int:
    from ptxprobe.binary.diff import diff_cubins
    from ptxprobe.static.ptxdiff import noise_aware_ptx_diff

    if args.ptx:
        if args.a or args.b:
            raise SpecError("diff takes two cubins (A B) or --ptx FILE, not both")
        if args.kernel_b:
            raise SpecError("with --ptx, --kernel-a picks the entry; --kernel-b goes with two cubins")
        res = noise_aware_ptx_diff(args.ptx, args.rename, _arch(args.arch), args.ptxas, args.repeat or None,
                                   args.kernel_a)
        d = res.diff
    else:
        if not (args.a and args.b):
            raise SpecError("diff needs two cubins (A B) or --ptx FILE --rename NAME")
        res = None
        from ptxprobe.binary.cubin import read_cubin

        a, b = _read_bytes(args.a, "cubin"), _read_bytes(args.b, "cubin")
        read_cubin(a), read_cubin(b)  # input errors before the disassembler runs
        d = diff_cubins(a, b, args.kernel_a, args.kernel_b)
    verdict = res.verdict if res else d.verdict
    if args.json:
        doc = d.to_json(with_rows=args.rows)
        if res:
            doc["noise"] = res.to_json()
        emit_json(doc)
    else:
        _render_diff(d, res)
    return OK if verdict == "identical" else FOUND_DIFFERENCES


def _render_diff(d, res) -> None:
    c = d.cubin_deltas
    head = f"[bold]{d.kernel_a} -> {d.kernel_b}[/]: {d.verdict}  " + ", ".join(f"{k} {v}" for k, v in d.counts.items())
    say(head)
    if d.differing:
        say("the machine code's facts differ in: " + ", ".join(d.differing)
            + (" (data the kernel reads: it may compute another result)" if d.verdict == "different_data" else ""))
    if res:
        say(f"over {res.runs} assemblies per name: {res.verdict} (baseline {res.baseline_outputs} distinct, "
            f"renamed {res.variant_outputs} distinct)")
    rows = [[k, c[k][0], c[k][1]] for k in ("registers", "frame_size", "text_bytes", "capmerc_bytes")]
    rows += [["instructions", d.a.instructions, d.b.instructions],
             ["stall cycles", d.a.stall_cycles, d.b.stall_cycles],
             ["barrier waits", d.a.barrier_waits, d.b.barrier_waits],
             ["LDL/STL", f"{d.a.local_loads}/{d.a.local_stores}", f"{d.b.local_loads}/{d.b.local_stores}"]]
    rows += [[f"loop {lp['loop']} instr/stall/waits",
              "/".join(str(x[0]) for x in (lp["instructions"], lp["stall_cycles"], lp["barrier_waits"])),
              "/".join(str(x[1]) for x in (lp["instructions"], lp["stall_cycles"], lp["barrier_waits"]))]
             for lp in d.loop_deltas if (lp["instructions"][0] or 0) > 4]
    show(table("diff", ["", d.kernel_a, d.kernel_b], rows))
    if d.opcode_delta:
        say("opcodes (B-A): " + ", ".join(f"{k} {v:+d}" for k, v in d.opcode_delta.items()))

