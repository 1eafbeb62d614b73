"""Kernel sources: everything a sweep can take, behind one interface (``KernelSource``)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.core.items import USER_AXES
from ptxprobe.sources.base import Emitted, KernelSource
from ptxprobe.sources.catalog import family_catalog, family_info
from ptxprobe.sources.kinds import (
    CubinFileSource,
    CudaFileSource,
    PtxFileSource,
    RegisteredSource,
    TritonFunctionSource,
    exists_or_refuse,
    file_source,
    require_arch,
)
from ptxprobe.sources.library import LibraryModuleSource, library_sources, merged_items

__all__ = [
    "USER_AXES",
    "CubinFileSource",
    "CudaFileSource",
    "Emitted",
    "KernelSource",
    "LibraryModuleSource",
    "PtxFileSource",
    "RegisteredSource",
    "TritonFunctionSource",
    "file_source",
    "left_out",
    "left_out_text",
    "narrowed",
    "registered_sources",
    "require_arch",
    "sources_of",
]


def registered_sources(exp) -> list[RegisteredSource]:
    """One source per (kernel, dtype, head dim, causal, config) that some requested arch can build (``narrowed``)."""
    return narrowed(exp)[0]


def left_out(exp) -> list[dict]:
    """What the experiment's kernels cannot build of its axes, and why (``narrowed``)."""
    return narrowed(exp)[1]


_SUPPORTED = (("archs", "archs", "targets"), ("dtypes", "dtypes", "dtypes"), ("head_dims", "head_dims", "head dims"))


def narrowed(exp) -> tuple[list[RegisteredSource], list[dict]]:
    """The registered sources an experiment's axes leave, and what is left out: ``{"kernel", "axis", "values",
    "why"}`` per kernel and axis whose values it does not support (``axis`` None: the whole kernel, which supports
    none of an axis's values, or which the installed Triton cannot build). Narrowing the default experiment by
    any axis (``-s archs=sm_90a``) runs what supports it; only when nothing is left is the experiment refused.
    """
    _, refused = family_catalog()
    out: list[RegisteredSource] = []
    left: list[dict] = []
    fams = exp.families
    for k in fams.kernels:
        if k in refused:
            left.append({"kernel": k, "axis": None, "values": [], "why": refused[k]})
            continue
        fam = family_info(k)
        unsupported = {}
        for axis, attr, what in _SUPPORTED:
            have = getattr(fam, attr)
            values = [v for v in exp.axis(axis) if have and v not in have]
            if values:
                unsupported[axis] = (values, f"{what} {', '.join(map(str, have))}")
        whole = [why for axis, (values, why) in unsupported.items() if len(values) == len(exp.axis(axis))]
        if whole:
            left.append({"kernel": k, "axis": None, "values": [], "why": "; ".join(whole)})
            continue
        left += [{"kernel": k, "axis": axis, "values": values, "why": why}
                 for axis, (values, why) in unsupported.items()]
        dtypes = [dt for dt in fams.dtypes if dt in fam.dtypes]
        head_dims = [d for d in fams.head_dims if d in fam.head_dims]
        for dt, d, c, cfg in itertools.product(dtypes, head_dims, fams.causal, fams.configs):
            spec = fam.spec(dt, d, c, cfg)  # validates the axes before any work
            out.append(RegisteredSource(k, dt, d, c, spec.config.label, fams.seq_len))
    if fams.kernels and not out and not exp.has_user_kernels:
        if all(r["kernel"] in refused for r in left):
            family_info(left[0]["kernel"])  # the installed Triton builds none of them: the environment, said as such
        raise SpecError(f"nothing left to sweep: {left_out_text(left)}")
    return out, left


def left_out_text(left: list[dict]) -> str:
    """``attention_gluon (targets sm_100a), attention_cuda on fp8e5 (dtypes fp16, bf16)``: what, and why."""
    def one(r: dict) -> str:
        if r["why"].startswith(r["kernel"]):  # the installed Triton's reason names the kernel itself
            return r["why"]
        where = f" on {', '.join(map(str, r['values']))}" if r["axis"] else ""
        return f"{r['kernel']}{where} ({r['why']})"

    return ", ".join(one(r) for r in left)


def sources_of(exp, cache: Cache | None = None) -> list[KernelSource]:
    """Every source an experiment names: registered specs first, then the user's files and functions (a library:
    one source per PTX module it embeds, extracted once through ``cache``, by default the user's)."""
    out: list[KernelSource] = list(registered_sources(exp))
    for axis in USER_AXES:
        for item in getattr(exp, axis, ()):
            if item and axis == "lib_files":
                out += library_sources(item, tuple(getattr(exp, "file_archs", ()) or ()), cache)
            elif item:
                src = file_source(axis, item, tuple(getattr(exp, "file_archs", ()) or ()))
                exists_or_refuse(src)
                out.append(src)
    out = merged_items(out)  # --lib items choosing entries of one module: one source, assembled once
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
