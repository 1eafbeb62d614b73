"""The atlas's reduce step: what in a shipped kernel the heuristic reacts to. Of a shipped cell's kernels whose code
the trigger changes (at Triton's ptxas, the release ``ptxprobe reduce`` uses by default), one per source function,
the smallest (by its instructions: the reduction's cost grows with the kernel), is reduced as a user reduces it:
``ptxprobe reduce --lib WHEEL --entry ENTRY --arch ARCH`` (a captured Triton or CuTe DSL kernel: ``--ptx`` with the
file its sweep kept) with the ``--keep`` predicate that fits its change (the
register change kept where the registers moved, spills where they appeared, any difference of the code otherwise).
Each reduction's record says what remains: its loops and their instruction classes, set against the public
conditions (an MMA in a loop, an FFMA loop)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from ptxprobe.api import TRIGGER, open_run, own_identifier

MMA = ("mma.sync", "wgmma", "tcgen05.mma", "mma")
FMA = ("fma.rn.f32", "fma.f32", "fma")


def sampled(run_dir: Path, release: str) -> list[dict]:
    """One changed kernel per source function of a cell's sweep: the smallest, with its change and the input that
    reduce takes for it (a wheel's kernel by its entry; a captured kernel by the PTX file the sweep kept)."""
    run = open_run(run_dir)
    inputs = run.manifest.get("inputs") or {}
    rows = [r for r in run.static_rows() if r["status"] == "ok" and r["ptxas_version"] == release and r["repeat"] == 0]
    changed = [r for r in rows if not r["is_baseline"] and r["verdict"] == "differs"
               and "control" not in r["name_template"]]
    by_fn: dict[str, dict] = {}
    for r in sorted(changed, key=lambda r: (r["n_instructions"], r["kernel"])):
        by_fn.setdefault(function_of(r), r)
    out = []
    for fn, r in sorted(by_fn.items()):
        if r["source_kind"] == "lib":
            entry, given = r["kernel"].rsplit(":", 1)[1], None
        else:  # a captured PTX file: the copy the sweep kept, its entry as shipped (the row's own name unrenamed)
            rec = inputs[r["kernel"]]
            entry, given = rec.get("entry") or _shipped_entry(rows, r), str(run_dir / rec["files"][0]["kept"])
        out.append({"function": fn, "kernel": r["kernel"], "entry": entry, "ptx": given,
                    "instructions": r["n_instructions"], "register_change": r["registers"] - r["baseline_registers"],
                    "spills": (r["spill_store_bytes"] or 0) > 0, "keep": keep_for(r)})
    return out


def function_of(row: dict) -> str:
    """The source function a kernel comes from: a library entry's own identifier; a captured file's name less its
    content hash (``cute-quackrmsnormRMSNorm-99e31fd553.ptx``: one CuTe DSL class, one Triton function)."""
    if row["source_kind"] == "lib":
        return own_identifier(row["kernel"].rsplit(":", 1)[1])
    return re.sub(r"-[0-9a-f]{10}\.ptx$", "", row["kernel"].rsplit(":", 1)[0])


def _shipped_entry(rows: list[dict], row: dict) -> str:
    """The entry as the file holds it: the name of the kernel's ``{base}`` variant (the template that changes
    nothing), else its baseline's."""
    same = [r["name"] for r in rows if r["kernel"] == row["kernel"] and r["name_template"] == "{base}"]
    return same[0] if same else row["baseline_name"]


def keep_for(row: dict) -> str | None:
    """The predicate that keeps the kernel's change: its register change (half of it, in its direction), new spill
    stores, or (None) any difference of the machine code."""
    delta = row["registers"] - row["baseline_registers"]
    if delta:
        half = max(1, abs(delta) // 2)
        return f"registers - baseline_registers {'>=' if delta > 0 else '<='} {half if delta > 0 else -half}"
    if (row["spill_store_bytes"] or 0) > (row.get("baseline_spill_store_bytes") or 0):
        return "spill_store_bytes - baseline_spill_store_bytes > 0"
    return None


def reduce_kernel(wheel: Path | None, kernel: dict, arch: str, out: Path, timeout: float) -> dict:
    """``ptxprobe reduce`` on one sampled kernel (``--lib WHEEL``, or ``--ptx`` for a captured one), resumed where an
    earlier run left it; its record summarised."""
    given = ["--ptx", kernel["ptx"]] if kernel.get("ptx") else ["--lib", str(wheel)]
    argv = [sys.executable, "-m", "ptxprobe", "reduce", *given, "--entry", kernel["entry"], "--arch", arch, "-o",
            str(out), "--json", "-q", *(["--keep", kernel["keep"]] if kernel["keep"] else [])]
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        ended = f"exit {done.returncode}" + (f": {done.stderr.strip()[-300:]}" if done.returncode not in (0, 1) else "")
    except subprocess.TimeoutExpired:
        ended = f"stopped after {timeout:.0f} s (the best found so far is kept)"
    wall = round(time.perf_counter() - start, 1)
    rec = json.loads((out / "reduce.json").read_text()) if (out / "reduce.json").exists() else {}
    return {**kernel, "arch": arch, "ended": ended, "wall_seconds": wall, **summary(rec)}


def summary(rec: dict) -> dict:
    """What a reduction's record says: how far it got, what remains and where (loops), the minimal pair's change."""
    if not rec:
        return {"status": None}
    after = rec.get("after") or rec.get("before") or {}
    loops = after.get("loops") or []
    in_loops = {c for loop in loops for c in loop.get("classes", {})}
    runs = [*(rec.get("earlier_runs") or []), rec]
    return {"status": rec.get("status"), "ptxas": rec["ptxas"]["version"],
            "names": [rec.get("baseline_name"), rec.get("renamed_name")],
            "before_instructions": rec["before"]["instructions"], "after_instructions": after.get("instructions"),
            "after_in_words": after.get("in_words"), "loops": len(loops),
            "asm_loops": sorted({tuple(x) for x in after.get("asm_loops") or []}),  # loops inside inline asm
            "loop_classes": sorted(in_loops), "mma_in_loop": any(c.startswith(MMA) for c in in_loops),
            "fma_in_loop": any(c.startswith(FMA) for c in in_loops), "one_minimal": rec.get("one_minimal"),
            "pair_verdict": (rec.get("minimal_pair") or {}).get("verdict"),
            "pair_deltas": (rec.get("minimal_pair") or {}).get("deltas", {}),
            "ptxas_calls": sum(r.get("ptxas_calls") or 0 for r in runs),  # a resumed reduction: every run of it
            "reduce_seconds": round(sum(r.get("wall_seconds") or 0 for r in runs), 2), "runs": len(runs),
            "trigger_in_name": TRIGGER in (rec.get("entry") or "")}
