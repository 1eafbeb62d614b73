"""What the registered families support, kept in the cache so a warm sweep plans without importing them.

Importing the shipped kernels imports Triton (a fifth of a warm sweep). The index, one record keyed by the
kernel sources' hashes, the installed Triton (version and libtriton's stamp), the environment knobs Triton
reads and ptxprobe's own code, holds each family's :class:`~ptxprobe.sources.registry.FamilyInfo` and the
reasons for the families this Triton cannot build. Alongside it, each registered spec that was emitted
leaves a pointer from (index, spec, launch shape, arch, name) to its ``emit-triton`` record, so a cached
emission is found without computing Triton's key for it. A miss on either loads the kernels as before.
"""

from __future__ import annotations

import functools
import os

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.core.stages import stage_key
from ptxprobe.sources import registry
from ptxprobe.sources.registry import FamilyInfo, KernelUnavailable, kernel_source_hashes

# What Triton's knobs read from the environment that changes the code it generates (a superset: a knob
# named here that does not change code only costs a miss)
_COMPILER_ENV_PREFIXES = ("TRITON_", "LLVM_", "MLIR_", "NVPTX_", "AMDGCN_", "PTXAS_", "DISABLE_PTXAS")
_COMPILER_ENV_NAMES = ("CC", "USE_IR_LOC")


def compiler_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(_COMPILER_ENV_PREFIXES) or k in _COMPILER_ENV_NAMES}


def index_key() -> str:
    """The registry index's key: everything the families and their emitted PTX depend on (the kernel files
    read once per process)."""
    return _index_key(registry.installed_triton(), tuple(compiler_env().items()))


@functools.cache
def _index_key(version: str | None, env: tuple) -> str:
    from ptxprobe.sources.triton import libtriton_stamp

    lib, stamp = libtriton_stamp()
    return stage_key("registry-index", kernels=kernel_source_hashes(),
                     triton={"version": version, "lib": str(lib), "stamp": stamp}, env=dict(env))


def family_catalog() -> tuple[dict[str, FamilyInfo], dict[str, str]]:
    """Every registered family this Triton builds -> what it supports, and the others -> why not."""
    return _catalog_for(index_key(), registry.installed_triton())


@functools.cache
def _catalog_for(key: str, version: str | None) -> tuple[dict[str, FamilyInfo], dict[str, str]]:
    cache = Cache()
    rec = cache.get_json("registry-index", key)
    if rec is None:
        fams, refused = registry._load_for(version)
        rec = {"families": {n: f.info.to_json() for n, f in fams.items()}, "refused": refused}
        cache.put_json("registry-index", key, rec)
    return {n: FamilyInfo.from_json(f) for n, f in rec["families"].items()}, dict(rec["refused"])


def family_info(name: str) -> FamilyInfo:
    """What one registered family supports (the error ``registry.family`` gives for an unknown or refused one)."""
    infos, refused = family_catalog()
    if name in refused:
        raise KernelUnavailable(refused[name])
    if name not in infos:
        raise SpecError(f"unknown kernel {name!r} (have: {', '.join(sorted(infos))})")
    return infos[name]


def emitted_pointer(spec_key: str, seq_len: int, arch: str, name: str | None) -> str:
    """Where the key of a registered spec's ``emit-triton`` record is kept."""
    return stage_key("registered-emit", index=index_key(), spec=spec_key, seq_len=seq_len, arch=arch, name=name)
