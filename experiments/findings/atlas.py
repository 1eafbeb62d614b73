"""FINDINGS: the name in the wild, its first step: the corpus counted and the pilot that measures a kernel's cost."""

from __future__ import annotations

import json
from collections import Counter

from experiments.analysis import static_runs as analysis

ATLAS = "2026-12-05-cpu-atlas-pilot"  # experiments/atlas: census.json and pilot.json
TRITON_ATLAS = "2026-12-06-cpu-atlas-triton"  # experiments/atlas interpreted: interpreted.json
INTERPRET_CHECK = "2026-12-06-h100-interpret-check"  # h200_study.sh interpret-check: interpret-check.json
INTRO = ("How common the name effect is in kernels libraries ship (`python -m experiments.atlas`, the corpus pinned "
         "in `experiments/atlas/corpus.toml`; the wheels are fetched, never committed). So far: what the "
         "corpus holds, what one kernel costs to sweep, the PTX wheels ship as the driver's JIT assembles it, and "
         "the kernels of Triton and CuTe DSL libraries as their own ops launch or compile them.")


def _records() -> tuple[dict, dict]:
    d = analysis.results_dir(ATLAS)
    return json.loads((d / "census.json").read_text()), json.loads((d / "pilot.json").read_text())


def section() -> list[str]:
    census, pilot = _records()
    rows = ["| library | shared library | PTX modules | entries | kernels (distinct bodies) | source functions | "
            "PTX targets | ships SASS for | trigger in the identifier | trigger only elsewhere (scope, template "
            "arguments) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, lib in census["libraries"].items():
        for r in lib["libraries"]:
            rows.append(f"| {name} {lib['pip'].split('==')[-1]} | `{r['member']}` | {r['modules']} | {r['entries']} | "
                        f"{r['kernels']} | {r['source_functions']} | {', '.join(r['targets'])} | "
                        f"{', '.join(r['sass_archs'])} | {r['trigger_in_identifier']} | {r['trigger_elsewhere']} |")
    libs = [r for lib in census["libraries"].values() for r in lib["libraries"]]
    total = sum(r["kernels"] for r in libs)
    under = sum(r["trigger_in_identifier"] + r["trigger_elsewhere"] for r in libs)
    elsewhere = sum(r["trigger_elsewhere"] for r in libs)
    jit = sum(r["trigger_in_identifier"] + r["trigger_elsewhere"] for r in libs
              if not any(a.startswith("sm_90") for a in r["sass_archs"]))
    entries = sum(r["entries"] for r in libs)
    cells = ["| library | entries swept | arch | ptxas | kernels | assemblies | wall s | ptxas s | wall s per kernel | "
             "changed of compared |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in pilot["cells"]:
        cells.append(f"| {c['library']} | `{c['entries']}` | {c['arch']} | {c['ptxas_version']} | {c['kernels']} | "
                     f"{c['assemblies']} | {c['wall_seconds']} | {c['ptxas_seconds']} | "
                     f"{c['wall_seconds_per_kernel']} | {c['changed']} of {c['compared']} |")
    per = [c["wall_seconds_per_kernel"] for c in pilot["cells"]]
    budget_h = [total * p * 2 * 4 / 3600 for p in (min(per), max(per))]  # two archs, four releases per kernel
    return [f"**The corpus counted** (`{ATLAS}`, `python -m experiments.atlas census`): {total} distinct kernels "
            f"from {entries} entries in {len(libs)} shared libraries of {len(census['libraries'])} wheels; "
            f"{under} of the entries already hold the trigger, {elsewhere} of them only outside their own identifier "
            f"(a CUTLASS type in their template arguments). {jit} of those are in libraries that ship no SASS for "
            "sm_90: where one runs on a Hopper, the driver assembles its PTX, under the heuristic, without anyone "
            "having named it so (whether the library picks these kernels there is its own choice).", "", *rows, "",
            f"**What a kernel costs** (`python -m experiments.atlas pilot`, cold cache, {pilot['machine']['cpus']} "
            "CPUs, every name the sweep's defaults choose, ptxas repeated until its own spread is known):", "",
            *cells, "",
            f"At {min(per)} to {max(per)} s per kernel and cell, {total} kernels at two archs and four releases, "
            f"one direction, take {budget_h[0]:.1f} to {budget_h[1]:.1f} hours on this machine "
            f"({pilot['machine']['cpus']} CPUs): the atlas needs more "
            "CPUs than this machine's (a Ray cluster: docs/ray.md) or a stratified sample of the large families "
            "(FA2's instantiations), as the issue plans.", ""]


def _templates(release: dict) -> tuple[str, str, bool]:
    """The name templates of a cell's trigger and control, and whether its kernels are born with the trigger: a
    Triton library's kernels are renamed ``cutlass_…`` (control ``xutlass_…``); a CuTe DSL library's, born
    ``kernel_cutlass_…``, are compared as shipped (``{base}``) with the trigger spelled out (the baseline,
    ``kernel_xutlass_…``), the control respelling it ``zutlass``."""
    if "cutlass_{base}" in release["names"]:
        return "cutlass_{base}", "xutlass_{base}", False
    return "{base}", "{base_control}", True


def triton_section() -> list[str]:
    """The Triton libraries and the CuTe DSL library: each cell's kernels, and what the trigger and the control do
    to them; a library whose kernels are born with the trigger is measured by removing it."""
    rec = json.loads((analysis.results_dir(TRITON_ATLAS) / "interpreted.json").read_text())
    rows = ["| library | arch | ptxas | kernels (distinct PTX) | source functions | the kernels' own names | "
            "changed by the trigger | of source functions | fewer / more / same registers with the trigger | "
            "what changed | changed under the control |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    said, born = [], set()
    for c in rec["cells"]:
        lib = rec["libraries"][c["library"]]
        label = f"{c['library']} {lib['pip'].split('==')[-1]}"
        trigger, control, holds = _templates(c["releases"][0])
        if holds:
            born.add(label)
        for r in c["releases"]:
            t, ctl = r["names"][trigger], r["names"][control]
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(t["kinds"].items(), key=lambda kv: -kv[1])) or "-"
            rows.append(f"| {label} | {c['arch']} | {r['ptxas_version']} | {r['kernels']} | {r['source_functions']} | "
                        + ("`kernel_cutlass_…`: trigger removed" if holds else "no trigger: `cutlass_` added")
                        + f" | {t['changed']} ({t['changed'] / r['kernels']:.0%}) | {t['changed_functions']} | "
                        f"{t['fewer_registers']} / {t['more_registers']} / {t['same_registers']} | {kinds} | "
                        f"{ctl['changed']} |")
        first = c["releases"][0]["names"][trigger]
        counts = {(r["names"][trigger]["changed"], r["kernels"]) for r in c["releases"]}
        changed, kernels = min(counts)
        failed = sorted({o["op"] for o in c["ops"] if not o["ran"] and "refused" not in o})
        refused = [o for o in c["ops"] if "refused" in o]
        names = sorted({n.rpartition(":")[2] for n in first["changed_function_names"]})
        how = ("compile differently as shipped than with `cutlass` spelled out of their names, `kernel_xutlass_…` "
               if holds else "compile differently when renamed `cutlass_…` ")
        ran = (f"its driver compiled {c['ops_ran']} of {c['ops_tried']} op calls ahead of time "
               f"({c['program_seconds']:.0f} s" if holds else
               f"its driver ran {c['ops_ran']} of {c['ops_tried']} op calls "
               f"({c['program_seconds']:.0f} s under the interpreter")
        cost = (f"; the cell took {c['wall_seconds']:.0f} s and {c['cpu_seconds']:.0f} CPU s, from an empty cache"
                if c.get("cpu_seconds") is not None else "")
        registers = (f"; as shipped (ptxas {c['releases'][0]['ptxas_version']}), {first['more_registers']} of them "
                     f"hold more registers than with it spelled out and {first['fewer_registers']} fewer (the median "
                     f"change {first['median_register_delta']:+g} registers), {first['spill_changed']} change their "
                     "spills" if holds else "")
        controls = ", ".join(f"{r['names'][control]['changed']} at {r['ptxas_version']}" + (
            f" (a release whose own output varies: {r['baseline_spread']} of the {r['kernels']} baselines gave more "
            "than one machine code over their repeats, so a control's difference there may be that variation)"
            if r.get("baseline_spread") else "") for r in c["releases"] if r["names"][control]["changed"])
        registers += f"; the control changes {controls}" if controls else ""
        said.append(f"{label} at {c['arch']}: "
                    + (f"{changed} of its {kernels} kernels" if len(counts) == 1 else
                       f"{changed} to {max(counts)[0]} of its {kernels} kernels, by release,")
                    + f" {how}({first['changed_functions']} of "
                    f"{c['releases'][0]['source_functions']} source functions) at every release swept{registers}; "
                    f"{ran}" + (f"; not run: {', '.join(failed)}" if failed else "")
                    + (f"; {len(refused)} refused by the library for the arch" if refused else "") + f"){cost}; "
                    + ("" if holds else f"{c['not_compiled']} recorded launches could not be compiled; ")
                    + "the functions whose kernels change: "
                    f"{', '.join(f'`{n}`' for n in names[:12])}" + (", …" if len(names) > 12 else "") + ".")
    releases = sorted({r["ptxas_version"] for c in rec["cells"] for r in c["releases"]})
    triton = sorted({f"{c['library']}" for c in rec["cells"]} - {b.rsplit(' ', 1)[0] for b in born})
    cute = (f" A CuTe DSL library's kernels are born with the trigger (every symbol the DSL makes is "
            f"`kernel_cutlass_…`): {' and '.join(sorted(born))} are compiled ahead of time on fake tensors by "
            "their own compile functions (`ptxprobe capture --arch`: the DSL's target pinned, no interpreter, no GPU; "
            "quack's choices that ask the device read `QUACK_ARCH`, set to the target; its GEMMs at quack's default "
            "config for the arch, since its autotuner needs a GPU; FlashAttention-4's forward, its training forward "
            "and its backward as its own interface compiles them under torch's `FakeTensorMode`, the kernel class "
            "and config picked for `FLASH_ATTENTION_ARCH`, set to the target, and a card's SM count), and the "
            "direction is the other one: what removing the "
            "trigger does, each kernel as shipped against its name with `cutlass` spelled out (`xutlass`, the "
            "baseline), the control respelling it `zutlass`." if born else "")
    return [f"**Triton and CuTe DSL libraries, as their own ops launch or compile them** (`{TRITON_ATLAS}`, `python "
            "-m experiments.atlas interpreted`): each library's ops called forward and backward at a real model's "
            "shapes (`experiments/atlas/drivers/`), then rename-swept at "
            f"{', '.join(releases)}. The Triton libraries' ({', '.join(triton)}) launches run on CPU tensors, each "
            "recorded under Triton's interpreter and compiled for the arch (`ptxprobe capture --interpret`, no GPU: "
            "an autotuned kernel at every config it lists); none of their kernels holds the trigger: the question "
            "is what naming one `cutlass_…` would do. Under the interpreter a library's host code sees no GPU, so a "
            "choice it makes from the device takes its no-GPU branch; a GPU capture of the same calls checks it "
            f"(below).{cute}", "", *rows, "", *[f"- {line}" for line in said], "", *_coverage(rec),
            *_interpret_check()]


def _coverage(rec: dict) -> list[str]:
    """Each library's source functions reached by its cells, against every function its wheel decorates as a
    kernel (coverage.json: the wheel's modules read with ast)."""
    cov = json.loads((analysis.results_dir(TRITON_ATLAS) / "coverage.json").read_text())["libraries"]
    parts = []
    for name, lib in cov.items():
        reached = max((r["source_functions"] for c in rec["cells"] if c["library"] == name for r in c["releases"]),
                      default=0)
        kinds = [f"{n} `@{k}`" for k, n in lib["decorated"].items() if n]
        parts.append(f"{name} {reached} of {sum(lib['decorated'].values())} ({', '.join(kinds)})")
    return [f"**What the drivers reach of what each library ships** (`{TRITON_ATLAS}`, `python -m experiments.atlas "
            "coverage`: every function a wheel's Python decorates as a GPU kernel, found by parsing its modules): "
            "the source functions of a library's cells against all its kernel functions: " + "; ".join(parts)
            + ". A driver calls a library's ops at a model's shapes; the functions it does not reach are ops it does "
            "not call, or other paths (dtypes, shapes, options, another frontend) of the ops it calls.", ""]


def _interpret_check() -> list[str]:
    """The interpreter's capture against a GPU capture of the same driver, on one card."""
    d = analysis.results_dir(INTERPRET_CHECK)
    check = json.loads((d / "interpret-check.json").read_text())
    card = json.loads((d / "manifest.json").read_text())["gpu"].split(", ")
    only_gpu = sorted({k.split(" ")[0] for k in check["only_gpu"]})
    only_cpu = sorted({k.split(" ")[0] for k in check["only_interpreted"]})
    gpu_dyt, cpu_dyt = (sum(k["entry"] == "_dyt_fwd_kernel" for k in json.loads((d / f).read_text())["kernels"])
                        for f in ("gpu-capture.captured.json", "interpreted-capture.captured.json"))
    return [f"**Checked on a GPU** (`{INTERPRET_CHECK}`, {card[0]} `{card[1][:12]}…`): the liger-kernel driver "
            f"captured with CUDA tensors through Triton's own JIT compiled {check['gpu_kernels']} kernels; the "
            f"interpreter's capture on the same machine's CPU holds {check['same_ptx']} of them byte for byte "
            f"({check['same_ptx'] / check['gpu_kernels']:.0%}) and {check['interpreted_kernels']} in all. The "
            f"{len(check['only_gpu'])} only the GPU compiled are of {', '.join(f'`{k}`' for k in only_gpu)}; the "
            f"{len(check['only_interpreted'])} only the interpreter's of {', '.join(f'`{k}`' for k in only_cpu)}. "
            "Both are the no-GPU branch of the library's host code: the norms' backward passes size their grid "
            "by the GPU's SM count (1 without a GPU), so a row count that is a multiple of 16 on the CPU is not "
            "on the card and specialises otherwise; `dyt`'s backward reads that count and fails without a GPU. "
            f"`dyt`'s forward: the interpreter recorded every config its autotuner lists ({cpu_dyt} distinct "
            f"kernels), the card compiled {gpu_dyt} (why fewer is not established here). Where host code does not "
            "ask the device, the interpreter's capture is the GPU's.", ""]


SHIPPED_ATLAS = "2026-12-06-cpu-atlas-shipped"  # experiments/atlas shipped: shipped.json


def _shipped_templates(release: dict) -> tuple[str, str]:
    """A shipped cell's trigger and control templates: the library entries' defaults compare each entry with the
    trigger (``{base}`` where every entry holds it, ``{base_triggered}`` where only some do: as shipped, or added)
    against the name without it (the baseline), and the control."""
    control = next(t for t in release["names"] if "control" in t)
    return next(t for t in release["names"] if t != control), control


def shipped_section() -> list[str]:
    """The wheels' embedded PTX, assembled as the driver's JIT assembles it: per library, arch and release, how many
    kernels compile differently with the trigger than with it spelled out."""
    rec = json.loads((analysis.results_dir(SHIPPED_ATLAS) / "shipped.json").read_text())
    rows = ["| library | entries | arch | ptxas | kernels (distinct bodies) | source functions | where their names "
            "hold the trigger (identifier / template arguments or scope / nowhere) | changed by the trigger | "
            "of source functions | fewer / more / same registers with the trigger | what changed | changed under the "
            "control | baselines varying over repeats |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    said = []
    for c in rec["cells"]:
        lib = rec["libraries"][c["library"]]
        label = f"{c['library']} {lib['pip'].split('==')[-1]}"
        where = c["trigger_where"]
        held = f"{where.get('identifier', 0)} / {where.get('elsewhere', 0)} / {where.get('none', 0)}"
        changed = []
        for r in c["releases"]:
            trigger, control = _shipped_templates(r)
            t, ctl = r["names"][trigger], r["names"][control]
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(t["kinds"].items(), key=lambda kv: -kv[1])) or "-"
            changed.append(t["changed"])
            rows.append(f"| {label} | `{c['entries']}` | {c['arch']} | {r['ptxas_version']} | {r['kernels']} | "
                        f"{r['source_functions']} | {held} | {t['changed']} ({t['changed'] / r['kernels']:.0%}) | "
                        f"{t['changed_functions']} | {t['fewer_registers']} / {t['more_registers']} / "
                        f"{t['same_registers']} | {kinds} | {ctl['changed']} | {r['baseline_spread']} |")
        kernels = c["releases"][0]["kernels"]
        count = (f"{min(changed)} of {kernels} kernels compile differently with the trigger than without it at "
                 f"every release swept ({len(c['releases'])})" if min(changed) == max(changed) else
                 f"{min(changed)} to {max(changed)} of {kernels} kernels, by release, compile differently with the "
                 "trigger than without it")
        medians = sorted({t["median_register_delta"] for r in c["releases"]
                          if (t := r["names"][_shipped_templates(r)[0]])["median_register_delta"] is not None})
        regs = (f"; the median register change with the trigger {medians[0]:+g}" if len(medians) == 1 else
                f"; the median register change with the trigger {medians[0]:+g} to {medians[-1]:+g} by release"
                if medians else "")
        cost = (f" (the cell {c['wall_seconds']:.0f} s, {c['cpu_seconds']:.0f} CPU s from an empty cache)"
                if c.get("cpu_seconds") is not None else "")
        said.append(f"{label} (`{c['entries']}`) at {c['arch']}: {count}{regs}{cost}.")
    return [f"**Shipped PTX, as the driver's JIT assembles it** (`{SHIPPED_ATLAS}`, `python -m experiments.atlas "
            "shipped`): each wheel's embedded PTX read with `ptxprobe rename-sweep --lib` (a family sampled where "
            "corpus.toml names one) and assembled for each arch at each release; each entry compared with the "
            "trigger in its name against the name without it, the baseline (the sweep's names for library entries, "
            "`ptx.rename`): an "
            "entry whose name holds `cutlass`, in its identifier or only in its template arguments or scope, as "
            "shipped against it spelled `xutlass` (the control `zutlass`); one whose name holds none, renamed "
            "`cutlass_…` against its own name (the control `xutlass_…`). A kernel is a distinct entry body "
            "(instantiations whose PTX is the same with the name normalised count once).", "", *rows, "",
            *[f"- {line}" for line in said], ""]


FLOOR, CAP, GOAL = 50, 0.40, 1000  # the atlas's goals: kernels per library at least, share of the whole at most, all


def standing() -> list[str]:
    """Where the atlas stands against its goals: per library the kernels swept (its largest cell: a library's cells
    at several archs hold the same kernels), their share of all, and which floor or cap each misses."""
    shipped = json.loads((analysis.results_dir(SHIPPED_ATLAS) / "shipped.json").read_text())
    triton = json.loads((analysis.results_dir(TRITON_ATLAS) / "interpreted.json").read_text())
    kernels: dict[str, int] = {}
    for c in [*shipped["cells"], *triton["cells"]]:
        kernels[c["library"]] = max(kernels.get(c["library"], 0), max(r["kernels"] for r in c["releases"]))
    total = sum(kernels.values())
    low = [f"{n} ({k})" for n, k in kernels.items() if k < FLOOR]
    high = [f"{n} ({k / total:.0%})" for n, k in kernels.items() if k / total > CAP]
    return [f"**Where the atlas stands** (its goals: at least {GOAL} kernels from at least 6 libraries, each with at "
            f"least {FLOOR} and none more than {CAP:.0%} of all): {total} kernels from {len(kernels)} libraries "
            "(each library's largest cell: " + ", ".join(f"{n} {k}" for n, k in sorted(kernels.items())) + "); "
            + (f"under the floor: {', '.join(low)}" if low else "every library at its floor")
            + "; " + (f"over the cap: {', '.join(high)}" if high else "none over the cap")
            + ". A library's cells at several archs hold the same kernels, so they count once.", ""]


PRUNE_CHECK = "2026-12-06-cpu-atlas-prune-check"  # experiments/atlas prune-check: prune_check.json


def prune_check_section() -> list[str]:
    """Whether a kernel cut from its module (what ``--lib LIB:ENTRY`` assembles) gets the whole module's code."""
    rec = json.loads((analysis.results_dir(PRUNE_CHECK) / "prune_check.json").read_text())
    parts = []
    for name, s in rec["summary"].items():
        n = s["assembled_both_ways"]
        modules = len({(r["member"], r["module"]) for r in rec["entries"] if r["library"] == name})
        parts.append(f"{name} {rec['libraries'][name]['pip'].split('==')[-1]}: {n} kernels from {modules} modules, "
                     f"{s['same_bytes']} byte for byte, {s['same_masked']} the same with the module's addresses "
                     f"masked, {s['same_registers']} with the same registers and {s['same_instructions']} with as "
                     f"many instructions; {s['whole_s']:.0f} s of ptxas for the whole modules against "
                     f"{s['alone_s']:.0f} s cut")
    return [f"**A kernel cut from its module** (`{PRUNE_CHECK}`, `python -m experiments.atlas prune-check`): "
            "`ptxprobe rename-sweep --lib LIB:ENTRY` assembles the chosen kernels from their module cut to them "
            "(`ptx.text.pruned_to`: they and what their code names), not the whole module (ptxas assembles every "
            f"entry it is given). Up to {rec['per_module']} sampled entries of each PTX module of at most "
            f"{rec['max_module_mb']:g} MB (seed {rec['seed']}), assembled both ways by Triton's ptxas: "
            + "; ".join(parts) + ". " + (
                "Where the bytes differ, the differences are the addresses of the module's globals (constant bank 4 "
                "offsets, relocated immediates), which move when the other kernels' globals go"
                if all(s["same_masked"] == s["assembled_both_ways"] for s in rec["summary"].values()) else
                "Some differ beyond the module's addresses: a cut module's answer is not the whole module's")
            + "; a name comparison sets both names in the same cut text. " + _cut_cells(), ""]


def _cut_cells() -> str:
    """The shipped cells swept again with their modules cut to the sampled family: the same answers?"""
    cut = json.loads((analysis.results_dir(PRUNE_CHECK) / "shipped_cut.json").read_text())
    whole = {(c["library"], c["arch"], c["entries"]): c for c in
             json.loads((analysis.results_dir(SHIPPED_ATLAS) / "shipped.json").read_text())["cells"]}
    same, cpu = [], []
    for c in cut["cells"]:
        w = whole[(c["library"], c["arch"], c["entries"])]
        same.append(c["releases"] == w["releases"] and c["trigger_where"] == w["trigger_where"])
        cpu.append(f"{c['arch']} {c['cpu_seconds']:.0f} CPU s against {w['cpu_seconds']:.0f}")
    c0 = cut["cells"][0]
    return (f"The {c0['library']} `{c0['entries']}` cells of the shipped step swept again so (`shipped_cut.json`, "
            f"each module cut to its family's kernels): " + (
                "every release's summary the same as the whole modules gave, field for field" if all(same) else
                f"{len(same) - sum(same)} of {len(same)} cells answer otherwise than the whole modules")
            + f", at {len(same)} archs ({'; '.join(cpu)}, from an empty cache).")


REDUCE_ATLAS = "2026-12-06-cpu-atlas-reduce"  # experiments/atlas reduce: reductions.json


def reduce_section() -> list[str]:
    """What the heuristic reacts to in the shipped kernels: one reduction per source function and arch."""
    rec = json.loads((analysis.results_dir(REDUCE_ATLAS) / "reductions.json").read_text())
    rows = ["| library | arch | source function | its change (registers) | predicate kept | instructions before → "
            "after | what remains | MMA in a loop | FFMA in a loop | the minimal pair | seconds |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in rec["kernels"]:
        deltas = ", ".join(f"{n} {v:+d}" for n, v in k["pair_deltas"].items()) or "same sizes, other code"
        rows.append(f"| {k['library']} | {k['arch']} | `{k['function']}` | {k['register_change']:+d} | "
                    f"{'`' + k['keep'] + '`' if k['keep'] else 'any difference'} | {k['before_instructions']} → "
                    f"{k['after_instructions']} | {k['after_in_words']} | {'yes' if k['mma_in_loop'] else 'no'} | "
                    f"{'yes' if k['fma_in_loop'] else 'no'} | "
                    f"{k['pair_verdict'] + ': ' + deltas if k['status'] == 'done' else 'stopped at its time limit'} | "
                    f"{k['reduce_seconds']:.0f} |")
    done = [k for k in rec["kernels"] if k["status"] == "done"]
    kinds = Counter((_remains(k), _change(k["pair_deltas"])) for k in done)
    public = sum(n for (where, _), n in kinds.items() if where in ("an MMA loop", "an FFMA loop"))
    ptxas = sorted({k["ptxas"] for k in done})
    libraries = sorted({k["library"] for k in rec["kernels"]})
    by_library = {lib: Counter(_remains(k) for k in done if k["library"] == lib) for lib in libraries}
    return ["**What the heuristic reacts to in shipped kernels** (`2026-12-06-cpu-atlas-reduce`, `python -m "
            "experiments.atlas reduce`): of each cell of " + ", ".join(libraries) + " (a wheel's stratified "
            "shipped cell; a captured library's cell), one kernel per source function whose code the trigger changes "
            "(the smallest: a reduction's cost grows with the kernel) reduced with `ptxprobe reduce --lib WHEEL "
            "--entry ENTRY` (a captured kernel: `--ptx` with the file its sweep kept) by Triton's ptxas ("
            + ", ".join(ptxas) + "), keeping half of its register change where its registers moved, any difference "
            f"of its code otherwise. {len(done)} of {len(rec['kernels'])} reductions finished; where each ends, and "
            "what the name still changes there: "
            + "; ".join(f"{where}, {what}: {n}" for (where, what), n in sorted(kinds.items(), key=lambda x: -x[1]))
            + f". The public conditions (an MMA in a loop, found for `tcgen05.mma` on sm_100a; an FFMA loop) "
            f"cover {public} of the {len(done)}. By library: "
            + "; ".join(f"{lib}: " + ", ".join(f"{where} {n}" for where, n in c.most_common())
                        for lib, c in by_library.items())
            + ". A reduction says what suffices in its kernel, not what is necessary in others.", "", *rows, ""]


def _change(deltas: dict) -> str:
    """What the name still changes in a minimal pair: its registers, else other sizes, else the schedule alone."""
    if deltas.get("registers"):
        return "more registers" if deltas["registers"] > 0 else "fewer registers"
    return f"other sizes ({', '.join(sorted(deltas))})" if deltas else "the schedule alone"


def _remains(k: dict) -> str:
    """Where a reduction ends: a loop holding an MMA, else one holding an FFMA, else a plain loop, else a wait loop
    inside inline asm (``mbarrier.try_wait`` spinning), else no loop."""
    if k["mma_in_loop"]:
        return "an MMA loop"
    if k["fma_in_loop"]:
        return "an FFMA loop"
    if k["loops"]:
        return "a plain loop"
    if k.get("asm_loops"):
        return "an inline-asm wait loop (" + ", ".join(sorted({x[0] for x in k["asm_loops"]})) + ")"
    return "no loop"
