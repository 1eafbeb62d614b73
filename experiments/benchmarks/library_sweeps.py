"""Real libraries swept from their wheels with one command each, as a user runs it, on a cold cache.

    pip download --no-deps xformers==0.0.35 vllm==0.34.0 -d WHEELS
    python experiments/benchmarks/library_sweeps.py --wheels WHEELS --out experiments/results/DATE-cpu-library-sweeps

Each library is one ``ptxprobe rename-sweep --lib WHEEL [--entry GLOB] -s archs=sm_90a -s ptxas=13.0 --json`` in a
fresh process with an empty cache. ``sweeps.json`` keeps, per library: the wheel's name and sha256, the exact
command, its exit code and wall time, and the answer in counts (per target: kernels, how many a name changes, how
many it leaves alone, how many were not compared; per name template: the verdicts; the largest register change).
No third-party PTX, cubin or symbol is kept: the libraries are inputs fetched at run time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ptxprobe.api import atomic_write, sha256_file

# (label, wheel file name, --entry glob or None): what the done-means of the library work names
LIBRARIES = (
    ("xformers sparse24 and CUTLASS GEMMs", "xformers-0.0.35-py39-none-manylinux_2_28_x86_64.whl", None),
    ("vLLM FlashAttention-2 (sparse forward)", "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl",
     "*flash_fwd_sparse*"),
)
SETTINGS = ("-s", "archs=sm_90a", "-s", "ptxas=13.0")


def answer_counts(doc: dict) -> list[dict]:
    """Per (arch, ptxas release): the answer in counts, from the sweep's ``--json`` pivot."""
    groups: dict[tuple, list[dict]] = {}
    for rec in doc["pivot"]:
        groups.setdefault((rec["arch"], rec["ptxas_version"]), []).append(rec)
    out = []
    for (arch, ver), recs in sorted(groups.items()):
        verdicts: dict[str, Counter] = {}
        deltas = []
        for rec in recs:
            for template, cell in rec["names"].items():
                verdicts.setdefault(template, Counter())[cell["verdict"] or "none"] += 1
                if cell.get("delta_registers") is not None:
                    deltas.append(cell["delta_registers"])
        out.append({"arch": arch, "ptxas_version": ver, "kernels": len(recs),
                    "changed": sum(r["answer"] == "YES" for r in recs),
                    "same": sum(r["answer"] == "no" for r in recs),
                    "not_compared": sum(r["answer"] not in ("YES", "no") for r in recs),
                    "verdicts": {t: dict(c) for t, c in sorted(verdicts.items())},
                    "register_delta_min": min(deltas, default=None), "register_delta_max": max(deltas, default=None)})
    return out


def sweep(wheel: Path, entry: str | None, scratch: Path) -> dict:
    """One library swept in a fresh process on an empty cache; its answer in counts."""
    argv = ["ptxprobe", "rename-sweep", "--lib", str(wheel), *(["--entry", entry] if entry else []), *SETTINGS,
            "-q", "--json", "-o", str(scratch / "run")]
    env = {**os.environ, "PTXPROBE_CACHE": str(scratch / "cache")}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{wheel.name}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    doc = json.loads(proc.stdout)
    return {"command": shlex.join(["ptxprobe", "rename-sweep", "--lib", wheel.name, *argv[4:-4], "--json"]),
            "exit_code": proc.returncode, "wall_seconds": round(wall, 1),
            "libraries": doc.get("libraries"), "answer": answer_counts(doc)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", required=True, type=Path, help="directory holding the wheels in LIBRARIES")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    records = []
    for label, name, entry in LIBRARIES:
        wheel = args.wheels / name
        if not wheel.exists():
            raise SystemExit(f"{wheel}: not there (pip download --no-deps {name.split('-')[0]}=="
                             f"{name.split('-')[1]} -d {args.wheels})")
        with tempfile.TemporaryDirectory(prefix="library-sweep-") as d:
            rec = {"label": label, "wheel": name, "wheel_sha256": sha256_file(wheel), "entry": entry,
                   **sweep(wheel, entry, Path(d))}
        records.append(rec)
        a = rec["answer"][0] if rec["answer"] else {}
        print(f"{label}: {a.get('kernels')} kernels, {a.get('changed')} changed, {a.get('same')} same, "
              f"exit {rec['exit_code']}, {rec['wall_seconds']} s")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    doc = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
           "ptxprobe_commit": commit, "settings": list(SETTINGS), "sweeps": records}
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "sweeps.json", (json.dumps(doc, indent=1) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
