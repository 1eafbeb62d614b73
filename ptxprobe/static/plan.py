"""Planning a static sweep: every (renamed PTX, ptxas, flags, repeat) to assemble, keyed by content.

A variant's identity is the hash of what the assembly reads (the renamed PTX bytes, the
ptxas sha256, the arch, the flags, the repeat index) together with the kernel it belongs
to: an edited input plans new variants, an unchanged one is found in the log and reused.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

from ptxprobe.core.cache import Cache, cache_key, sha256_text
from ptxprobe.core.errors import PtxprobeError, SpecError
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.check import RenameCheck, check_rename
from ptxprobe.ptx.rename import apply_template, rename_entry
from ptxprobe.ptx.text import source_identifier
from ptxprobe.sources import Emitted, KernelSource
from ptxprobe.toolchain.assemble import assembly_key
from ptxprobe.toolchain.tools import Tool, select_ptxas, unsupported_flags


@dataclass(frozen=True)
class Variant:
    """One assembly to perform: which PTX, renamed to what, by which ptxas, with which flags."""

    kernel: str
    family: str
    dtype: str | None
    head_dim: int | None
    causal: bool | None
    config: str | None
    arch: str
    ptxas_version: str
    ptxas_sha256: str
    flags: tuple[str, ...]
    name_template: str
    name: str
    baseline_name: str
    repeat: int
    ptx_sha256: str  # the renamed PTX this variant assembles

    @property
    def assembly_key(self) -> str:
        """The content key of the assembly: the cache entry it reads and writes."""
        return assembly_key(self.ptx_sha256, self.arch, self.ptxas_sha256, self.flags, self.repeat)

    @property
    def variant_id(self) -> str:
        return cache_key(kernel=self.kernel, assembly=self.assembly_key, template=self.name_template)[:24]

    @property
    def group(self) -> tuple:
        """Everything but name and repeat: the rows a verdict compares."""
        return (self.kernel, self.arch, self.ptxas_sha256, " ".join(self.flags))


@dataclass(frozen=True)
class Planned:
    variant: Variant
    ptx: str
    tool: Tool
    extra: dict  # rename columns recorded with the row


def proved_rename(base_ptx: str, base_name: str, ptx: str, name: str, cache: Cache) -> RenameCheck:
    """The independent rename check, memoised by content (a pure function of the two texts)."""
    key = stage_key("rename-check", base_ptx=sha256_text(base_ptx), base_name=base_name, ptx=sha256_text(ptx),
                    name=name)
    hit = cache.get_json("rename-check", key)
    if hit is not None:
        return RenameCheck.from_json(hit)
    res = check_rename(base_ptx, ptx, base_name, name)
    cache.put_json("rename-check", key, res.to_json())
    return res


def renamed_cached(ptx: str, old: str, new: str, cache: Cache):
    """rename_entry, memoised by content (the rename is a pure function of the text and the two names)."""
    from ptxprobe.ptx.rename import Renamed

    key = stage_key("rename", ptx=sha256_text(ptx), old=old, new=new)
    hit = cache.get_json("rename", key)
    if hit is not None:
        return Renamed(hit["ptx"], old, new, hit["sites"])
    r = rename_entry(ptx, old, new)
    cache.put_json("rename", key, {"ptx": r.ptx, "sites": r.sites})
    return r


def kernel_label(emitted: Emitted, entry: str) -> str:
    """The kernel column: the source's label, plus the entry when the source has several."""
    if len(emitted.swept_entries) == 1:
        return emitted.kernel
    return f"{emitted.kernel}:{source_identifier(entry)}"


def plan_emitted(exp, source: KernelSource, emitted: Emitted, tools: list[Tool], cache: Cache,
                 repeats: int | None = None, start_repeat: int = 0) -> list[Planned]:
    """Every variant of one source on one arch, each rename checked independently of the renamer."""
    out = []
    columns = source.columns()
    ptxases = list(dict.fromkeys(t for spec in exp.ptxas for t in select_ptxas(emitted.arch, spec, tools)))
    for flags in exp.flags:  # an option no ptxas of the sweep lists is a typo, not a version difference
        unknown = set.intersection(*(set(unsupported_flags(t, tuple(flags))) for t in ptxases)) if ptxases else set()
        if unknown:
            raise SpecError(f"flags: {', '.join(sorted(unknown))} is not an option of any ptxas in this sweep "
                            f"({', '.join(t.version for t in ptxases)}; learnt from their --help)")
    n_rep = exp.repeats(emitted.arch) if repeats is None else repeats
    for entry in emitted.swept_entries:
        baseline_name = apply_template(exp.names[0], entry)
        base_ptx = (emitted.ptx if baseline_name == entry
                    else renamed_cached(emitted.ptx, entry, baseline_name, cache).ptx)
        for template in exp.names:
            name = apply_template(template, entry)
            renamed = renamed_cached(base_ptx, baseline_name, name, cache)
            check = proved_rename(base_ptx, baseline_name, renamed.ptx, name, cache)
            if not check.equal:
                raise PtxprobeError(f"rename {baseline_name} -> {name} changed more than the name: {check.detail}")
            extra = {
                "rename_sites": renamed.sites,
                "rename_checked_sites": len(check.sites),
                "rename_equivalent": check.equal,
                "specialization": _json(emitted.metadata.get("specialization", {})),
                "source_kind": source.kind,
                "source_ptx_sha256": emitted.ptx_sha256,
            }
            ptx_sha = sha256_text(renamed.ptx)
            for tool, flags in itertools.product(ptxases, exp.flags):
                for r in range(start_repeat, start_repeat + n_rep):
                    v = Variant(
                        kernel_label(emitted, entry), columns["family"], columns["dtype"], columns["head_dim"],
                        columns["causal"], columns["config"], emitted.arch, tool.version, tool.sha256, tuple(flags),
                        template, name, baseline_name, r, ptx_sha,
                    )
                    out.append(Planned(v, renamed.ptx, tool, extra))
    return out


def _json(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def variant_record(v: Variant) -> dict:
    """The variant's own columns of a result row."""
    d = asdict(v)
    d["ptxas_flags"] = " ".join(d.pop("flags"))
    d["variant_id"] = v.variant_id
    d["assembly_key"] = v.assembly_key
    return d
