"""The kernels registry: what each kernel family is, and how to compile, launch and check it.

A family (from ``ptxprobe_kernels``, the repository's ``kernels/`` folder) declares everything the rest of the
pipeline needs, so no stage special-cases a kernel: its Triton function, the axes it
supports, how a spec becomes launch arguments (from which the exact Triton
specialisation is derived), its grid, inputs and float64 reference.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as md
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ptxprobe.core.cache import sha256_file
from ptxprobe.core.errors import SpecError, ToolNotFound


@dataclass(frozen=True)
class KernelConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    @property
    def label(self) -> str:
        return f"m{self.block_m}n{self.block_n}w{self.num_warps}s{self.num_stages}"

    @classmethod
    def parse(cls, label: str) -> KernelConfig:
        m = re.fullmatch(r"m(\d+)n(\d+)w(\d+)s(\d+)", label)
        if not m:
            raise SpecError(f"bad config label {label!r} (expected e.g. m128n64w8s3)")
        return cls(*(int(g) for g in m.groups()))


@dataclass(frozen=True)
class KernelSpec:
    """One concrete kernel: family x dtype x head dim x causal x block config."""

    family: str
    dtype: str
    head_dim: int
    causal: bool
    config: KernelConfig

    @property
    def key(self) -> str:
        return f"{self.family}/{self.dtype}/d{self.head_dim}/{'causal' if self.causal else 'full'}/{self.config.label}"


@dataclass(frozen=True)
class Problem:
    """Launch shape: batch, heads, sequence length (queries = keys)."""

    batch: int = 4
    heads: int = 32
    seq_len: int = 4096


@dataclass(frozen=True)
class PointerArg:
    """Stand-in for a tensor argument when specialising without a GPU (Triton reads .dtype, .data_ptr())."""

    dtype: Any
    address: int = 1 << 20  # 16-byte aligned, as every CUDA allocation is

    def data_ptr(self) -> int:
        return self.address


@dataclass(frozen=True)
class FamilyInfo:
    """What a family supports and how a spec of it is named: all a plan needs, known without importing the
    family's module (``sources.catalog`` keeps it, so a warm sweep never imports Triton)."""

    name: str
    frontend: str
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    configs: tuple[KernelConfig, ...]
    default_config: KernelConfig | None = None
    archs: tuple[str, ...] = ()

    def supports(self, dtype: str, head_dim: int, arch: str) -> bool:
        return dtype in self.dtypes and head_dim in self.head_dims and (not self.archs or arch in self.archs)

    def spec(self, dtype: str, head_dim: int, causal: bool, config: str | KernelConfig | None = None) -> KernelSpec:
        if dtype not in self.dtypes:
            raise SpecError(f"{self.name}: dtype {dtype!r} not supported (have {', '.join(self.dtypes)})")
        if head_dim not in self.head_dims:
            raise SpecError(f"{self.name}: head dim {head_dim} not supported (have {self.head_dims})")
        if config is None or config == "default":
            cfg = self.default_config or self.configs[0]
        elif isinstance(config, KernelConfig):
            cfg = config
        else:
            cfg = KernelConfig.parse(config)
        return KernelSpec(self.name, dtype, head_dim, causal, cfg)

    def to_json(self) -> dict:
        return {"name": self.name, "frontend": self.frontend, "dtypes": list(self.dtypes),
                "head_dims": list(self.head_dims), "configs": [c.label for c in self.configs],
                "default_config": self.default_config.label if self.default_config else None,
                "archs": list(self.archs)}

    @classmethod
    def from_json(cls, rec: dict) -> FamilyInfo:
        default = rec["default_config"]
        return cls(rec["name"], rec["frontend"], tuple(rec["dtypes"]), tuple(rec["head_dims"]),
                   tuple(KernelConfig.parse(c) for c in rec["configs"]),
                   KernelConfig.parse(default) if default else None, tuple(rec["archs"]))


@dataclass(frozen=True)
class KernelFamily:
    name: str
    frontend: str  # "triton" (others: "cuda", "gluon", "ptx")
    description: str
    fn: Any  # triton.JITFunction
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    configs: tuple[KernelConfig, ...]
    # spec, problem, inputs-or-None -> positional launch arguments (PointerArg stand-ins when inputs is None)
    launch_args: Callable[[KernelSpec, Problem, dict | None], list]
    grid: Callable[[KernelSpec, Problem, int], tuple[int, ...]]
    make_inputs: Callable[..., dict]  # (spec, problem, device, generator) -> tensors
    reference: Callable[[KernelSpec, dict], Any]  # float64 result
    output_key: str = "out"
    flops: Callable[[KernelSpec, Problem], float] | None = None
    default_config: KernelConfig | None = None
    extra: dict = field(default_factory=dict)
    # non-Triton frontends: (spec, arch, cache) -> Emitted, and a loader for the run stage
    emit: Callable | None = None
    archs: tuple[str, ...] = ()  # targets the family can be built for (empty: any)
    options: dict = field(default_factory=dict)  # more Triton compile options (e.g. maxnreg for warp specialisation)

    def compile_options(self, spec: KernelSpec) -> dict:
        """Triton compile options of one spec: its config's warps and stages, and the family's own options."""
        return {"num_warps": spec.config.num_warps, "num_stages": spec.config.num_stages, **self.options}

    @property
    def info(self) -> FamilyInfo:
        return FamilyInfo(self.name, self.frontend, self.dtypes, self.head_dims, self.configs, self.default_config,
                          self.archs)

    def supports(self, dtype: str, head_dim: int, arch: str) -> bool:
        return self.info.supports(dtype, head_dim, arch)

    def spec(self, dtype: str, head_dim: int, causal: bool, config: str | KernelConfig | None = None) -> KernelSpec:
        return self.info.spec(dtype, head_dim, causal, config)


KERNELS_PACKAGE = "ptxprobe_kernels"


def kernels_package() -> ModuleType:
    """The shipped kernels: installed as ``ptxprobe_kernels``, or the checkout's ``kernels/`` folder under that name."""
    try:
        return importlib.import_module(KERNELS_PACKAGE)
    except ModuleNotFoundError as exc:
        if exc.name != KERNELS_PACKAGE:
            raise
    folder = Path(__file__).resolve().parents[2] / "kernels"
    spec = importlib.util.spec_from_file_location(KERNELS_PACKAGE, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None or not folder.is_dir():
        raise ModuleNotFoundError(f"{KERNELS_PACKAGE} is not installed and {folder} is not a kernels folder")
    module = importlib.util.module_from_spec(spec)
    sys.modules[KERNELS_PACKAGE] = module
    spec.loader.exec_module(module)
    return module


def kernel_source_hashes() -> dict:
    """sha256 of every kernel source ptxprobe ships (its registered families), by path under ``kernels/``."""
    root = Path(kernels_package().__file__).parent
    return {
        f"kernels/{p.relative_to(root)}": sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".py", ".cu", ".cuh", ".toml")
    }


@dataclass(frozen=True)
class KernelModule:
    """A shipped kernel module, the families it registers, and the Triton releases it is known to build with.

    Gluon is experimental and its API moves between releases: the attentions are one source for every release
    whose ``warp_specialize`` takes a function and argument list per partition (3.6 on), the names that moved since
    resolved by ``kernels/gluon_api.py``; outside ``triton`` the module is not imported, and its families are
    refused with the reason (experiments/results/2026-12-03-cpu-triton-range has the evidence).
    ``triton`` is (lowest, first excluded) as (major, minor); None: every release pyproject.toml admits.
    """

    module: str
    names: tuple[str, ...]
    triton: tuple[tuple[int, int], tuple[int, int]] | None = None

    def needs(self) -> str:
        lo, hi = self.triton or ((0, 0), (99, 0))
        return f"Triton >={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"


GLUON_TRITON = ((3, 6), (3, 10))
_MODULES = (
    KernelModule("ptxprobe_kernels.triton_attention", ("attention", "attention_persistent")),
    KernelModule("ptxprobe_kernels.cuda_attention", ("attention_cuda",)),
    KernelModule("ptxprobe_kernels.gluon_attention", ("attention_gluon",), GLUON_TRITON),
    KernelModule("ptxprobe_kernels.gluon_attention_ws", ("attention_gluon_ws",), GLUON_TRITON),
    KernelModule("ptxprobe_kernels.gluon_attention_hopper", ("attention_gluon_hopper",), GLUON_TRITON),
)


class KernelUnavailable(ToolNotFound):
    """A registered family the installed Triton cannot build (its Gluon API moved): the environment, exit 3."""


@functools.cache
def installed_triton() -> str | None:
    """The installed Triton's version, or None when it is not installed (asked once per process)."""
    try:
        return md.version("triton")
    except md.PackageNotFoundError:
        return None


def _load() -> tuple[dict[str, KernelFamily], dict[str, str]]:
    return _load_for(installed_triton())


@functools.cache
def _load_for(version: str | None) -> tuple[dict[str, KernelFamily], dict[str, str]]:
    """The families this Triton builds and the reasons for the others; once per version (a sweep asks hundreds
    of times)."""
    out: dict[str, KernelFamily] = {}
    refused: dict[str, str] = {}
    for km in _MODULES:
        fams, why = _load_module(km, version)
        out.update(fams)
        refused.update(why)
    return out, refused


@functools.cache
def _load_module(km: KernelModule, version: str | None) -> tuple[dict[str, KernelFamily], dict[str, str]]:
    """One kernel module's families, or why this Triton cannot build them (only that module is imported: the
    CUDA C++ family loads without Triton)."""
    kernels_package()
    m = re.match(r"(\d+)\.(\d+)", version or "")
    here = (int(m.group(1)), int(m.group(2))) if m else None
    if km.triton and here is not None and not km.triton[0] <= here < km.triton[1]:
        return {}, {name: f"{name} needs {km.needs()} (its Gluon API); Triton {version} is installed"
                    for name in km.names}
    try:
        mod = importlib.import_module(km.module)
    except ImportError as exc:
        if km.triton is None or not (exc.name or "triton").startswith("triton"):
            raise
        return {}, {name: f"{name} needs {km.needs()}; with Triton {version} it cannot be imported: {exc}"
                    for name in km.names}
    return {fam.name: fam for fam in mod.FAMILIES}, {}


def families() -> dict[str, KernelFamily]:
    """The families the installed Triton can build (``sources.catalog.family_catalog`` says why not the others)."""
    return dict(_load()[0])


def family(name: str) -> KernelFamily:
    """A registered family, its module imported (and only its module)."""
    km = next((m for m in _MODULES if name in m.names), None)
    fams, refused = _load_module(km, installed_triton()) if km is not None else ({}, {})
    if name in refused:
        raise KernelUnavailable(refused[name])
    if name not in fams:
        raise SpecError(f"unknown kernel {name!r} (have: {', '.join(sorted(families()))})")
    return fams[name]
