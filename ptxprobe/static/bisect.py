"""Bisect ptxas releases: under which versions does a name change a kernel's code?

The answer is the list of *transitions* over the whole installed range, oldest first: where
the effect appears and where it disappears. The oldest version tried is never called the
first one with the effect: if it already shows it, the effect is "present from the oldest
version tried", since older releases were not tried.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.errors import SpecError, ToolNotFound
from ptxprobe.static.experiment import experiment_from_dict
from ptxprobe.static.sweep import run_sweep
from ptxprobe.static.verdicts import DIFFERS, SAME_CODE, static_verdict
from ptxprobe.toolchain.tools import Tool, discover, install, supports_arch, version_key, version_matches

NVCC_WHEEL_VERSIONS = ("12.0.140", "12.1.105", "12.2.140", "12.3.107", "12.4.131", "12.5.82", "12.6.85", "12.8.93",
                       "12.9.86")


@dataclass(frozen=True)
class BisectStep:
    ptxas_version: str
    ptxas_sha256: str
    supported: bool
    verdict: str
    confidence: float | None
    baseline_registers: tuple
    registers: tuple

    @property
    def differs(self) -> bool | None:
        """True/False where the question was answered; None where ptxas could not answer it."""
        if not self.supported or self.verdict.startswith("ptxas"):
            return None
        return self.verdict in DIFFERS


@dataclass(frozen=True)
class Transition:
    kind: str  # present_from_oldest_tried | appears | disappears
    ptxas_version: str
    previous_version: str | None

    def describe(self) -> str:
        if self.kind == "present_from_oldest_tried":
            return f"changes the code from {self.ptxas_version}, the oldest version tried (older ones not tried)"
        verb = "starts changing" if self.kind == "appears" else "stops changing"
        return f"{verb} the code at {self.ptxas_version} (after {self.previous_version})"


def transitions(steps: list[BisectStep]) -> list[Transition]:
    """Where the effect appears and disappears over the answered steps, oldest first."""
    answered = [s for s in steps if s.differs is not None]
    out: list[Transition] = []
    for i, s in enumerate(answered):
        if i == 0:
            if s.differs:
                out.append(Transition("present_from_oldest_tried", s.ptxas_version, None))
            continue
        prev = answered[i - 1]
        if s.differs != prev.differs:
            out.append(Transition("appears" if s.differs else "disappears", s.ptxas_version, prev.ptxas_version))
    return out


WEAK = 0.95  # below this a verdict is a guess about ptxas's spread, not a reading of it


def weak_boundaries(steps: list[BisectStep], found: list[Transition]) -> list[BisectStep]:
    """The steps on either side of a transition whose verdict rests on little (``--repeat 1`` gives confidence 0):
    a release boundary drawn from them is a caveat, not a finding."""
    at = {t.ptxas_version for t in found} | {t.previous_version for t in found if t.previous_version}
    return [s for s in steps if s.ptxas_version in at and s.confidence is not None and s.confidence < WEAK]


def bisect(
    kernel: str,
    dtype: str,
    head_dim: int,
    causal: bool,
    arch: str,
    name: str = "cutlass_{base}",
    versions: list[str] | None = None,
    repeat: int = 3,
    fetch: bool = False,
    jobs: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> list[BisectStep]:
    """The rename's verdict under every ptxas release asked for (oldest first)."""
    if repeat < 1:
        raise SpecError(f"--repeat must be at least 1, got {repeat}")
    if fetch:
        for v in versions or NVCC_WHEEL_VERSIONS:
            try:
                install(v)
            except ToolNotFound:
                continue
    tools = [t for t in discover(("ptxas",)) if t.kind == "ptxas"]
    if versions:
        unknown = [v for v in versions if not any(version_matches(t.version, v) for t in tools)]
        if unknown:
            have = ", ".join(sorted({t.version for t in tools}, key=version_key))
            raise SpecError(f"no ptxas {', '.join(unknown)} installed (have: {have}); try --fetch")
        tools = [t for t in tools if any(version_matches(t.version, v) for v in versions)]
    by_version: dict[str, Tool] = {}
    for t in sorted(tools, key=lambda t: version_key(t.version)):
        by_version.setdefault(t.version, t)
    steps = []
    with tempfile.TemporaryDirectory(prefix="ptxprobe-bisect-") as d:
        for ver, tool in by_version.items():
            if not supports_arch(tool, arch):
                steps.append(BisectStep(ver, tool.sha256, False, "arch_unsupported", None, (), ()))
                continue
            exp = experiment_from_dict({"name": "bisect", "kernels": [kernel], "dtypes": [dtype],
                                        "head_dims": [head_dim], "causal": [causal], "archs": [arch],
                                        "ptxas": [tool.path], "names": ["{base}", name], "repeat": {"default": repeat}})
            res = run_sweep(exp, Path(d) / ver, jobs=jobs, progress=False, argv=["ptxprobe", "bisect"],
                            executor=executor, ray_address=ray_address)
            base = [r for r in res.rows if r["is_baseline"]]
            var = [r for r in res.rows if not r["is_baseline"]]
            if not var or any(r["status"] != "ok" for r in base + var):
                statuses = Counter(r["status"] for r in base + var)
                steps.append(BisectStep(ver, tool.sha256, True, f"ptxas {dict(statuses)}", None, (), ()))
                continue
            verdict, conf = static_verdict(Counter(r[SAME_CODE] for r in base), Counter(r[SAME_CODE] for r in var))
            regs_base = tuple(sorted({r["registers"] for r in base}))
            steps.append(BisectStep(ver, tool.sha256, True, verdict, conf, regs_base,
                                    tuple(sorted({r["registers"] for r in var}))))
    return steps
