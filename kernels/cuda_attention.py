"""CUDA C++ flash attention (kernels/cuda/flash_attention.cu) as a ptxprobe kernel family.

nvcc builds one kernel per (dtype, head dim, causal) from the same source with -D
switches, so each PTX has exactly one entry, named ``flash_attention_<dtype>_d<D>[_causal]``.
Launch: plain pointers through the CUDA driver API (see ptxprobe.gpu.launchers.CudaKernel).
"""

from __future__ import annotations

from pathlib import Path

from .attention_common import attention_common

SOURCE = Path(__file__).resolve().parent / "cuda" / "flash_attention.cu"
BLOCK_M = BLOCK_N = 64
THREADS = 128


def entry_name(spec) -> str:
    return f"flash_attention_{spec.dtype}_d{spec.head_dim}" + ("_causal" if spec.causal else "")


def shared_bytes(spec) -> int:
    return (BLOCK_M + 4 * BLOCK_N) * spec.head_dim * 2  # Q + 2 stages of K and V


def emit(spec, arch, cache=None, only_cached=False):
    from ptxprobe.sources.cuda import NvccOptions, emit_cuda

    defines = {
        "PTXPROBE_BF16": int(spec.dtype == "bf16"),
        "PTXPROBE_HEAD_DIM": spec.head_dim,
        "PTXPROBE_CAUSAL": int(spec.causal),
        "PTXPROBE_ENTRY": entry_name(spec),
    }
    return emit_cuda(SOURCE, arch, entry_name(spec), NvccOptions.of(defines), kernel_key=spec.key, cache=cache,
                     only_cached=only_cached)


def launch_args(spec, problem, inputs):
    if inputs is None:
        return None  # no Triton-style specialisation: nvcc decides everything at compile time
    return [inputs["q"], inputs["k"], inputs["v"], inputs["out"], spec.head_dim**-0.5, problem.seq_len]


def grid(spec, problem, n_sms):
    return (problem.seq_len // BLOCK_M, problem.batch * problem.heads, 1)


def _family():
    from ptxprobe.sources.registry import KernelConfig, KernelFamily

    cfg = KernelConfig(BLOCK_M, BLOCK_N, THREADS // 32, 2)
    return KernelFamily(
        name="attention_cuda",
        frontend="cuda",
        description="CUDA C++ FA2 forward: cp.async, swizzled smem, ldmatrix, mma.sync m16n8k16, 2 stages (nvcc)",
        fn=None,
        dtypes=("fp16", "bf16"),
        head_dims=(64, 128),
        configs=(cfg,),
        default_config=cfg,
        launch_args=launch_args,
        grid=grid,
        **attention_common(),
        emit=emit,
        archs=("sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120a"),
        extra={"entry": entry_name, "shared_bytes": shared_bytes, "threads": THREADS, "source": str(SOURCE)},
    )


FAMILIES = (_family(),)
