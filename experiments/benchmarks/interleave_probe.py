"""How fast does a power-capped H200's clock wander, and which sample design cancels it? Measured, on a GPU.

    python experiments/benchmarks/interleave_probe.py OUT_DIR [--seconds 1.5] [--rounds 20]

For a few registered attention groups (power-capped fp16 and an unthrottled fp8), the baseline's cubin
is loaded twice (an A/A pair: identical code) and

* ``trace``: one long CUDA graph alternating the two copies launch by launch (A B B A ...), a timing
  event between any two launches, replayed for ``--seconds``: every launch's time, kept raw
  (``trace.parquet``), so any sample or unit length can be studied offline;
* ``designs``: the A/A pair timed ``--rounds`` rounds by each design of ``ptxprobe.gpu.timing``
  (``pairs``: 10 ms samples back to back; ``interleaved`` with 1 ms and 0.25 ms units), through the
  same ``time_block`` a sweep uses; the SD of the per-round log ratios and the 95 % half-width.

Writes ``designs.json``, ``trace.parquet`` and a manifest under OUT_DIR; prints a short table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

GROUPS = [  # (family, dtype, causal, seq_len): fp16 runs power-capped on the H200, fp8 classic does not
    ("attention", "fp16", False, 4096),
    ("attention_persistent", "fp16", False, 16384),
    ("attention_persistent", "fp16", True, 1024),
    ("attention", "fp8e5", False, 4096),
]
DESIGNS = {"pairs_10ms": {"design": "pairs"}, "interleaved_1ms": {"design": "interleaved", "segment_ms": 1.0},
           "interleaved_0.25ms": {"design": "interleaved", "segment_ms": 0.25}}


def aa_pair(family: str, dtype: str, causal: bool, seq_len: int):
    """The baseline cubin loaded twice, launchable on the timed inputs."""
    import torch

    from ptxprobe.api import (
        Cache,
        GpuRunConfig,
        RegisteredSource,
        cubin_for,
        gpu_info,
        registered_workload,
        registry,
        toolchain,
    )

    info = gpu_info(0)
    cfg = GpuRunConfig(sdpa_backends=())
    fam = registry.family(family)
    spec = fam.spec(dtype, 128, causal)
    tool = toolchain.triton_ptxas(info["arch"])
    src = RegisteredSource(family, dtype, 128, causal, spec.config.label, seq_len)
    w = registered_workload(src, cfg.problem(seq_len), cfg.numerics_problem, info, tool, Cache())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    case = w.timed(gen)
    args = case.args(case.tensors)
    cubin, _ = cubin_for(w.emitted, w.emitted.entry, tool)
    a, b = w.load(w.emitted.entry, cubin), w.load(w.emitted.entry, cubin)
    return (lambda: a[case.grid](*args)), (lambda: b[case.grid](*args)), case


def trace(fa, fb, seconds: float) -> dict:
    """Launch-by-launch times of the two copies interleaved A B B A in one graph, for about ``seconds``."""
    import torch

    from ptxprobe.api import Nvml, PairGraph, Unit, launch_ms

    ms = launch_ms(fa)
    cycles = max(1, int(min(seconds * 1e3, 400 * ms) / (4 * ms)))  # one replay <= ~0.4 s of launches
    g = PairGraph(Unit(fa, 1, ms), Unit(fb, 1, ms), cycles)
    nvml = Nvml()
    spans, clocks, powers = [], [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        g.graph.replay()
        torch.cuda.synchronize()
        spans += [g.events[i].elapsed_time(g.events[i + 1]) for i in range(len(g.order))]
        c, p, _ = nvml.read()
        clocks.append(c)
        powers.append(p)
    return {"launch_ms": ms, "order": g.order * (len(spans) // len(g.order)), "spans_ms": spans,
            "clock_per_replay": clocks, "power_per_replay": powers}


def designs(fa, fb, rounds: int) -> dict:
    from ptxprobe.api import Nvml, TimingPlan, stats, time_block, unit_for

    out = {}
    for label, kw in DESIGNS.items():
        plan = TimingPlan(min_rounds=rounds, max_rounds=rounds, warmup_s=0.2, n_boot=1000, **kw)
        base = unit_for(fa, plan)
        units = {"A": base, "B": unit_for(fb, plan, k=base.k)}
        t0 = time.perf_counter()
        s, seconds = time_block(units, plan, [("A", "B")], 0, Nvml())
        logs = stats.log_ratios(*s["A"].paired_with(s["B"]))
        iv = stats.paired_interval(logs, n_boot=1000)
        out[label] = {"sd_log_ratio": float(np.std(logs, ddof=1)), "half_width": stats.half_width(iv),
                      "ratio": iv.estimate, "rounds": len(logs), "seconds": seconds,
                      "wall_s": time.perf_counter() - t0, "unit_launches": base.k,
                      "launches_per_sample": s["A"].launches_per_sample,
                      "throttled": float(np.mean(s["A"].throttled)), "logs": [float(x) for x in logs]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    import pandas as pd

    from ptxprobe.api import gpu_info

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results, rows = {}, []
    for fam, dtype, causal, n in GROUPS:
        gid = f"{fam}/{dtype}/{'causal' if causal else 'full'}@{n}"
        fa, fb, _case = aa_pair(fam, dtype, causal, n)
        tr = trace(fa, fb, a.seconds)
        for i, (who, ms) in enumerate(zip(tr["order"], tr["spans_ms"], strict=False)):
            rows.append({"group": gid, "index": i, "copy": who, "ms": ms})
        results[gid] = {"launch_ms": tr["launch_ms"], "trace_clock_median": float(np.median(
            [c for c in tr["clock_per_replay"] if c] or [0])), "designs": designs(fa, fb, a.rounds)}
        for d, r in results[gid]["designs"].items():
            print(f"{gid:42s} {d:20s} sd={r['sd_log_ratio'] * 100:.3f}% hw={r['half_width'] * 100:.3f}% "
                  f"{r['seconds']:.1f}s k={r['unit_launches']} thr={r['throttled']:.2f}", flush=True)
    pd.DataFrame(rows).to_parquet(out / "trace.parquet")
    (out / "designs.json").write_text(json.dumps(results, indent=1))
    (out / "manifest.json").write_text(json.dumps({"gpu": gpu_info(0), "groups": GROUPS, "designs": DESIGNS,
                                                   "seconds": a.seconds, "rounds": a.rounds}, indent=1, default=str))


if __name__ == "__main__":
    main()
