"""The atlas's shipped PTX: a wheel's shared libraries read with ``ptxprobe rename-sweep --lib`` (the driver's JIT
path: the PTX the library embeds, assembled for the arch), each entry with the trigger and with it spelled out, at
every release, as a user runs it. A cell is one library (its entries, or the family ``sample`` in corpus.toml
picks) at one arch; its kernels are the distinct entry bodies (``census.body_key``: instantiations whose PTX is the
same with the name normalised count once), summarised per release as the Triton cells are
(``interpreted._release``), with where each kernel's trigger is: its own identifier, only its template arguments or
scope, or nowhere."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from experiments.atlas.census import entry_bodies, reaching
from experiments.atlas.interpreted import _complete_sweep, _release, timed_ptxprobe
from ptxprobe.api import TRIGGER, Cache, open_run, own_identifier, trigger_origin


def stratified(bodies: dict[str, str], per_function: int, without: tuple[str, ...] = ()) -> list[str]:
    """A stratified sample of a wheel's kernels: of each source function (its shared library and own identifier),
    at most ``per_function`` of its distinct bodies, evenly spaced over them in the order of their first entries'
    names (a template's instantiations sort by their arguments: head dimensions, dtypes, tile shapes); one entry
    (``member:module:entry``) per body chosen. Several chosen from one module are swept together (the sweep cuts the
    module to them and assembles it once). Functions whose own identifier is in ``without`` are left out."""
    by: dict[tuple[str, str], dict[str, str]] = {}
    for kernel, body in sorted(bodies.items()):
        entry = kernel.rpartition(":")[2]
        by.setdefault((kernel.split(":", 1)[0], own_identifier(entry)), {}).setdefault(body, kernel)
    out = []
    for (_, function), firsts in sorted(by.items()):
        if function in without:
            continue
        kernels = sorted(firsts.values())
        step = max(1.0, len(kernels) / per_function)
        out += [kernels[int(i * step)] for i in range(min(per_function, len(kernels)))]
    return out


def cell_dir(out: Path, name: str, arch: str, per_function: int | None = None, without: tuple[str, ...] = ()) -> Path:
    """Where a shipped cell's sweep is (under the atlas's ``--runs``)."""
    if per_function:
        return out / "shipped" / name / f"{arch}-per-function-{per_function}{''.join(f'-{w}' for w in without)}"
    return out / "shipped" / name / arch


def shipped_cell(wheel: Path, name: str, lib: dict, arch: str, releases: list[str], out: Path,
                 executor: list[str] = (), fresh: bool = False, per_function: int | None = None,
                 without: tuple[str, ...] = ()) -> dict:
    """One wheel library at one arch: its entries (``lib["sample"]``, an entry pattern, or with ``per_function`` a
    stratified sample, ``stratified``, of the functions not ``without``) rename-swept at ``releases`` with the
    sweep's default names for library entries (the trigger added to an entry without it, spelled out of one that
    holds it, and the control), one kernel per distinct body; read back when complete."""
    bodies = entry_bodies(wheel, Cache())
    run_dir = cell_dir(out, name, arch, per_function, without)
    if per_function:  # sampled from the modules the driver would JIT for the arch: the sweep leaves out the others
        within = reaching(wheel, arch, Cache())
        bodies = {k: b for k, b in bodies.items() if k.rpartition(":")[0] in within}
        entries = f"at most {per_function} of each source function's kernels" + (
            f", without {', '.join(without)}" if without else "")
        items = sorted({f"{wheel}:{k.rsplit(':', 1)[1]}" for k in stratified(bodies, per_function, without)})
    else:
        entries = lib.get("sample") or "all"
        items = [f"{wheel}:{lib['sample']}" if lib.get("sample") else str(wheel)]
    argv = ["rename-sweep", *(x for item in items for x in ("--lib", item)), "-s", f"archs={arch}", "-s",
            f"ptxas={','.join(releases)}", *executor, *(["--fresh"] if fresh else []), "-q", "--no-run", "-o",
            str(run_dir)]  # --fresh: an earlier sweep's rows of other PTX (whole modules) never mix into the cell
    wall = cpu = None
    if fresh or not _complete_sweep(run_dir, releases):
        wall, cpu = timed_ptxprobe(sys.executable, argv)
    swept = open_run(run_dir).static_rows()
    rows = [r for r in swept if r["status"] == "ok"]
    first: dict[str, str] = {}  # one entry per body: the first in order stands for its kernel
    for kernel in sorted({r["kernel"] for r in rows}):
        first.setdefault(bodies[kernel], kernel)
    kept = set(first.values())
    rows = [r for r in rows if r["kernel"] in kept]
    symbols = {k: k.rsplit(":", 1)[-1] for k in kept}
    origins = Counter("identifier" if o.in_identifier else "elsewhere" if o.elsewhere else "none"
                      for o in (trigger_origin(e, TRIGGER) for e in symbols.values()))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    shown = ["--lib", f"{wheel.name}:{lib['sample']}" if lib.get("sample") else wheel.name] if not per_function \
        else ["--lib", f"{wheel.name}:ENTRY", "(one for each sampled entry)"]
    return {"library": name, "arch": arch, "entries": entries,
            "ptxas_sha256": {f"{t['kind']} {t['version']}": t["sha256"] for t in manifest["tools"]
                             if t["kind"] == "ptxas"},
            "command": "ptxprobe " + " ".join([argv[0], *shown, *argv[1 + 2 * len(items):-2]]),
            "wall_seconds": wall, "cpu_seconds": cpu, "sweep_wall_seconds": manifest.get("wall_seconds"),
            "entries_swept": len({r["kernel"] for r in swept}),
            "trigger_where": dict(origins),
            "releases": [_release(rows, {k: own_identifier(e) for k, e in symbols.items()}, release)
                         for release in sorted({r["ptxas_version"] for r in rows})]}
