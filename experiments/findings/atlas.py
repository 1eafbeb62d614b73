"""FINDINGS: the name in the wild, its first step: the corpus counted and the pilot that measures a kernel's cost."""

from __future__ import annotations

import json

from experiments.analysis import static_runs as analysis

ATLAS = "2026-12-05-cpu-atlas-pilot"  # experiments/atlas: census.json and pilot.json
INTRO = ("How common the name effect is in kernels libraries ship (`python -m experiments.atlas`, the corpus pinned "
         "in `experiments/atlas/corpus.toml`; the wheels are fetched, never committed). A first step: what the "
         "corpus holds, and what one kernel costs to sweep.")


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
