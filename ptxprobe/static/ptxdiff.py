"""``diff --ptx``: one PTX under its own name and a renamed one, assembled as often as a sweep would.

ptxas for some targets is not deterministic, so one assembly per name can show a
difference that is only ptxas's own noise. This assembles each name N times, gives the
sweep's noise-aware verdict over the two sets of outputs, and diffs the most common cubin
of each side.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ptxprobe.binary.cubin import kernel_columns
from ptxprobe.binary.diff import Diff, diff_cubins
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import PtxprobeError, SpecError, ToolFailed
from ptxprobe.ptx.rename import rename_entry, template_ptx
from ptxprobe.ptx.text import retargeted
from ptxprobe.sources.files import load_ptx
from ptxprobe.static.experiment import load_experiment
from ptxprobe.static.verdicts import SAME_CODE, static_verdict
from ptxprobe.toolchain.assemble import TRITON_FLAGS, assemble
from ptxprobe.toolchain.tools import select_ptxas


@dataclass(frozen=True)
class NoisyDiff:
    diff: Diff
    verdict: str
    confidence: float | None
    runs: int
    baseline_outputs: int
    variant_outputs: int
    failed: str = ""

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "confidence": self.confidence, "runs": self.runs,
                "baseline_outputs": self.baseline_outputs, "variant_outputs": self.variant_outputs}


def default_repeats(arch: str) -> int:
    """As many assemblies as the default experiment makes for this arch."""
    return load_experiment(None).repeats(arch)


def noise_aware_ptx_diff(path: str, template: str, arch: str | None, ptxas: str, repeat: int | None,
                         entry: str | None = None) -> NoisyDiff:
    src = load_ptx(path, entry)
    entry = src.entry
    arch = arch or src.arch
    ptx = src.ptx if arch == src.arch else retargeted(src.ptx, arch)  # --arch: as the sweep retargets a PTX file
    new, renamed = template_ptx(ptx, entry, template) if "{" in template else (template, None)
    if new == entry and (renamed is None or renamed.ptx == ptx):  # the sweep refuses this too
        raise SpecError(f"--rename {template!r} gives {entry} its own name: nothing to compare; give a name that "
                        "differs (cutlass_{base}, {base_untriggered}, …)")
    tool = select_ptxas(arch, ptxas)[0]
    runs = repeat or default_repeats(arch)
    sides = ((entry, ptx), (new, (renamed or rename_entry(ptx, entry, new)).ptx))
    cubins: tuple[list[bytes], list[bytes]] = ([], [])
    codes = (Counter(), Counter())
    cache = Cache()
    for side, (name, text) in enumerate(sides):
        for r in range(runs):
            art = assemble(text, arch, tool, TRITON_FLAGS, repeat=r, cache=cache)
            if not art.ok:
                raise PtxprobeError(art.message) if art.status == "unsupported_ptx" else _failed(art.message)
            data = art.cubin()
            cubins[side].append(data)
            codes[side][kernel_columns(data, name)[SAME_CODE]] += 1
    verdict, conf = static_verdict(codes[0], codes[1])
    common = []
    for side, (name, _) in enumerate(sides):
        top = codes[side].most_common(1)[0][0]
        common.append(next(c for c in cubins[side] if kernel_columns(c, name)[SAME_CODE] == top))
    d = diff_cubins(common[0], common[1], entry, new)
    return NoisyDiff(d, verdict, conf, runs, len(codes[0]), len(codes[1]))


def _failed(message: str):
    return ToolFailed(message)
