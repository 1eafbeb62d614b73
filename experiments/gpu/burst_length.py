"""Does a name's measured gain depend on how long the GPU runs the kernel back to back?

    python experiments/gpu/burst_length.py --out DIR [--rounds 12] [--bursts 1,3,10,40,160]

``tune`` races candidates in CUDA-graph samples of about 10 ms (a few launches of a 4 ms matmul); the
program of the tune study (experiments/user/ffma_matmul.py) times 40 launches back to back, about 160 ms
of sustained work. On the H200 the program's gain came out 0.17-0.20 points below the race's interval
three times out of three. This measures the trigger-free spelling against the ``cutlass_`` one of the same
Triton kernel (Triton's own compile and launch, ``repr=`` renaming) at several burst lengths, in rounds:
every round each burst length once per name, the names in a fresh random order, CUDA events around the
burst, a pause after each; nvidia-smi logs the SM clock, power and clock-event reasons every 50 ms, and each
burst keeps the means of the lines logged while it ran. Writes DIR/burst_length.json (raw per-launch times)
and DIR/gpu_state.csv, and prints the median ratio per burst length.
"""

from __future__ import annotations

import argparse
import functools
import json
import operator
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # experiments/


FIELDS = ("timestamp", "clocks.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active")


def start_logger(path: Path) -> subprocess.Popen:
    """nvidia-smi writing the SM clock, power, temperature and the active clock-event reasons (power cap,
    thermal) every 50 ms for the whole run (without the reasons on a driver that lacks them)."""
    for fields in (FIELDS, FIELDS[:-1]):
        proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                                 "-lms", "50"], stdout=path.open("w"), stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        if proc.poll() is None:
            return proc
    raise SystemExit("nvidia-smi cannot log the GPU's state")


def read_log(path: Path) -> list[dict]:
    """The logger's lines as records: t (epoch s), sm_mhz, power_w, temp_c, reasons (a bit mask, or None)."""
    import datetime

    out = []
    for line in path.read_text().splitlines():
        parts = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rec = {"t": t, "sm_mhz": float(parts[1]), "power_w": float(parts[2]), "temp_c": float(parts[3])}
        except (ValueError, IndexError):
            continue
        rec["reasons"] = int(parts[4], 16) if len(parts) > 4 and parts[4].startswith("0x") else None
        out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--bursts", default="1,3,10,40,160")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap", type=float, default=0.2, help="seconds idle after each burst")
    args = ap.parse_args()
    os.environ.setdefault("TRITON_ALWAYS_COMPILE", "1")  # repr= keeps Triton's cache key: compile each name afresh
    sys.path.insert(0, str(HERE / "user"))
    import ffma_matmul as prog
    import torch
    import triton

    size, grid = args.size, (args.size // prog.BLOCK_M, args.size // prog.BLOCK_N)
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.float32) for _ in range(2))
    c = torch.empty_like(a)
    names = {"trigger_free": "matmul_fp32", "cutlass": "cutlass_matmul_fp32"}

    def launcher(kernel):
        fn = prog.KERNELS[kernel]
        return lambda: fn[grid](a, b, c, size, size, size, BLOCK_M=prog.BLOCK_M, BLOCK_N=prog.BLOCK_N,
                                BLOCK_K=prog.BLOCK_K, num_warps=4, num_stages=3)

    launch = {role: launcher(k) for role, k in names.items()}
    for f in launch.values():  # compile, then warm up
        for _ in range(5):
            f()
    torch.cuda.synchronize()
    bursts = [int(x) for x in args.bursts.split(",")]
    rng = random.Random(args.seed)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "gpu_state.csv"
    logger = start_logger(log_path)
    t0 = time.time()
    try:
        for r in range(args.rounds):
            for n in rng.sample(bursts, len(bursts)):
                for role in rng.sample(list(launch), len(launch)):
                    f = launch[role]
                    t_start = time.time()
                    start.record()
                    for _ in range(n):
                        f()
                    stop.record()
                    stop.synchronize()
                    samples.append({"round": r, "burst": n, "role": role, "ms": start.elapsed_time(stop) / n,
                                    "t_start": t_start, "t_end": time.time()})
                    time.sleep(args.gap)
    finally:
        logger.terminate()
        logger.wait()
    state = read_log(log_path)
    for s_ in samples:  # the GPU's state while the burst ran (the logger's lines inside it)
        inside = [x for x in state if s_["t_start"] <= x["t"] <= s_["t_end"]]
        s_["state_lines"] = len(inside)
        for k in ("sm_mhz", "power_w", "temp_c"):
            s_[k] = sum(x[k] for x in inside) / len(inside) if inside else None
        reasons = [x["reasons"] for x in inside if x["reasons"] is not None]
        s_["reasons_any"] = f"0x{functools.reduce(operator.or_, reasons, 0):x}" if reasons else None
    doc = {"what": "per-launch ms of one Triton FFMA matmul under two names, by burst length",
           "names": names, "size": size, "bursts": bursts, "rounds": args.rounds, "seed": args.seed,
           "gap_s": args.gap, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__, "wall_s": round(time.time() - t0, 1), "samples": samples}
    (out / "burst_length.json").write_text(json.dumps(doc))
    for n in bursts:
        ratios = []
        for r in range(args.rounds):
            ms = {s["role"]: s["ms"] for s in samples if s["round"] == r and s["burst"] == n}
            ratios.append(ms["cutlass"] / ms["trigger_free"])
        ratios.sort()
        power = {role: sorted(s["power_w"] for s in samples if s["burst"] == n and s["role"] == role
                              and s["power_w"] is not None) for role in names}
        said = "  ".join(f"{role} {p[len(p) // 2]:.0f} W" for role, p in power.items() if p)
        print(f"burst {n:4d}: cutlass/trigger-free median {ratios[len(ratios) // 2]:.4f} "
              f"[{ratios[0]:.4f}, {ratios[-1]:.4f}]  power while running: {said}")


if __name__ == "__main__":
    main()
