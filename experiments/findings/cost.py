"""What a sweep costs: the committed start-up and Ray benchmarks (render.py), read from their bench.json files."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "experiments" / "results" / "2026-12-04-cpu-bench" / "bench.json"
RAY_BENCH = ROOT / "experiments" / "results" / "2026-12-02-cpu-ray-bench" / "bench.json"
GOAL_COLD_EFFICIENCY = 1.05  # cold wall / (process-tree CPU / cores)
GOAL_WARM_SHARE = 0.02  # a warm sweep's wall time as a share of the cold one's


def bench_section() -> list[str]:
    if not BENCH.exists():
        return []
    b = json.loads(BENCH.read_text())
    return [f"**Sweep cost** (`experiments/benchmarks/bench_sweep.py`, {b['cores']} cores, default experiment, "
            f"{b['variants']} assemblies, commit `{b['git'][:10]}`): cold {b['cold_wall_s']:.1f} s wall for "
            f"{b['cold_cpu_s']:.1f} s of "
            f"process-tree CPU (wall ÷ CPU-per-core = {b['cold_wall_over_cpu_per_core']:.3f}"
            + (f", the median of {len(b['cold_runs'])} cold runs: "
               + ", ".join(f"{r['wall_s']:.1f} s ({r['wall_over_cpu_per_core']:.3f})" for r in b["cold_runs"])
               if b.get("cold_runs") else "")
            + f"; goal ≤ {GOAL_COLD_EFFICIENCY}); warm (all cached, new output dir, a fresh process) "
            f"{b['warm_wall_s']:.2f} s = "
            f"{b['warm_over_cold']:.1%} of cold (goal ≤ {GOAL_WARM_SHARE:.0%}"
            + (f"; without Python's bytecode cache {b['warm_wall_s_without_bytecode']:.2f} s"
               if "warm_wall_s_without_bytecode" in b else "") + "). "
            f"The previous fixed repeats assembled {b.get('fixed_repeat_variants', '?')} variants for the same "
            f"verdicts ({b.get('adaptive_saving', 0):.0%} fewer now)."]


def ray_bench_section() -> list[str]:
    if not RAY_BENCH.exists():
        return []
    b = json.loads(RAY_BENCH.read_text())
    r = b["runs"]
    return ["", "**Ray executor** (`experiments/benchmarks/bench_ray.py`, "
            f"one machine of {b['machine']['cpus']} cores, nodes of "
            f"one CPU each on 127.0.0.1, Ray {b['machine']['ray']}; {b['sweep']}, {r['ray_1_nodes']['tasks']} "
            f"tasks): 1 node {r['ray_1_nodes']['wall_s']:.1f} s, 2 nodes {r['ray_2_nodes']['wall_s']:.1f} s "
            f"(×{b['speedup_2_nodes']:.2f}); the local pool took {r['local_1_jobs']['wall_s']:.1f} s with 1 job and "
            f"{r['local_2_jobs']['wall_s']:.1f} s with 2. Driver CPU per task: Ray "
            f"{r['ray_2_nodes']['driver_ms_per_task']:.1f} ms, local pool {r['local_2_jobs']['driver_ms_per_task']:.1f}"
            f" ms. Every run gave the same code hashes: {'yes' if b['same_code_everywhere'] else 'NO'}. Both nodes "
            "share this machine's cores with Ray's own services (GCS, raylets) and the driver, so the figure bounds "
            "the overhead; scaling across machines was not measured."]
