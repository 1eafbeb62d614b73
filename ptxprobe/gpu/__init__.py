"""The GPU side: launchers, timing, numerics, planning and dispatch (torch is imported only when a GPU is used)."""

from ptxprobe.gpu.plan import Group, RunConfig, plan_groups, run_config

__all__ = ["Group", "RunConfig", "plan_groups", "run_config", "runtime_sweep"]


def runtime_sweep(*args, **kwargs):
    """Time every name of every source on the visible GPUs (see ``ptxprobe.gpu.dispatch.runtime_sweep``)."""
    from ptxprobe.gpu.dispatch import runtime_sweep as run

    return run(*args, **kwargs)
