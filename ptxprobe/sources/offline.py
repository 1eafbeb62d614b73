"""Importing and compiling a user's Triton or Gluon module on a machine without a GPU.

Kernel modules often ask the device a question at import time (``triton.runtime.driver.active`` for
the target or the torch device, ``torch.cuda.get_device_capability()`` in a ``skipif`` or a config
table); with no GPU that raises (``RuntimeError: 0 active drivers``) before ptxprobe sees a kernel.
:func:`offline_target` answers those questions for the duration of the import with the target being
compiled for: Triton's active driver reports that target and the torch device ``cuda``, and torch's
capability query returns the target's. Nothing is launched; a module that allocates GPU memory at
import still fails, with its own message.

Spec values Triton cannot read from a file are completed here too: a Gluon tensor-descriptor type
without a layout gets the layout Gluon derives itself (``NVMMASharedLayout.get_default_for``), and
a constexpr written ``{dtype = "fp16"}`` or ``"tl.float16"``/``"gl.float16"`` becomes that dtype.
"""

from __future__ import annotations

import contextlib
import re

from ptxprobe.core.errors import SpecError
from ptxprobe.toolchain.tools import arch_number

_DESC = re.compile(r"^tensordesc<(\w+)\[([\d,\s]+)\]>$")
_DTYPE_REF = re.compile(r"^(?:tl|gl|triton\.language|triton\.experimental\.gluon\.language)\.(\w+)$")


def has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class _OfflineDriver:
    """Stands in for Triton's CUDA driver while a module is imported: it knows the target, nothing else."""

    def __init__(self, capability: int):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, 32)

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        import torch

        return torch.device("cuda")

    def get_current_device(self) -> int:
        return 0

    def is_active(self) -> bool:
        return True


@contextlib.contextmanager
def offline_target(arch: str):
    """Within: Triton's driver and torch's capability query answer for ``arch`` (a no-op on a GPU machine)."""
    if has_gpu():
        yield
        return
    from triton.runtime import driver

    cap = arch_number(arch)
    saved = driver._active
    driver.set_active(_OfflineDriver(cap))
    patched = None
    try:
        import torch

        patched = torch.cuda.get_device_capability, torch.cuda.get_device_name
        torch.cuda.get_device_capability = lambda *a, **k: (cap // 10, cap % 10)
        torch.cuda.get_device_name = lambda *a, **k: f"no GPU: ptxprobe compiling for {arch}"
    except ImportError:
        pass
    try:
        yield
    finally:
        driver._active = saved
        if patched is not None:
            import torch

            torch.cuda.get_device_capability, torch.cuda.get_device_name = patched


def complete_signature(fn, signature: dict, is_gluon: bool) -> dict:
    """Gluon descriptors written ``tensordesc<fp16[128,64]>`` get Gluon's default shared layout for that block."""
    if not is_gluon:
        return dict(signature)
    from triton.experimental.gluon import language as gl

    out = {}
    for name, ty in signature.items():
        m = _DESC.match(ty.strip()) if isinstance(ty, str) else None
        if m:
            block = [int(x) for x in m.group(2).split(",")]
            layout = gl.NVMMASharedLayout.get_default_for(block, _dtype(m.group(1), f"{name}'s descriptor"))
            ty = f"tensordesc<{m.group(1)}[{', '.join(map(str, block))}],{layout!r}>"
        out[name] = ty
    return out


def constexpr_value(name: str, value):
    """A spec constexpr as Triton wants it: dtypes from ``{dtype = "fp16"}`` or ``"tl.float16"``."""
    if isinstance(value, dict):
        if set(value) != {"dtype"}:
            raise SpecError(f"constexpr {name}: a table means a dtype and takes one key, dtype (got {sorted(value)})")
        return _dtype(value["dtype"], f"constexpr {name}")
    if isinstance(value, str) and _DTYPE_REF.match(value):
        return _dtype(_DTYPE_REF.match(value).group(1), f"constexpr {name}")
    return value


def _dtype(text: str, what: str):
    import triton.language as tl

    obj = getattr(tl, text, None)
    if isinstance(obj, tl.dtype):
        return obj
    try:
        return tl.dtype(text)  # Triton's short names: fp16, bf16, fp8e5, fp8e4nv, fp32, i32, ...
    except (ValueError, AssertionError, TypeError) as exc:
        raise SpecError(f"{what}: {text!r} is not a Triton dtype (e.g. fp16, bf16, fp8e5, float16)") from exc
