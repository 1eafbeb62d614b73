"""The atlas's speed sample: ops of its Triton libraries timed on a GPU inside their own call path.

Each op is one ``ptxprobe capture --run`` (``experiments/gpu/h200_study.sh atlas-speed``): its driver
(``drivers/drive_<library>.py --device cuda --op OP --time S``) is captured with Triton's own JIT on the card, every
kernel the op compiles is rename-swept by Triton's ptxas, and the program is run again with each of them swapped
for ptxprobe's cubin under the baseline, the triggered and the control name, and an A/A copy, rounds in a fresh
random order; the measure is the op's median milliseconds per call (forward and backward), which the driver prints.
An arm renames every kernel of the op at once, so a verdict is the op's, over all its kernels whose code the name
changes; the record says which and how many.

This module reads those run directories into one compact record: per op, its kernels, the ones the trigger changes
(and their source functions), and each arm's comparison with the baseline as ``ptxprobe`` wrote it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from experiments.atlas.interpreted import _release, _short, kernel_functions
from ptxprobe.api import open_run
from ptxprobe.records import load

TRIGGER, CONTROL = "cutlass_{base}", "xutlass_{base}"


def _driver_call(command: list[str]) -> dict:
    """The driver and its op, dtype and seconds, as the capture's command line gave them."""
    script = next(Path(c).stem for c in command if c.endswith(".py"))
    flags = {command[i]: command[i + 1] for i in range(len(command) - 1) if command[i].startswith("--")}
    return {"driver": script, "op": flags.get("--op"), "dtype": flags.get("--dtype"),
            "seconds_per_run": float(flags["--time"]) if "--time" in flags else None}


def op_record(run_dir: Path, libraries: dict[str, str]) -> dict:
    """One op's capture, sweep and A/B, summarised (the comparisons as ``ab.json`` holds them); ``libraries`` maps a
    driver's name (``drive_<name>.py``) to its library's."""
    captured = json.loads((run_dir / "captured.json").read_text())
    call = _driver_call(list(captured["command"]))
    ab = load(run_dir / "ab" / "ab.json")
    rows = [r for r in open_run(run_dir / "sweep").static_rows() if r["status"] == "ok"]
    functions = kernel_functions(captured)
    versions = sorted({r["ptxas_version"] for r in rows})
    release = _release(rows, functions, versions[0]) if versions else None
    trigger = (release or {}).get("names", {}).get(TRIGGER, {})
    control = (release or {}).get("names", {}).get(CONTROL, {})
    changed = sorted({functions.get(r["kernel"]) for r in rows if r["name_template"] == TRIGGER
                      and r["verdict"] == "differs"} - {None})
    runs = [r for r in ab.runs if r.get("ok")]
    return {
        "library": libraries.get(call["driver"].removeprefix("drive_"), call["driver"]), **call,
        "run": run_dir.name,
        "ptxas": versions,
        "kernels": (release or {}).get("kernels", 0),
        "source_functions": (release or {}).get("source_functions", 0),
        "changed_by_trigger": trigger.get("changed", 0),
        "changed_by_control": control.get("changed", 0),
        "register_deltas": trigger.get("register_deltas", {}),
        "kinds": trigger.get("kinds", {}),
        "changed_functions": [_short(f) for f in changed],
        "rounds": ab.rounds,
        "runs_ok": len(runs), "runs": len(ab.runs),
        "run_seconds_median": statistics.median(r["seconds"] for r in runs) if runs else None,
        "swapped": sorted({r.get("swapped") for r in runs}),
        "calibration_failed": ab.calibration_failed,
        "comparisons": {c["arm"]: {k: c.get(k) for k in ("rounds", "ratio", "low", "high", "verdict", "p_value",
                                                          "q_value", "baseline_median", "arm_median",
                                                          "contaminated", "regime")}
                        for c in ab.comparisons},
    }


def speed_record(run_dirs: list[Path], libraries: dict[str, str], pins: dict, gpu: str | None) -> dict:
    """Every op's record, with the libraries' pins and the card."""
    ops = [op_record(d, libraries) for d in sorted(run_dirs)]
    return {"what": "the atlas's speed sample: ops of its Triton libraries timed on a GPU in their own call path "
                    "(ptxprobe capture --run, the op's median ms per call the measure)",
            "gpu": gpu, "libraries": {n: {k: v for k, v in lib.items() if k != "kind"} for n, lib in pins.items()
                                       if any(o["library"] == n for o in ops)},
            "ops": ops}
