"""The one interface every kernel input implements, and the record it yields per arch.

A registered family spec, a PTX file, a cubin, a CUDA C++ file and a user's Triton/Gluon
function all become a ``KernelSource``: for an arch it yields an ``Emitted`` (PTX with a
content identity and the entries to sweep), and optionally a launch description. The
planner, the assembler and the GPU runner see nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ptxprobe.core.cache import Cache, sha256_text

if TYPE_CHECKING:
    from ptxprobe.sources.launch import LaunchSpec


@dataclass(frozen=True)
class Emitted:
    """PTX for one source on one target, plus what the compiler said about it."""

    kernel: str  # the source's label (spec key, file name, module:function)
    arch: str
    entry: str  # the first entry to sweep (the only one for frontends that emit one kernel)
    ptx: str
    frontend: str
    metadata: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)  # stage -> sha256 of its text output
    entries: tuple[str, ...] = ()  # every entry to sweep; () means (entry,)

    @property
    def ptx_sha256(self) -> str:
        return sha256_text(self.ptx)

    @property
    def swept_entries(self) -> tuple[str, ...]:
        return self.entries or (self.entry,)


class KernelSource(ABC):
    """Something a sweep can take. Subclasses are frozen dataclasses (they cross process pools)."""

    kind: ClassVar[str]

    @property
    @abstractmethod
    def label(self) -> str:
        """The ``kernel`` column: stable and readable (a spec key, a file name)."""

    @abstractmethod
    def emit(self, arch: str, cache: Cache, only_cached: bool = False) -> Emitted | None:
        """PTX for ``arch`` (None only with ``only_cached`` on a miss)."""

    def build_archs(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        """The archs this source is built for, given the experiment's."""
        return requested

    def columns(self) -> dict:
        """Axis columns of its rows (family, dtype, head dim, causal, config)."""
        return {"family": self.kind, "dtype": None, "head_dim": None, "causal": None, "config": None}

    def launch(self) -> LaunchSpec | None:
        """How to run it on a GPU, when known."""
        return None

    def identity(self) -> dict:
        """What makes two sources the same input (beyond the PTX they emit, which keys the variants)."""
        return {"kind": self.kind, "label": self.label}

    def input_files(self, archs: tuple[str, ...], cache: Cache) -> list[Path]:
        """The user's files it is built from (kept in the run directory); none for a registered family, whose
        sources the manifest identifies by ``kernel_sources``."""
        return []
