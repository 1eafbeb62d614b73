"""The atlas's Triton libraries: each library's own ops driven on CPU tensors, captured with ``ptxprobe capture
--interpret`` (no GPU) for each arch, rename-swept at every release, as a user runs it. A CuTe DSL library
(``capture = "arch"`` in corpus.toml) compiles ahead of time on fake tensors: its driver is captured with ``ptxprobe
capture --arch`` alone, the DSL's target pinned, no interpreter and no GPU; its kernels are born ``kernel_cutlass_…``,
so the sweep compares each with the trigger spelled out of its name.

Each library is installed, pinned by version and sha256 (corpus.toml), into one virtual environment of the atlas's
own that sees this machine's torch and Triton; its code is imported from there and never copied. A cell is one
library at one arch: its driver (``drivers/``) run once under the interpreter, the launches compiled for the arch,
the sweep over the releases asked for. The record keeps, per arch and release, the kernels (distinct PTX), the
source functions they come from, how many change under the trigger and under the control, and the register,
spill and instruction changes, with the command that made it.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from experiments.atlas.pins import fetch_pinned
from ptxprobe.api import open_run

DRIVERS = Path(__file__).with_name("drivers")


def environment(root: Path, libraries: dict[str, dict], downloads: Path) -> Path:
    """The atlas's venv (this machine's torch and Triton seen through ``--system-site-packages``) with every
    library's pinned wheel, checked against its sha256, installed without touching its dependencies; its Python."""
    python = root / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root)], check=True)
    for lib in libraries.values():
        pins = zip([lib["pip"], *lib.get("with", [])], [lib["file"], *lib.get("with_file", [])],
                   [lib["sha256"], *lib.get("with_sha256", [])], strict=True)
        files = [str(fetch_pinned(pip, file, digest, downloads)) for pip, file, digest in pins]
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *files], check=True)
    return python


def capture_cell(python: Path, name: str, lib: dict, arch: str, releases: list[str], out: Path,
                 executor: list[str] = (), fresh: bool = False) -> dict:
    """One library at one arch: ``ptxprobe capture --interpret`` of its driver (``--arch`` alone for a library
    captured by ``capture = "arch"``), swept at ``releases`` (on a Ray cluster with ``executor`` = ``--executor ray
    --ray-address ADDR``); summarised. A cell whose run directory is complete for these releases is read, not run
    again, unless ``fresh`` (the atlas resumes cell by cell)."""
    run_dir = out / name / arch
    driver = DRIVERS / lib["driver"]
    mode = ["--interpret"] if lib.get("capture", "interpret") == "interpret" else []
    argv = ["capture", *mode, "--arch", arch, "-s", f"archs={arch}", "-s", f"ptxas={','.join(releases)}",
            *executor, *(["--fresh"] if fresh else []), "-q", "-o", str(run_dir), "--", str(python), str(driver)]
    wall = cpu = None
    if fresh or not _complete(run_dir, releases):
        wall, cpu = timed_ptxprobe(python, argv)
    command = "ptxprobe " + " ".join(argv[:-2] + ["PYTHON", driver.name])
    return summarized(run_dir, run_dir / "sweep", name, arch, command, wall, cpu)


def summarized(capture_dir: Path, sweep_dir: Path, name: str, arch: str, command: str, wall: float | None,
               cpu: float | None) -> dict:
    """A cell's record from its capture (``captured.json``, the driver's lines in ``program.log``) and its sweep:
    the ops the driver ran, how the kernels were launched, and per release what each name does to them."""
    captured = json.loads((capture_dir / "captured.json").read_text())
    said = [json.loads(line.split("atlas-driver:", 1)[1]) for line in
            (capture_dir / "program.log").read_text().splitlines() if line.startswith("atlas-driver:")]
    rows = [r for r in open_run(sweep_dir).static_rows() if r["status"] == "ok"]
    functions = kernel_functions(captured)
    manifest = json.loads((sweep_dir / "manifest.json").read_text())
    tools = {f"{t['kind']} {t['version']}": t["sha256"] for t in manifest["tools"] if t["kind"] == "ptxas"}
    return {"library": name, "arch": arch, "triton": manifest.get("triton"), "ptxas_sha256": tools,
            "command": command, "wall_seconds": wall, "cpu_seconds": cpu, "program_seconds": captured["seconds"],
            "sweep_wall_seconds": manifest.get("wall_seconds"), "ops": said,
            "ops_ran": sum(s["ran"] for s in said), "ops_tried": len(said),
            "launch_kinds": dict(Counter(k["metadata"].get("via", "launch").split(" ")[0]
                                         for k in captured["kernels"])),
            "not_compiled": len(captured.get("not_compiled", [])),
            "not_compiled_reasons": dict(Counter(n["error"].split(": ")[-1][:120]
                                                 for n in captured.get("not_compiled", []))),
            "releases": [_release(rows, functions, release) for release in sorted({r["ptxas_version"] for r in rows})]}


def timed_ptxprobe(python: Path | str, argv: list[str]) -> tuple[float, float]:
    """``python -m ptxprobe ARGV`` run to its end: its wall seconds and the CPU seconds (user and system) it and
    its children took (its program, its ptxas); an exit other than 0 or 1 ends the atlas with ptxprobe's words."""
    start, used = time.perf_counter(), _children_cpu()
    done = subprocess.run([str(python), "-m", "ptxprobe", *argv], capture_output=True, text=True)
    wall, cpu = round(time.perf_counter() - start, 1), round(_children_cpu() - used, 1)
    if done.returncode not in (0, 1):
        raise SystemExit(f"ptxprobe {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return wall, cpu


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def merged(before: dict, now: dict) -> dict:
    """The record ``now`` with the cells of ``before`` (the same step's record, read back from its file) that ``now``
    did not run, another library's or another arch's, kept in their place: a library added to the record does not
    drop, nor run again, the cells already in it; a cell ``now`` read back from its run directory keeps the timings
    its run recorded."""
    def key(c: dict) -> tuple:  # a shipped cell is also its entries: a library's samples are cells apart
        return c["library"], c["arch"], c.get("entries")

    ran = {key(c) for c in now["cells"]}
    kept = [c for c in before.get("cells", []) if key(c) not in ran]
    timed = {key(c): c for c in before.get("cells", [])}
    cells = [{**c, **{k: timed[key(c)].get(k) for k in ("wall_seconds", "cpu_seconds")}}
             if c.get("wall_seconds") is None and key(c) in timed else c for c in now["cells"]]
    return {**now, "libraries": {**before.get("libraries", {}), **now["libraries"]}, "cells": kept + cells}


def _complete(run_dir: Path, releases: list[str]) -> bool:
    """A cell's capture and sweep finished, with the releases asked for."""
    return (run_dir / "captured.json").exists() and _complete_sweep(run_dir / "sweep", releases)


def _complete_sweep(sweep_dir: Path, releases: list[str]) -> bool:
    """A sweep finished, with the releases asked for (its manifest's command says which)."""
    manifest = sweep_dir / "manifest.json"
    if not manifest.exists():
        return False
    rec = json.loads(manifest.read_text())
    return bool(rec.get("finished")) and f"ptxas={','.join(releases)}" in " ".join(rec.get("command") or [])


def _release(rows: list, functions: dict, version: str) -> dict:
    """Per release: kernels, their source functions, and what each name template does to them (each variant's
    first assembly; the verdict already weighs ptxas's own spread over the repeats)."""
    first = {}
    for r in sorted((r for r in rows if r["ptxas_version"] == version), key=lambda r: r["repeat"]):
        first.setdefault((r["kernel"], r["name_template"]), r)
    base = {k: r for (k, _), r in first.items() if r["is_baseline"]}
    by_name: dict[str, dict] = {}
    for template in sorted({t for (_, t), r in first.items() if not r["is_baseline"]}):
        changed = [r for (_, t), r in first.items() if t == template and r["verdict"] == "differs"]
        deltas = [r["registers"] - base[r["kernel"]]["registers"] for r in changed]
        by_name[template] = {
            "changed": len(changed),
            "changed_functions": len({functions.get(r["kernel"]) for r in changed}),
            "register_deltas": {str(d): n for d, n in sorted(Counter(deltas).items())},
            "fewer_registers": sum(d < 0 for d in deltas), "more_registers": sum(d > 0 for d in deltas),
            "same_registers": sum(d == 0 for d in deltas),
            "median_register_delta": statistics.median(deltas) if deltas else None,
            "spill_changed": sum(r["spill_store_bytes"] != base[r["kernel"]]["spill_store_bytes"] for r in changed),
            "stack_changed": sum(r["stack_bytes"] != base[r["kernel"]]["stack_bytes"] for r in changed),
            "kinds": dict(Counter(_kind(r, base[r["kernel"]]) for r in changed)),
            "changed_function_names": sorted({_short(functions.get(r["kernel"])) for r in changed}),
        }
    codes: dict[str, set] = {}
    for r in rows:
        if r["ptxas_version"] == version and r["is_baseline"]:
            codes.setdefault(r["kernel"], set()).add(r["machine_code_sha256"])
    return {"ptxas_version": version, "kernels": len(base),
            "source_functions": len({functions.get(k) for k in base}), "names": by_name,
            # ptxas's own spread: kernels whose baseline assemblies (its repeats) gave more than one machine code
            "baseline_spread": sum(len(c) > 1 for c in codes.values())}


def kernel_functions(captured: dict) -> dict[str, str]:
    """Each captured kernel's source function, by its PTX file's name: a CuTe DSL kernel's as its symbol spells it,
    a Triton kernel's as the interpreter recorded it (``module:function``), else its entry (a GPU capture records
    none: Triton names the entry after the function, Inductor after the fused ops)."""
    return {k["ptx"].split("/")[-1]: _cute_function(k["entry"]) if k.get("frontend") == "cute-dsl"
            else k["metadata"].get("function") or k["entry"] for k in captured["kernels"]}


def _cute_function(entry: str) -> str:
    """A CuTe DSL kernel's source function, as its symbol spells it: the method and the module and class its object
    is of, ``kernel_quackrmsnormRMSNorm`` (``kernel_cutlass_kernel_quackrmsnormRMSNorm_object_at_<arguments>``)."""
    return entry.removeprefix("kernel_cutlass_").split("_object_at_")[0]


def _short(target: str | None) -> str:
    """``package.sub.module:function`` without the package (a library's functions by one name live in several
    modules: fla's ``delta_rule.wy_fast`` and ``gated_delta_rule.wy_fast``), a script's path as its file name; a
    name without a module (a CuTe DSL kernel's) as it is."""
    if ":" not in str(target):
        return str(target)
    module, _, name = str(target).rpartition(":")
    tail = module.rsplit("/", 1)[-1] if module.endswith(".py") else module.split(".", 1)[-1]
    return f"{tail}:{name}"


def _kind(row: dict, base: dict) -> str:
    """What a change is, the coarsest first: spills, stack, registers, else the schedule alone (the same resources,
    other machine code)."""
    if row["spill_store_bytes"] != base["spill_store_bytes"] or row["spill_load_bytes"] != base["spill_load_bytes"]:
        return "spills"
    if row["stack_bytes"] != base["stack_bytes"]:
        return "stack"
    if row["registers"] != base["registers"]:
        return "registers"
    return "schedule only"


def compare_captures(gpu_dir: Path, interpreted_dir: Path) -> dict:
    """A GPU capture and an interpreter capture of the same driver: which of the GPU's kernels (its PTX, byte for
    byte) the interpreter's capture also holds, and which it lacks or adds."""
    def kernels(d: Path) -> dict[str, dict]:
        return {k["ptx_sha256"]: k for k in json.loads((d / "captured.json").read_text())["kernels"]}

    gpu, cpu = kernels(gpu_dir), kernels(interpreted_dir)
    return {"gpu_kernels": len(gpu), "interpreted_kernels": len(cpu), "same_ptx": len(gpu.keys() & cpu.keys()),
            "only_gpu": sorted(f"{k['entry']} warps={k['metadata'].get('num_warps')}" for s, k in gpu.items()
                               if s not in cpu),
            "only_interpreted": sorted(f"{k['entry']} warps={k['metadata'].get('num_warps')} "
                                       f"via={k['metadata'].get('via')}" for s, k in cpu.items() if s not in gpu)}
