"""FINDINGS: what the atlas costs. The CPU time its committed cells took from an empty cache, per library and in all,
and the benchmark of a cell's sweep against a bare ptxas loop doing the same assemblies (bench_atlas.py)."""

from __future__ import annotations

import json

from experiments.analysis import static_runs as analysis
from experiments.findings.atlas import SHIPPED_ATLAS, TRITON_ATLAS

BENCH = "2026-12-06-cpu-atlas-bench"  # experiments/benchmarks/bench_atlas.py: bench.json


def cell_costs() -> tuple[dict[str, float], list[str]]:
    """CPU seconds per library over its cells measured from an empty cache, and the cells without a measure."""
    cells = [*json.loads((analysis.results_dir(SHIPPED_ATLAS) / "shipped.json").read_text())["cells"],
             *json.loads((analysis.results_dir(TRITON_ATLAS) / "interpreted.json").read_text())["cells"]]
    cpu: dict[str, float] = {}
    unmeasured = []
    for c in cells:
        if c.get("cpu_seconds") is None:
            unmeasured.append(f"{c['library']} {c['arch']}" + (f" ({c['entries']})" if c.get("entries", "all")
                                                                 != "all" else ""))
        else:
            cpu[c["library"]] = cpu.get(c["library"], 0.0) + c["cpu_seconds"]
    return cpu, unmeasured


def section() -> list[str]:
    cpu, unmeasured = cell_costs()
    runs = json.loads((analysis.results_dir(BENCH) / "bench.json").read_text())["cells"]
    latest = runs[-1]["code"]
    bench = {"cells": [b for b in runs if b["code"] == latest]}
    ratios = {b["label"]: [f"{r['ratio']:.2f} at {r['code']}" for r in runs if r["label"] == b["label"]]
              for b in bench["cells"]}
    cells = "; ".join(
        f"{b['label']}: {b['kernels']} entries, {b['assemblies']} ptxas runs, the sweep {b['sweep_wall_s']:.1f} s "
        f"against {b['bare_ptxas_wall_s']:.1f} s of bare ptxas ({b['ratio']:.2f}x" + (
            f"; {b['extraction_s']:.1f} s of it the wheel's cold extraction, measured apart, which the bare loop "
            f"does not do: {(b['sweep_wall_s'] - b['extraction_s']) / b['bare_ptxas_wall_s']:.2f}x without it"
            if b.get("extraction_s") else "") + f"; every run: {', '.join(ratios[b['label']])})"
        for b in bench["cells"])
    worst = max(b["ratio"] for b in bench["cells"])
    goal = bench["cells"][0]["goal_ratio"]
    return [f"**What the atlas costs** (`{BENCH}`, `experiments/benchmarks/bench_atlas.py`, at {latest}): a cell's "
            "sweep as the atlas runs it (a fresh CLI process, an empty cache, as many ptxas at once as CPUs: "
            f"{bench['cells'][0]['cpus']}) against a bare loop of ptxas making exactly the assemblies the sweep made "
            "(the same PTX texts, ptxas binaries, flags and parallelism, the texts prepared before the clock): "
            f"{cells}. Between the runs of one cell the ratio moved by up to "
            f"{max(abs(a['ratio'] - b['ratio']) for a in runs for b in runs if a['label'] == b['label']):.2f}, a "
            "spread that holds the benchmark's own run-to-run variation and whatever the commits between the runs "
            f"changed (at {latest}: rows of assemblies under 0.1 s no longer fsynced). The worst ratio of the last "
            f"run, {worst:.2f}, is "
            + ("within" if worst <= goal else "over")
            + f" the goal of {goal:g}; where the rest of a cell's time goes beyond a wheel's extraction is not "
            "measured here. The CPU time of the committed cells measured from an empty cache: "
            + ", ".join(f"{n} {s:.0f} s" for n, s in sorted(cpu.items())) + f", {sum(cpu.values()):.0f} CPU s in all; "
            f"{len(unmeasured)} cells were read back from a cache their earlier runs had filled and have no measure "
            f"({', '.join(unmeasured)}).", ""]
