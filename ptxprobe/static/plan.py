"""Planning a static sweep: every (renamed PTX, ptxas, flags, repeat) to assemble, keyed by content.

A variant's identity is the hash of what the assembly reads (the renamed PTX bytes, the
ptxas sha256, the arch, the flags, the repeat index) together with the kernel it belongs
to: an edited input plans new variants, an unchanged one is found in the log and reused.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass

from ptxprobe.core.cache import Cache, cache_key, sha256_text
from ptxprobe.core.errors import InvalidName, PtxprobeError, SpecError
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.check import RenameCheck, check_renames
from ptxprobe.ptx.rename import (
    Renamed,
    apply_template,
    module_respellings,
    module_wide,
    rename_symbols,
)
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


def _key_names(names: dict[str, str]) -> tuple[str | list[str], str | list[str]]:
    """The old and new names as a cache key spells them: one name as itself (the keys of single renames stay as
    they were), several as lists."""
    olds, news = list(names), list(names.values())
    return (olds, news) if len(olds) > 1 else (olds[0], news[0])


def proved_rename(base_ptx: str, names: dict[str, str], ptx: str, cache: Cache) -> RenameCheck:
    """The independent rename check of entries renamed ``{base name: new name}`` at once, memoised by content (a
    pure function of the two texts and the names)."""
    old, new = _key_names(names)
    key = stage_key("rename-check", base_ptx=sha256_text(base_ptx), base_name=old, ptx=sha256_text(ptx), name=new)
    hit = cache.get_json("rename-check", key)
    if hit is not None:
        return RenameCheck.from_json(hit)
    res = check_renames(base_ptx, ptx, names)
    cache.put_json("rename-check", key, res.to_json())
    return res


def renamed_cached(ptx: str, names: dict[str, str], cache: Cache) -> Renamed:
    """rename_entries, memoised by content (the rename is a pure function of the text and the names)."""
    old, new = _key_names(names)
    key = stage_key("rename", ptx=sha256_text(ptx), old=old, new=new)
    hit = cache.get_json("rename", key)
    if hit is not None:
        return Renamed(hit["ptx"], ",".join(names), ",".join(names.values()), hit["sites"])
    r = rename_symbols(ptx, names)
    cache.put_json("rename", key, {"ptx": r.ptx, "sites": r.sites})
    return r


@dataclass(frozen=True)
class _Module:
    """The PTX a name template gives each entry: one text holding every entry renamed (one ptxas run reads all
    their codes), or, where names would collide, a text per entry with that entry alone renamed."""

    ptx: dict[str, str]  # entry -> the PTX its variants assemble
    sites: dict[str, int]
    shared: bool


def _renamed_module(texts: dict[str, str], names: dict[str, dict[str, str]], cache: Cache) -> _Module:
    """``texts`` (entry -> its current PTX) with each entry renamed ``names[entry] = {old: new}``."""
    first = next(iter(texts.values()))
    if len(texts) > 1 and all(t is first or t == first for t in texts.values()):
        merged = {o: n for m in names.values() for o, n in m.items()}
        try:
            r = renamed_cached(first, merged, cache)
            return _Module(dict.fromkeys(texts, r.ptx), dict.fromkeys(texts, r.sites), True)
        except InvalidName:  # x -> cutlass_x beside cutlass_x: each entry alone
            pass
    out, sites = {}, {}
    for entry, text in texts.items():
        r = renamed_cached(text, names[entry], cache)
        out[entry], sites[entry] = r.ptx, r.sites
    return _Module(out, sites, False)


def kernel_label(emitted: Emitted, entry: str, in_library: bool = False) -> str:
    """The kernel column: the source's label, plus the entry's whole symbol when the source has several (two
    instantiations of one template, or overloads, are two kernels, each compared with its own baseline) or is a
    library's module (whose label, ``_C.so:_C.10.sm_80.ptx``, names no kernel)."""
    if len(emitted.swept_entries) == 1 and not in_library:
        return emitted.kernel
    return f"{emitted.kernel}:{entry}"


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
    entries = emitted.swept_entries
    baseline_names = {e: apply_template(exp.names[0], e) for e in entries}
    base = _renamed_module(dict.fromkeys(entries, emitted.ptx), {e: {e: baseline_names[e]} for e in entries}, cache)
    for template in exp.names:
        names = {e: apply_template(template, e) for e in entries}
        others = _others(base, baseline_names, template)
        maps = {e: {baseline_names[e]: names[e], **others[e]} for e in entries}
        module = _renamed_module(base.ptx, maps, cache)
        checks = _checked(base, module, maps, cache)
        for entry in entries:
            name, baseline_name, check = names[entry], baseline_names[entry], checks[entry]
            extra = {
                "rename_sites": module.sites[entry],
                "rename_checked_sites": len(check.sites),
                "rename_equivalent": check.equal,
                "renamed_with_module": module.shared,
                "module_respelled": len(maps[entry]) - 1,
                "specialization": _json(emitted.metadata.get("specialization", {})),
                "source_kind": source.kind,
                "source_ptx_sha256": emitted.ptx_sha256,
            }
            ptx = module.ptx[entry]
            ptx_sha = sha256_text(ptx)
            for tool, flags in itertools.product(ptxases, exp.flags):
                for r in range(start_repeat, start_repeat + n_rep):
                    v = Variant(
                        kernel_label(emitted, entry, source.kind == "lib"), columns["family"], columns["dtype"],
                        columns["head_dim"], columns["causal"], columns["config"], emitted.arch, tool.version,
                        tool.sha256, tuple(flags), template, name, baseline_name, r, ptx_sha,
                    )
                    out.append(Planned(v, ptx, tool, extra))
    return out


def _others(base: _Module, baseline_names: dict[str, str], template: str) -> dict[str, dict[str, str]]:
    """entry -> what a module-wide template respells besides it: every other symbol of the module holding the
    trigger (the swept entries too where each entry is renamed in its own text); read once for a shared module."""
    if not module_wide(template):
        return dict.fromkeys(baseline_names, {})
    if base.shared:
        return dict.fromkeys(baseline_names, module_respellings(next(iter(base.ptx.values())),
                                                                set(baseline_names.values())))
    return {e: module_respellings(base.ptx[e], {name}) for e, name in baseline_names.items()}


def _checked(base: _Module, module: _Module, maps: dict[str, dict[str, str]], cache: Cache) -> dict[str, RenameCheck]:
    """Each entry's rename proved by the independent checker: once for a module renamed as a whole."""
    if base.shared and module.shared:
        first = next(iter(base.ptx))
        merged = {o: n for m in maps.values() for o, n in m.items()}
        check = proved_rename(base.ptx[first], merged, module.ptx[first], cache)
        out = dict.fromkeys(base.ptx, check)
    else:
        out = {e: proved_rename(base.ptx[e], maps[e], module.ptx[e], cache) for e in base.ptx}
    bad = next((c for c in out.values() if not c.equal), None)
    if bad is not None:
        raise PtxprobeError(f"rename {bad.name_a} -> {bad.name_b} changed more than the names: {bad.detail}")
    return out


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)


def variant_record(v: Variant) -> dict:
    """The variant's own columns of a result row."""
    d = asdict(v)
    d["ptxas_flags"] = " ".join(d.pop("flags"))
    d["variant_id"] = v.variant_id
    d["assembly_key"] = v.assembly_key
    return d
