"""Ray executor scaling: one fixed static sweep on a 1-node and a 2-node cluster, and the driver's cost per task.

    python experiments/benchmarks/bench_ray.py [--repeat 4] [--out FILE]

Each node of the throwaway cluster on 127.0.0.1 gets one CPU, so "2 nodes" is twice the
workers, as when a second machine joins. The sweep is the ``repro_small`` experiment with
``causal=false,true`` and ``repeat=N`` (2 archs x 2 x 3 names x N assemblies), the cache off so
every assembly is a task. The local executor with 1 and 2 jobs is measured beside it. Driver
overhead per task = the driver process's own CPU (``RUSAGE_SELF``: submitting, receiving,
writing cache and log; not the workers', not ptxas's) divided by the tasks it ran.
Prints one JSON record.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_sweep(exp, out: Path, **kw) -> dict:
    from ptxprobe.api import Cache, run_sweep

    cpu, t = self_cpu(), time.perf_counter()
    res = run_sweep(exp, out, cache=Cache(enabled=False), progress=False, **kw)
    wall, cpu = time.perf_counter() - t, self_cpu() - cpu
    assert not res.failed, res.failed[:1]
    return {"wall_s": round(wall, 3), "driver_cpu_s": round(cpu, 3), "tasks": res.ran,
            "driver_ms_per_task": round(1000 * cpu / res.ran, 2), "ptxas_s": round(res.ptxas_seconds, 3),
            "code": sorted((r["variant_id"], r["code_sha256"]) for r in res.rows)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--out", help="also write the record here")
    args = ap.parse_args()
    import ray

    from experiments import definition
    from ptxprobe.api import load_experiment, local_cluster, override

    exp = override(load_experiment(definition("repro_small")), {"repeat": args.repeat, "causal": [False, True]})
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        for jobs in (1, 2):
            runs[f"local_{jobs}_jobs"] = timed_sweep(exp, Path(d) / f"local{jobs}", jobs=jobs)
        for nodes in (1, 2):
            with local_cluster(nodes=nodes, cpus_per_node=1) as address:
                timed_sweep(exp, Path(d) / f"warm{nodes}", executor="ray", ray_address=address)  # workers up
                runs[f"ray_{nodes}_nodes"] = timed_sweep(exp, Path(d) / f"ray{nodes}", executor="ray",
                                                         ray_address=address)
    same = len({json.dumps(r.pop("code")) for r in runs.values()}) == 1
    record = {
        "benchmark": "ray-executor-scaling",
        "sweep": f"repro_small causal=false,true repeat={args.repeat}, no cache",
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version(),
                    "ray": ray.__version__},
        "runs": runs,
        "same_code_everywhere": same,
        "speedup_2_nodes": round(runs["ray_1_nodes"]["wall_s"] / runs["ray_2_nodes"]["wall_s"], 3),
        "ray_vs_local_2": round(runs["ray_2_nodes"]["wall_s"] / runs["local_2_jobs"]["wall_s"], 3),
    }
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
