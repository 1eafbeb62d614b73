"""The GPU side: launchers, timing, numerics, planning and dispatch (torch is imported only when a GPU is used)."""

from ptxprobe.core.errors import NoGpu
from ptxprobe.gpu.plan import GpuRunConfig, Group, plan_groups, run_config

__all__ = ["Group", "GpuRunConfig", "plan_groups", "run_config", "runtime_sweep"]


def runtime_sweep(*args, **kwargs):
    """Time every name of every source on the visible GPUs (see ``ptxprobe.gpu.dispatch.runtime_sweep``); without
    a GPU (and no Ray cluster to time on) it says so before the timing code and its imports load."""
    from ptxprobe.gpu.device import absent_gpu

    if kwargs.get("executor", "local") != "ray" and (why := absent_gpu()):
        raise NoGpu(why)
    from ptxprobe.gpu.dispatch import runtime_sweep as run

    return run(*args, **kwargs)
