"""Timing on the GPU: interleaved rounds of every variant, and the reference rates beside them.

In each round every variant runs (rotated order), the L2 is flushed before each, CUDA events
time ``reps`` back-to-back launches. An A/A control (the baseline cubin loaded a second
time) measures the noise floor in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import stats
from .device import require_gpu


@dataclass(frozen=True)
class TimingPlan:
    rounds: int = 20
    reps: int = 3
    warmup: int = 5
    flush_bytes: int = 256 << 20
    n_boot: int = 4000
    seed: int = 0


def time_interleaved(fns: dict, plan: TimingPlan) -> dict[str, stats.Measurement]:
    """Per-round times (ms per launch) of each callable, rounds interleaved and rotated."""
    torch = require_gpu()
    flush = torch.empty(plan.flush_bytes // 4, dtype=torch.int32, device="cuda")
    labels = list(fns)
    for fn in fns.values():
        for _ in range(plan.warmup):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {label: [] for label in labels}
    for order in stats.rotated_orders(labels, plan.rounds):
        events = []
        for label in order:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(plan.reps):
                fns[label]()
            end.record()
            events.append((label, start, end))
        torch.cuda.synchronize()
        for label, start, end in events:
            times[label].append(start.elapsed_time(end) / plan.reps)
    return {label: stats.Measurement(label, tuple(t)) for label, t in times.items()}


def measured_peak_tflops(dtype: str) -> float | None:
    """Dense matmul rate in this run (the %SOL denominator): fp16/bf16 matmul, fp8 via _scaled_mm."""
    torch = require_gpu()
    n = 8192
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if dtype.startswith("fp8"):
        if not hasattr(torch, "_scaled_mm"):
            return None
        fp8 = torch.float8_e4m3fn  # cuBLASLt has no e5m2 x e5m2; the tensor-core rate is the same
        a8, b8 = a.to(fp8), b.to(fp8).t().contiguous().t()
        one = torch.ones((), device="cuda")

        def op():
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.float16)
    else:
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a16, b16 = a.to(dt), b.to(dt)

        def op():
            return a16 @ b16

    try:
        m = time_interleaved({"mm": op}, TimingPlan(rounds=10, reps=5, warmup=3, flush_bytes=4 << 20))["mm"]
    except RuntimeError:
        return None
    return m.tflops(2.0 * n**3)


def _slowed(launch, fraction: float):
    """The baseline launch followed by a memset sized to take ``fraction`` of the baseline's time.

    A positive control for the statistics: a variant known to be slower by about ``fraction``.
    (Adding programs to the grid does not work: wave quantization hides them.)
    """
    torch = require_gpu()
    probe = TimingPlan(rounds=5, reps=3, warmup=2, flush_bytes=4 << 20)
    t_base = time_interleaved({"b": launch}, probe)["b"].median_ms
    n = 1 << 20
    while True:
        pad = torch.empty(n, dtype=torch.int32, device="cuda")
        t_pad = time_interleaved({"p": pad.zero_}, probe)["p"].median_ms
        if t_pad >= fraction * t_base or n >= 1 << 30:
            break
        n *= 2
    n = max(1, int(n * fraction * t_base / t_pad))
    pad = torch.empty(n, dtype=torch.int32, device="cuda")

    def fn():
        launch()
        pad.zero_()

    return fn


def _sdpa_fn(backend: str, inputs: dict, causal: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }[backend]
    q, k, v = inputs["q"], inputs["k"], inputs["v_logical"]

    def fn():
        with sdpa_kernel([be]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn
