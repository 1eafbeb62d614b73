"""What a sweep says of each library it reads with ``--lib``: from which PTX, for which archs, what it is not (the
SASS the library ships, what the driver's JIT would make) and what was cut, one note per library."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.sources.library import chosen_modules, extract, library_sources, merged_items, reached
from ptxprobe.toolchain.tools import arch_order


@dataclass(frozen=True)
class LibraryNote:
    """What a sweep assembles of one library, said once: from which PTX, for which archs, and what it is not."""

    library: str  # as the notes name it (the file, or wheel:member)
    sha256: str
    modules: int  # swept
    targets: tuple[str, ...]  # the PTX targets of the swept modules
    assembled_for: tuple[str, ...]  # the archs asked for; () for each module's own target
    sass_archs: tuple[str, ...]
    stub_entries: int  # left out, over all its modules
    ptx_modules: int  # every PTX module it embeds
    entries_cut: int = 0  # other entries of the swept modules, cut from their text before ptxas (``pruned_to``)
    beyond_jit: int = 0  # modules with chosen entries whose PTX the driver never JIT-compiles for the archs asked
    beyond_targets: tuple[str, ...] = ()  # their targets

    def line(self) -> str:
        if not self.ptx_modules:
            sass = ", ".join(self.sass_archs) or "none"
            return f"{self.library}: ships SASS only ({sass}): no PTX to rename, left out"
        beyond = (f"{self.beyond_jit} PTX module{'s' if self.beyond_jit != 1 else ''} (targets "
                  f"{', '.join(self.beyond_targets)}) left out: the driver never JIT-compiles them for "
                  f"{', '.join(self.assembled_for)}") if self.beyond_jit else ""
        if not self.modules and beyond:
            return f"{self.library}: {beyond}"
        if not self.modules:
            return f"{self.library}: none of its {self.ptx_modules} PTX modules holds a kernel --entry chose"
        targets = ", ".join(self.targets)
        built = (f"assembled from {targets} PTX for {', '.join(self.assembled_for)}" if self.assembled_for
                 else f"assembled from {targets} PTX for its own target{'s' if len(self.targets) > 1 else ''}")
        mods = f"{self.modules} PTX module{'s' if self.modules != 1 else ''}"
        if self.modules != self.ptx_modules:
            mods += f" of {self.ptx_modules}"
        stubs = f"{self.stub_entries} stub entr{'ies' if self.stub_entries != 1 else 'y'} left out"
        plural = self.modules != 1
        cut = (f"; the {self.entries_cut} other entr{'ies' if self.entries_cut != 1 else 'y'} of "
               f"{'their modules' if plural else 'its module'} cut before ptxas (their globals go with them: the "
               "chosen kernels' constant-bank offsets may differ from the whole module's)" if self.entries_cut else "")
        return (f"{self.library}: {mods} (targets {targets}), {built}: neither the SASS the library ships "
                f"({', '.join(self.sass_archs) or 'none'}) nor what the driver's JIT would make; {stubs}{cut}"
                + (f"; {beyond}" if beyond else ""))


def library_notes(exp, cache: Cache | None = None) -> list[LibraryNote]:
    """One note per library the experiment sweeps (a wheel: per library inside it with device code), however many
    ``--lib`` items chose its kernels (a sample names hundreds)."""
    cache = cache or Cache()
    notes = []
    archs = tuple(getattr(exp, "file_archs", ()) or ())
    items_of: dict[str, list] = {}
    for item in getattr(exp, "lib_files", ()) or ():
        items_of.setdefault(item.path, []).append(item)
    for path, items in items_of.items():
        # the sources the sweep assembles (a library with nothing to sweep is refused here, not described): what
        # they cut is each module's entries and stubs less those its items chose, as its emit cuts them
        sources = merged_items([s for item in items for s in library_sources(item, archs, cache)])
        entries = [item.entry for item in items]
        whole = any(e in (None, "all") for e in entries)
        ext = extract(path, cache)
        for lib in ext.libraries:
            name = f"{Path(ext.path).name}:{lib.member}" if lib.member else ext.path
            held = list({m.name: m for e in ([None] if whole else entries)
                         for m in chosen_modules(lib, e, ext.path)}.values())
            chosen = [m for m in held if reached(m, archs)]
            cut = 0 if whole else sum(len(s.module.entries) + len(s.module.stubs) - len(s.chosen_entries())
                                      for s in sources if s.member == lib.member)
            beyond = tuple(sorted({m.target for m in held if m not in chosen}, key=arch_order))
            notes.append(LibraryNote(name, lib.sha256, len(chosen),
                                     tuple(sorted({m.target for m in chosen}, key=arch_order)),
                                     archs, lib.sass_archs,
                                     sum(len(m.stubs) for m in lib.modules), len(lib.modules), cut,
                                     len(held) - len(chosen), beyond))
    return notes
