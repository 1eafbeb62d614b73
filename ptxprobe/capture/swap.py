"""Inside a program run by ``capture --run``, ``tune`` or ``apply``: ptxprobe's cubins in place of its own kernels.

The program runs unmodified. ``PTXPROBE_SWAP`` names a JSON plan, and a ``sitecustomize`` that
ptxprobe puts first on ``PYTHONPATH`` calls :func:`install_from_env`. When Triton is imported,
``CompiledKernel._init_handles`` is wrapped: a kernel whose entry is in the plan (and whose PTX,
when Triton kept it, has the captured sha256) is loaded from the plan's cubin under the plan's name
instead of Triton's own. When the CuTe DSL is imported, its loader and its export are wrapped the same
way (``capture.swap_cute``). Every arm of an A/B, the baseline name included, loads ptxprobe's cubins
assembled by the same ptxas, so the arms differ by the configuration alone.

At exit the hook appends one JSON line to the plan's ``report`` file: which kernels it swapped and
which plan entries it never saw (a run that swapped nothing measured nothing and is discarded).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.capture.hooks import when_imported, write_site

ENV = "PTXPROBE_SWAP"
TRITON_MODULE = "triton.compiler.compiler"
CUTE_EXECUTOR_MODULE = "cutlass.cutlass_dsl.cuda_jit_executor"  # capture.swap_cute: the JIT loader
CUTE_BASE_MODULE = "cutlass.base_dsl.jit_executor"  # capture.swap_cute: the AOT export


@dataclass(frozen=True)
class Replacement:
    entry: str  # the program's own entry symbol
    name: str  # the entry symbol of ptxprobe's cubin
    cubin: str  # path
    ptx_sha256: str | None  # the captured PTX: a different kernel under the same entry is left alone


def read_plan(path: str | os.PathLike) -> tuple[dict[str, list[Replacement]], dict]:
    """(replacements by entry: one per captured PTX, since specialisations share an entry; the plan record)."""
    rec = json.loads(Path(path).read_text())
    reps: dict[str, list[Replacement]] = {}
    for r in rec["kernels"]:
        reps.setdefault(r["entry"], []).append(Replacement(r["entry"], r["name"], r["cubin"], r.get("ptx_sha256")))
    return reps, rec


def _key(rep: Replacement) -> str:
    return f"{rep.entry}@{(rep.ptx_sha256 or '')[:12]}"


class _State:
    def __init__(self, reps: dict[str, list[Replacement]], report: str | None):
        self.reps, self.report = reps, report
        self.swapped: dict[str, int] = {}
        self.mismatched: list[str] = []

    def choose(self, entry: str | None, ptx: str | None) -> Replacement | None:
        """The replacement for a kernel: by entry and the sha256 of its PTX (by entry alone only when the
        kernel carries no PTX and the entry names one captured kernel)."""
        candidates = self.reps.get(entry or "", [])
        if not candidates:
            return None
        if ptx is None:
            return candidates[0] if len(candidates) == 1 else None
        digest = hashlib.sha256(ptx.encode()).hexdigest()
        return next((r for r in candidates if r.ptx_sha256 in (None, digest)), None)

    def replace(self, kernel) -> None:
        """Swap a Triton CompiledKernel's cubin and name before its first load."""
        entry = getattr(kernel, "name", None)
        if entry not in self.reps or getattr(kernel, "module", None) is not None:
            return
        rep = self.choose(entry, _triton_ptx(kernel))
        if rep is None:  # a kernel under a captured entry that is none of the captured ones
            self.mismatched.append(entry)
            return
        kernel.kernel = Path(rep.cubin).read_bytes()
        kernel.name = rep.name
        self.count(rep)

    def count(self, rep: Replacement) -> None:
        self.swapped[_key(rep)] = self.swapped.get(_key(rep), 0) + 1

    def write_report(self) -> None:
        if not self.report:
            return
        every = {_key(r) for reps in self.reps.values() for r in reps}
        line = {"pid": os.getpid(), "swapped": self.swapped, "mismatched": sorted(set(self.mismatched)),
                "unseen": sorted(every - set(self.swapped))}
        with open(self.report, "a") as f:
            f.write(json.dumps(line) + "\n")


def _triton_ptx(kernel) -> str | None:
    try:
        return kernel.asm.get("ptx") if hasattr(kernel.asm, "get") else None
    except Exception:  # Triton kept no PTX for this kernel (a cache hit may carry the cubin alone)
        return None


def patch_triton(module, state: _State) -> None:
    """Wrap ``CompiledKernel._init_handles`` of an imported ``triton.compiler.compiler``."""
    cls = module.CompiledKernel
    if getattr(cls, "_ptxprobe_swapped", False):
        return
    original = cls._init_handles

    def _init_handles(self):
        state.replace(self)
        return original(self)

    cls._init_handles = _init_handles
    cls._ptxprobe_swapped = True


def _cute_patch(name: str):
    def patch(module, state: _State) -> None:
        from ptxprobe.capture import swap_cute

        (swap_cute.patch_executor if name == CUTE_EXECUTOR_MODULE else swap_cute.patch_export)(module, state)

    return patch


def install(plan_path: str | os.PathLike) -> _State:
    reps, rec = read_plan(plan_path)
    state = _State(reps, rec.get("report"))
    patches = {TRITON_MODULE: patch_triton, CUTE_EXECUTOR_MODULE: _cute_patch(CUTE_EXECUTOR_MODULE),
               CUTE_BASE_MODULE: _cute_patch(CUTE_BASE_MODULE)}
    for name, patch in patches.items():
        when_imported(name, lambda m, patch=patch: patch(m, state))
    atexit.register(state.write_report)
    return state


def install_from_env() -> _State | None:
    """Called by the sitecustomize ptxprobe puts on PYTHONPATH; a no-op without ``PTXPROBE_SWAP``."""
    path = os.environ.get(ENV)
    return install(path) if path else None


def write_swap_site(folder: Path) -> Path:
    """The sitecustomize that installs the swap hook, in ``folder`` (first on the program's PYTHONPATH)."""
    return write_site(folder, "ptxprobe.capture.swap", "load ptxprobe's cubins in place of the program's kernels")
