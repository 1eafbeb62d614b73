"""``ptxprobe reduce`` as a user runs it, on kernels the sweep finds name-sensitive: wall time and ptxas calls
against the goals (FFMA SGEMM <= 3 min, a Blackwell attention <= 10 min, on 2 cores).

    python experiments/benchmarks/reduce_matrix.py [--cases sgemm,gluon_fp8,gluon_fp8_capmerc] [-j 2] [--out DIR]

Each case is the CLI in a new process (start-up imports included), with an empty ptxprobe cache of its own
(PTXPROBE_CACHE in a temporary folder: every ptxas call is real), writing its DIR under ``--out``
(default ``experiments/results/<date>-cpu-reduce-matrix``): ``minimal.ptx``, ``reduce.json``, the minimal pair's
cubins. Beside them ``matrix.json`` (per case: command, exit code, wall time, ptxas calls, instructions before and
after, 1-minimal, what remains, the goal and whether it was met) and ``manifest.json`` (git commit, host, the
sha256 of every tool involved).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "sgemm": {"argv": ["--cu", "experiments/user/sgemm.cu", "--entry", "sgemm", "--arch", "sm_90a", "--ptxas", "13.0"],
              "goal_s": 180.0, "what": "FFMA SGEMM (CUDA C++, nvcc 13.0), sm_90a, ptxas 13.0"},
    "gluon_fp8": {"argv": ["attention_gluon", "--dtype", "fp8e5", "--arch", "sm_100a"], "goal_s": 600.0,
                  "what": "Gluon fp8 attention (tcgen05), sm_100a, Triton's ptxas-blackwell, plain predicate"},
    "gluon_fp8_capmerc": {"argv": ["attention_gluon", "--dtype", "fp8e5", "--arch", "sm_100a", "--keep",
                                   "capmerc_bytes - baseline_capmerc_bytes >= 4096"], "goal_s": 600.0,
                          "what": "Gluon fp8 attention, sm_100a, capmerc growing by 4 KiB or more"},
    "attention_fp8_sm90a_registers": {
        "argv": ["attention", "--dtype", "fp8e5", "--arch", "sm_90a", "--ptxas", "12.4.131", "--keep",
                 "registers - baseline_registers >= 16"], "goal_s": 600.0,
        "what": "Triton fp8 attention, sm_90a, ptxas 12.4, 16 or more registers more"},
    "attention_fp8_sm120a_capmerc": {
        "argv": ["attention", "--dtype", "fp8e5", "--arch", "sm_120a", "--keep",
                 "capmerc_bytes - baseline_capmerc_bytes >= 4096"], "goal_s": 600.0,
        "what": "Triton fp8 attention, sm_120a, Triton's ptxas-blackwell, capmerc growing by 4 KiB or more"},
    "sgemm_sm80": {"argv": ["--cu", "experiments/user/sgemm.cu", "--entry", "sgemm", "--arch", "sm_80", "--ptxas",
                            "13.0"], "goal_s": 180.0, "what": "FFMA SGEMM (CUDA C++, nvcc 13.0), sm_80, ptxas 13.0"},
}


def run_case(name: str, case: dict, out: Path, jobs: int) -> dict:
    """One ``ptxprobe reduce`` in a new process with a cold cache; its record."""
    target = out / name
    argv = [*case["argv"], "-j", str(jobs), "-o", str(target), "--fresh", "-q"]
    with tempfile.TemporaryDirectory(prefix="ptxprobe-reduce-bench-") as d:
        env = {**os.environ, "PTXPROBE_CACHE": str(Path(d) / "cache"), "COLUMNS": "120"}
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "ptxprobe.cli", "reduce", *argv], cwd=ROOT, env=env,
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
    rec_path = target / "reduce.json"
    rec = json.loads(rec_path.read_text()) if rec_path.exists() else {}
    return {
        "case": name, "what": case["what"], "command": "ptxprobe reduce " + " ".join(argv), "exit_code": r.returncode,
        "answer": r.stdout.strip().splitlines(), "stderr_tail": r.stderr.strip()[-1500:] if r.returncode > 1 else "",
        "wall_s": round(wall, 1), "reduce_wall_s": rec.get("wall_seconds"), "ptxas_calls": rec.get("ptxas_calls"),
        "candidates": rec.get("candidates"), "judgements": rec.get("judgements"), "status": rec.get("status"),
        "instructions_before": rec.get("before", {}).get("instructions"),
        "instructions_after": rec.get("after", {}).get("instructions"), "one_minimal": rec.get("one_minimal"),
        "remains": rec.get("after", {}).get("in_words"), "deltas": rec.get("minimal_pair", {}).get("deltas"),
        "ptxas": rec.get("ptxas"), "goal_s": case["goal_s"],
        "goal_met": wall <= case["goal_s"] and r.returncode in (0, 1),
    }


def tools() -> dict:
    """sha256 of every ptxas and nvcc ptxprobe finds here (the manifest's tool hashes)."""
    from ptxprobe.toolchain.tools import discover

    return {f"{t.kind} {t.version} ({t.origin})": {"path": t.path, "sha256": t.sha256} for t in discover()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" /
                    f"{time.strftime('%Y-%m-%d')}-cpu-reduce-matrix")
    args = ap.parse_args()
    names = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"unknown cases {', '.join(unknown)} (have: {', '.join(CASES)})")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        rows.append(run_case(name, CASES[name], args.out, args.jobs))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    (args.out / "matrix.json").write_text(json.dumps(rows, indent=1) + "\n")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    import triton

    manifest = {
        "what": "ptxprobe reduce on name-sensitive kernels, each a new CLI process with an empty cache; goals: FFMA "
                "SGEMM <= 180 s, Blackwell attention <= 600 s on 2 cores (the record is matrix.json)",
        "command": "python3 experiments/benchmarks/reduce_matrix.py " + " ".join(sys.argv[1:]),
        "git_commit": commit, "jobs": args.jobs,
        "host": {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count(),
                 "python": platform.python_version()},
        "triton": triton.__version__, "tools": tools(), "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
