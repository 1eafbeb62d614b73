"""What the attention families share and that needs no compiler: dtypes, inputs, the float64 reference, FLOPs.

Kept apart from the Triton kernels so a family built by another compiler (the CUDA C++ attention) loads
without importing Triton.
"""

from __future__ import annotations

# torch's names for the element types: Triton's specialisation reads only the name, so the
# static path (stand-in pointers) needs no torch; the GPU path turns them into torch dtypes.
_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp8e5": "float8_e5m2", "fp8e4nv": "float8_e4m3fn"}


def _out_dtype_name(dtype: str) -> str:
    return "float16" if dtype.startswith("fp8") else _DTYPE_NAMES[dtype]


def _torch_dtype(dtype: str):
    import torch

    return getattr(torch, _DTYPE_NAMES[dtype])


def _out_dtype(dtype: str):
    import torch

    return getattr(torch, _out_dtype_name(dtype))


def _is_fp8(spec) -> bool:
    return spec.dtype.startswith("fp8")


def make_inputs(spec, problem, device="cuda", generator=None):
    """Fresh random Q, K, V (never zeros) and an output poisoned with NaN."""
    import torch

    shape = (problem.batch, problem.heads, problem.seq_len, spec.head_dim)
    if problem.seq_len % spec.config.block_m or problem.seq_len % spec.config.block_n:
        raise ValueError(f"seq_len {problem.seq_len} must be a multiple of the block sizes ({spec.config.label})")

    def rand():
        return torch.randn(shape, device=device, dtype=torch.float32, generator=generator)

    dt = _torch_dtype(spec.dtype)
    q, k, v = rand().to(dt), rand().to(dt), rand().to(dt)
    v_arg = v.transpose(-1, -2).contiguous() if _is_fp8(spec) else v
    out = torch.full(shape, float("nan"), device=device, dtype=_out_dtype(spec.dtype))
    return {"q": q, "k": k, "v": v_arg, "v_logical": v, "out": out}


def reference(spec, inputs):
    """float64 attention on the (already rounded) inputs."""
    import torch

    q, k, v = (inputs[n].to(torch.float64) for n in ("q", "k", "v_logical"))
    s = (q @ k.transpose(-1, -2)) * spec.head_dim**-0.5
    if spec.causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def attention_flops(spec, problem):
    f = 4.0 * problem.batch * problem.heads * problem.seq_len * problem.seq_len * spec.head_dim
    return f / 2 if spec.causal else f


def attention_common() -> dict:
    """What every attention family here shares: inputs, float64 reference, FLOP count."""
    return dict(make_inputs=make_inputs, reference=reference, flops=attention_flops)
