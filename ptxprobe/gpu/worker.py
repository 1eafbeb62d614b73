"""What one GPU worker does for one planned group: build its workload and time it (local or Ray actor alike)."""

from __future__ import annotations

import functools

from ptxprobe.core.cache import Cache
from ptxprobe.gpu.device import _smi, gpu_info
from ptxprobe.gpu.group import run_group
from ptxprobe.gpu.plan import GpuRunConfig, Group
from ptxprobe.gpu.timing import measured_peak_tflops
from ptxprobe.gpu.workload import launch_spec_workload, registered_workload
from ptxprobe.stats import paired as stats
from ptxprobe.toolchain.tools import select_ptxas


@functools.cache
def _device_facts() -> dict:
    """Properties of this process's GPU (read once per worker, not per group)."""
    return gpu_info(0)


@functools.cache
def _peak(dtype: str) -> float | None:
    """The %SOL denominator, measured once per dtype per worker process."""
    return measured_peak_tflops(dtype)


def group_rows(group: Group, templates: list[str], cfg: GpuRunConfig, cache: Cache) -> tuple[list[dict], dict]:
    """Run one planned group on this process's GPU: its rows and its calibration record."""
    info = {**_device_facts(), **_smi(0)}  # clocks and temperature as of this group
    tool = select_ptxas(info["arch"], group.ptxas)[0]
    w = group_workload(group, cfg, info, tool, cache)
    peak = _peak(w.dtype)[0] if w.dtype else None
    return run_group(w, templates, cfg, info, tool, cache, plants=group.plants, peak=peak,
                     seed=cfg.timing.seed, order_seed=stats.stable_seed(cfg.timing.seed, group.group_id))


def group_workload(group: Group, cfg: GpuRunConfig, info: dict, tool, cache: Cache):
    """The Workload a planned group times (also what ``explain`` profiles: the same inputs and launch)."""
    if group.seq_len is not None:
        return registered_workload(group.source, cfg.problem(group.seq_len), cfg.numerics_problem, info, tool, cache,
                                   cfg.sdpa_backends)
    return launch_spec_workload(group.source, group.sizes_dict, info, tool, cache)


