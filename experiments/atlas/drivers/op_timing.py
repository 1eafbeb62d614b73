"""What the Triton drivers share: their command line, one line per op call (``atlas-driver: {json}``), and on a GPU
one op timed in the library's own call path, its median milliseconds per call printed as ``ms=`` for
``ptxprobe capture --run --metric 'ms=(\\S+)'``.

The timing: the op's inputs are made once; a first call compiles (and autotunes) its kernels; then blocks of calls
of at least 20 ms each, timed by CUDA events, for about ``--time`` seconds; the median of the blocks' per-call times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

BLOCK_MS = 20.0


def cli(argv: list[str], dtypes: tuple[str, ...]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="an atlas driver: a library's ops as a model calls them")
    ap.add_argument("--device", default=None, help="torch's default device (cuda: a GPU capture); CPU by default")
    ap.add_argument("--op", default=None, help="only this op (every op by default)")
    ap.add_argument("--dtype", choices=dtypes, default=None, help="only this dtype (every one by default)")
    ap.add_argument("--time", type=float, default=None, metavar="SECONDS",
                    help="time the op (needs --device cuda and --op): print its median ms per call as ms=")
    a = ap.parse_args(argv)
    if a.time is not None and (a.device != "cuda" or a.op is None):
        ap.error("--time needs --device cuda and --op")
    return a


def timed(step: Callable[[], None], seconds: float) -> float:
    """Median milliseconds per call of ``step`` over blocks of back-to-back calls (CUDA events)."""
    import torch

    step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    per_block = max(1, int(BLOCK_MS / max(start.elapsed_time(end), 1e-3)))
    blocks: list[float] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until or len(blocks) < 5:
        start.record()
        for _ in range(per_block):
            step()
        end.record()
        end.synchronize()
        blocks.append(start.elapsed_time(end) / per_block)
    return statistics.median(blocks)


def run_ops(a: argparse.Namespace, ops_for: Callable, dtypes: dict) -> int:
    """Each op of each dtype asked for: set up and called once (a capture), or timed (``--time``); one line each."""
    import torch

    torch.manual_seed(0)
    if a.device:
        torch.set_default_device(a.device)
    chosen = [dtype for name, dtype in dtypes.items() if a.dtype in (None, name)]
    found = False
    for dtype in chosen:
        for name, setup in ops_for(dtype):
            if a.op not in (None, name):
                continue
            found = True
            began = time.perf_counter()
            try:
                step = setup()
                if a.time is None:
                    step()
                    said = {"op": name, "dtype": str(dtype), "ran": True}
                else:
                    ms = timed(step, a.time)
                    said = {"op": name, "dtype": str(dtype), "ran": True, "ms": ms}
                    print(f"ms={ms:.6f}", flush=True)
            except Exception as exc:  # noqa: BLE001 - counted per op, the driver goes on
                if a.time is not None:
                    raise
                said = {"op": name, "dtype": str(dtype), "ran": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            print("atlas-driver:", json.dumps({**said, "seconds": round(time.perf_counter() - began, 2)}), flush=True)
    if not found:
        raise SystemExit(f"no op {a.op!r} in this driver")
    return 0
