"""The atlas's compiled models: Inductor's Triton kernels of real architectures (``drivers/drive_inductor.py``).

Inductor writes CUDA kernels only where it can launch them, so the capture is made on a GPU machine
(``experiments/gpu/h200_study.sh atlas-inductor``: ``ptxprobe capture -- python drive_inductor.py``) and comes back
as its ``captured.json``, ``program.log`` and PTX files (never committed). Here each cell is that capture's PTX
rename-swept at the releases asked for, at the arch it was compiled for (Inductor's kernels for another arch would
be its own other compile, not this PTX re-targeted): ``ptxprobe rename-sweep --ptx ...`` as a user sweeps PTX
files, summarised as the interpreted step's cells are.
"""

from __future__ import annotations

import json
from pathlib import Path

from experiments.atlas.interpreted import _complete_sweep, summarized, timed_ptxprobe


def compiled_cell(python: Path | str, capture_dir: Path, arch: str, releases: list[str], runs: Path,
                  executor: list[str] = (), fresh: bool = False) -> dict:
    """The GPU's capture in ``capture_dir`` swept at ``arch`` and ``releases`` into ``runs/inductor/ARCH/sweep``
    (read back where finished, unless ``fresh``); summarised."""
    captured = json.loads((capture_dir / "captured.json").read_text())
    targets = {k.get("arch") for k in captured["kernels"]}
    if targets != {arch}:
        raise SystemExit(f"{capture_dir}: its kernels were compiled for {sorted(map(str, targets))}, not {arch}")
    files = sorted({str((capture_dir / k["ptx"]).resolve()) for k in captured["kernels"]})
    sweep_dir = runs / "inductor" / arch / "sweep"
    argv = ["rename-sweep", *[a for f in files for a in ("--ptx", f)], "-s", f"archs={arch}",
            "-s", f"ptxas={','.join(releases)}", *executor, *(["--fresh"] if fresh else []), "-q", "--no-run",
            "-o", str(sweep_dir)]
    wall = cpu = None
    if fresh or not _complete_sweep(sweep_dir, releases):
        wall, cpu = timed_ptxprobe(python, argv)
    command = (f"ptxprobe rename-sweep --ptx CAPTURE/ptx/*.ptx ({len(files)} files) -s archs={arch} "
               f"-s ptxas={','.join(releases)} -q --no-run")
    return summarized(capture_dir, sweep_dir, "inductor", arch, command, wall, cpu)
