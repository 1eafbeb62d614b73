"""Kernel sources: everything a sweep can take, behind one interface (``KernelSource``)."""

from __future__ import annotations

import itertools
import logging
from dataclasses import replace

from ptxprobe.core.errors import SpecError
from ptxprobe.sources.base import Emitted, KernelSource
from ptxprobe.sources.kinds import (
    CubinFileSource,
    CudaFileSource,
    PtxFileSource,
    RegisteredSource,
    TritonFunctionSource,
    exists_or_refuse,
    file_source,
    require_arch,
    split_spec,
)
from ptxprobe.sources.registry import family, unavailable

log = logging.getLogger(__name__)

USER_AXES = ("ptx_files", "cubin_files", "cu_files", "triton_functions")

__all__ = [
    "USER_AXES",
    "CubinFileSource",
    "CudaFileSource",
    "Emitted",
    "KernelSource",
    "PtxFileSource",
    "RegisteredSource",
    "TritonFunctionSource",
    "file_source",
    "registered_sources",
    "require_arch",
    "sources_of",
    "split_spec",
]


def registered_sources(exp) -> list[RegisteredSource]:
    """One source per (kernel, dtype, head dim, causal, config) that some requested arch can build.

    With several kernels in one experiment, combinations a kernel does not support (fp8 for the
    CUDA kernel, sm_90a for the Blackwell-only Gluon kernel) are skipped, and so are kernels the installed
    Triton cannot build (said in a warning); asking for nothing a kernel can build is an error.
    """
    refused = unavailable()
    left_out = [k for k in exp.kernels if k in refused] if len(exp.kernels) > 1 else []
    if left_out and len(left_out) == len(exp.kernels):
        family(left_out[0])  # nothing left to run: refused as for one kernel
    for k in left_out:
        log.warning("%s left out: %s", k, refused[k])
    out = []
    for k in exp.kernels:
        if k in left_out:
            continue
        fam = family(k)
        mine = 0
        for dt, d, c, cfg in itertools.product(exp.dtypes, exp.head_dims, exp.causal, exp.configs):
            if len(exp.kernels) > 1:
                if not any(fam.supports(dt, d, a) for a in exp.archs):
                    continue
            else:
                for a in exp.archs:
                    require_arch(fam, a)
            spec = fam.spec(dt, d, c, cfg)  # validates the axes before any work
            out.append(RegisteredSource(k, dt, d, c, spec.config.label, exp.seq_len))
            mine += 1
        if not mine:
            raise SpecError(f"{k}: none of the experiment's dtypes/head dims/archs are supported by it")
    return out


def sources_of(exp) -> list[KernelSource]:
    """Every source an experiment names: registered specs first, then the user's files and functions."""
    out: list[KernelSource] = list(registered_sources(exp))
    for axis in USER_AXES:
        for item in getattr(exp, axis, ()):
            if item:
                src = file_source(axis, item, tuple(getattr(exp, "file_archs", ()) or ()))
                exists_or_refuse(src)
                out.append(src)
    labels = [s.label for s in out]
    clash = {x for x in labels if labels.count(x) > 1}
    if clash:  # a/k.ptx and b/k.ptx: label both by their paths, so their rows never merge
        out = [replace(s, qualified=True) if s.label in clash and hasattr(s, "qualified") else s for s in out]
        labels = [s.label for s in out]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise SpecError(f"the same kernel is given twice: {', '.join(dup)}")
    for s in out:
        if getattr(s, "spec_path", None):
            s.launch()  # a bad launch spec fails here, before any work
    return out
