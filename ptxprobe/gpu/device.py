"""The GPU this process sees: whether there is one, its arch, and facts about it."""

from __future__ import annotations

import os
import sys

from ptxprobe.core.errors import NoGpu, ToolNotFound
from ptxprobe.core.proc import run_tool

# a CUDA GPU on Linux is reached through these device nodes (WSL: /dev/dxg), in a container too
DEVICE_NODES = ("/dev/nvidiactl", "/dev/dxg")


def absent_gpu() -> str | None:
    """Why no CUDA GPU can be visible, found without importing torch (seconds on a static sweep): no NVIDIA device
    node on Linux, or CUDA_VISIBLE_DEVICES hiding every device; None when one may be there."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return "no CUDA GPU is visible (CUDA_VISIBLE_DEVICES hides every device): static results only"
    if sys.platform.startswith("linux") and not any(os.path.exists(n) for n in DEVICE_NODES):
        return "no CUDA GPU is visible (no NVIDIA device node, /dev/nvidiactl): static results only"
    return None


def require_gpu():
    """torch, once a CUDA GPU is known to be visible; else NoGpu saying why."""
    if why := absent_gpu():
        raise NoGpu(why)
    try:
        import torch
    except ImportError as exc:
        raise NoGpu("torch is not installed; runtime measurements need torch with CUDA") from exc
    if not torch.cuda.is_available():
        raise NoGpu("no CUDA GPU is visible (torch.cuda.is_available() is False): static results only")
    return torch


def device_arch(device: int = 0) -> str:
    torch = require_gpu()
    major, minor = torch.cuda.get_device_capability(device)
    cap = major * 10 + minor
    return f"sm_{cap}a" if cap >= 90 else f"sm_{cap}"


def gpu_info(device: int = 0) -> dict:
    torch = require_gpu()
    props = torch.cuda.get_device_properties(device)
    info = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "arch": device_arch(device),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "memory_gb": props.total_memory / 2**30,
    }
    info.update(_smi(device))
    return info


# what nvidia-smi is asked, and the key each answer is recorded under: the card's state during the run (clocks,
# temperature, power) and what tells one card and its settings from another (repro compares those: IDENTITY)
SMI_FIELDS = {"driver_version": "driver", "clocks.sm": "sm_clock_mhz", "clocks.max.sm": "sm_clock_max_mhz",
              "clocks.mem": "mem_clock_mhz", "temperature.gpu": "temperature_c", "power.draw": "power_w",
              "uuid": "uuid", "vbios_version": "vbios", "power.limit": "power_limit_w",
              "ecc.mode.current": "ecc_mode", "clocks.applications.graphics": "app_clock_mhz"}
IDENTITY = ("gpu", "uuid", "vbios", "driver", "power_limit_w", "ecc_mode", "app_clock_mhz")


def _smi(device: int) -> dict:
    """nvidia-smi's answers for ``SMI_FIELDS`` (a field this card or driver does not report is left out)."""
    try:
        run = run_tool(["nvidia-smi", f"--id={device}", f"--query-gpu={','.join(SMI_FIELDS)}",
                        "--format=csv,noheader,nounits"], timeout=30)
    except ToolNotFound:
        return {}
    vals = [v.strip() for v in run.stdout.strip().split(",")]
    if not run.ok or len(vals) != len(SMI_FIELDS):
        return {}
    return {key: v for key, v in zip(SMI_FIELDS.values(), vals, strict=True) if v and not v.startswith("[")}
