"""What a rename sweep is asked for, resolved once into the plan the sweep and the GPU runs execute.

The CLI (``rename-sweep``, ``capture``) turns its arguments into a ``SweepRequest`` and hands it to
``plan_sweep``; everything after that reads the frozen ``SweepPlan``: the experiment with every override applied
(the user's own kernels, the names their own entries call for, names from a ptxas scan), the output directory and
how to run. Bad input is refused here, before the output directory is touched.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.display import short_names
from ptxprobe.core.errors import PtxprobeError, SpecError
from ptxprobe.core.items import USER_AXES, KernelItem
from ptxprobe.core.store import RUNTIME_LOG, read_log
from ptxprobe.ptx.mangling import display_names, readable, trigger_origin
from ptxprobe.ptx.rename import (
    MIXED_TRIGGER_NAMES,
    MODULE_UNTRIGGERED,
    TRIGGER,
    TRIGGER_FREE_NAMES,
    apply_template,
    module_respellings,
    module_wide,
)
from ptxprobe.ptx.text import module_symbols
from ptxprobe.sources import sources_of
from ptxprobe.static.experiment import Experiment, load_experiment, override
from ptxprobe.toolchain.tools import discover, select_ptxas

log = logging.getLogger("ptxprobe")


@dataclass(frozen=True, kw_only=True)
class UserKernels:
    """The user's own kernels as given: files, a Triton function, the spec and the entry that go with them."""

    ptx: tuple[str, ...] = ()
    cubin: tuple[str, ...] = ()
    cu: tuple[str, ...] = ()
    triton: str | None = None
    spec: str | None = None
    entry: str | None = None
    lib: tuple[str, ...] = ()  # shared libraries, fatbins, cubins, wheels: the PTX they embed

    @property
    def given(self) -> bool:
        return bool(self.ptx or self.cubin or self.cu or self.lib or self.triton)

    def axes(self) -> dict[str, list[KernelItem]]:
        """The experiment axes these kernels set, as typed items: a file as the command line spells it
        (``file[:entry]``), with ``--entry`` and ``--spec`` (never spelled and split again)."""
        def items(axis: str, given: tuple[str, ...]) -> list[KernelItem]:
            parsed = [KernelItem.parse(axis, f) for f in given]
            return [KernelItem(i.path, self.entry or i.entry, self.spec or i.spec) for i in parsed]

        return {"ptx_files": items("ptx_files", self.ptx), "cubin_files": items("cubin_files", self.cubin),
                "cu_files": items("cu_files", self.cu), "lib_files": items("lib_files", self.lib),
                "triton_functions": [KernelItem(self.triton, None, self.spec)] if self.triton else []}


@dataclass(frozen=True, kw_only=True)
class SweepRequest:
    """A rename sweep as asked for, nothing resolved yet. ``run``: None times on a GPU when one is there, False
    never, True insists."""

    experiment: str | Experiment = "default"  # a shipped name, a TOML path, or an Experiment already made (the API)
    axes: Mapping[str, object] = field(default_factory=dict)  # typed axis values (the CLI reads -s into them)
    kernels: UserKernels = field(default_factory=UserKernels)
    names_from_scan: bool = False
    out: str | None = None
    jobs: int | None = None
    timeout: float = 600.0
    use_cache: bool = True
    fresh: bool = False
    executor: str = "local"
    ray_address: str | None = None
    run: bool | None = None
    explain: bool = False
    names_set_later: bool = False  # the caller sets the names axis itself (tune): no choice of names made here
    regime: str | None = None  # the GPU runs' regime (burst, sustained); None: the experiment's [run.timing] own


@dataclass(frozen=True)
class SweepPlan:
    """The request resolved: the experiment to sweep, where its run directory is, and how to run it."""

    experiment: Experiment
    out: Path
    request: SweepRequest
    nvcc_assembles: bool  # --cu with no ptxas asked for: the toolkit whose nvcc compiles it assembles it


def plan_sweep(req: SweepRequest) -> SweepPlan:
    """Resolve a request into the plan, refusing bad input with the words of what rejects it."""
    from ptxprobe.static.sweep import default_out_dir

    k = req.kernels
    if k.triton and not k.spec:
        raise SpecError("--triton needs --spec SPEC.json|toml (signature, constexprs, divisible_by_16, num_warps)")
    if k.entry and not (k.ptx or k.cubin or k.cu or k.lib):
        raise SpecError("--entry goes with --ptx, --cubin, --cu or --lib")
    if k.spec and not k.given:
        raise SpecError("--spec goes with a user kernel: --ptx, --cubin, --cu, --lib or --triton")
    if req.jobs is not None and req.jobs < 1:
        raise SpecError(f"--jobs must be at least 1, got {req.jobs}")
    if req.timeout <= 0:
        raise SpecError(f"--timeout must be positive, got {req.timeout}")
    if req.explain and req.run is False:
        raise SpecError("--explain profiles the GPU runs: it cannot go with --no-run")
    nvcc_assembles = bool(k.cu) and "ptxas" not in req.axes
    exp = _experiment(req, nvcc_assembles)
    if len(exp.names) < 2:  # one name is the baseline alone: an answer of "no" would claim a comparison never made
        raise SpecError(f"names: {exp.names[0] if exp.names else 'none'} alone is only the baseline, with nothing "
                        "to compare it with; give two or more, e.g. -s names={base},cutlass_{base}")
    refuse_one_name(exp, req.use_cache)
    out = Path(req.out) if req.out else default_out_dir(exp)
    if req.run is not False:  # a bad [run] table is bad input on any machine, before the static sweep
        from ptxprobe.gpu.dispatch import refuse_other_regime
        from ptxprobe.gpu.plan import run_config

        cfg = run_config(getattr(exp, "run", None))
        if not req.fresh:  # nor is resuming GPU runs in another regime than they were timed in
            refuse_other_regime(read_log(out / RUNTIME_LOG), cfg.timing.regime, out)
    return SweepPlan(exp, out, req, nvcc_assembles)


def _experiment(req: SweepRequest, nvcc_assembles: bool) -> Experiment:
    """The experiment file, its overrides and the user's own kernels, as one Experiment."""
    exp = req.experiment if isinstance(req.experiment, Experiment) else load_experiment(req.experiment)
    axes = dict(req.axes)
    k = req.kernels
    files = {axis: vals for axis, vals in k.axes().items() if vals}
    for axis in files:
        if axis in axes:
            raise SpecError(f"{axis}: set twice (by -s {axis}=... and by the file option); give it one way")
    if k.given:
        axes.setdefault("kernels", [])  # only the user's kernels
        if nvcc_assembles:
            axes["ptxas"] = ["nvcc"]  # the PTX nvcc emits is its own toolkit's to assemble
    axes.update(files)
    exp = override(exp, axes) if axes else exp
    if k.given and exp.name == "default":
        exp = replace(exp, name="user", description="user kernels given on the command line")
    if req.names_from_scan:
        exp = names_from_scan(exp)
    if req.regime is not None:
        exp = with_regime(exp, req.regime)
    given = any(axes.get(axis) for axis in USER_AXES)  # by the file options, or as axes (the API, -s)
    if given and not req.names_set_later and "names" not in axes:
        exp = names_for_triggered_entries(exp, req.use_cache)
    return exp


def with_regime(exp: Experiment, regime: str) -> Experiment:
    """The experiment with its GPU runs in ``regime`` (``--regime``: its ``[run.timing] regime`` set)."""
    from ptxprobe.stats.regime import REGIMES

    if regime not in REGIMES:
        raise SpecError(f"--regime {regime!r}: choose one of {', '.join(REGIMES)}")
    run = dict(exp.run)
    return replace(exp, run={**run, "timing": {**dict(run.get("timing") or {}), "regime": regime}})


def refuse_one_name(exp: Experiment, use_cache: bool = True) -> None:
    """Two templates that give a kernel one name (``{base}`` and ``vadd`` for ``vadd``) compare it with itself: the
    sweep would read "not compared: only one name" and exit 3 with nothing said. Refused here, before any output,
    wherever the kernel's entry names can be known: its PTX, a compile the sweep then reads from the cache, or a
    registered kernel already in the cache. Only templates of different shapes can collide (a literal name, or
    other placeholders than another's); a kernel that does not build is left to the sweep to say so."""
    shapes = {tuple(sorted({f for _, f, _, _ in string.Formatter().parse(t) if f is not None})) for t in exp.names}
    if len(shapes) < 2:
        return
    cache = Cache(enabled=use_cache)
    for src in sources_of(exp, cache):
        archs = src.build_archs(exp.archs)
        try:
            emitted = src.emit(archs[0], cache, only_cached=src.kind == "registered") if archs else None
            entries = emitted.swept_entries if emitted else ()
            named = [[apply_template(t, entry) for t in exp.names] for entry in entries]
        except PtxprobeError:  # it does not build, or a template makes no identifier: the sweep says so
            continue
        wide = any(module_wide(t) for t in exp.names)
        holders = set(module_respellings(emitted.ptx)) if wide and emitted else set()  # once per module, if asked
        for entry, names in zip(entries, named, strict=True):
            others = bool(holders - {entry})
            for i, name in enumerate(names):
                j = names.index(name)
                if j == i or (others and module_wide(exp.names[i]) != module_wide(exp.names[j])):
                    continue  # the same entry name in another module: a different input
                why = (f"; no other symbol of its module holds {TRIGGER!r}, so {{module_untriggered}} changes nothing"
                       if module_wide(exp.names[i]) or module_wide(exp.names[j]) else "")
                raise SpecError(f"names: {exp.names[j]} and {exp.names[i]} give {src.label} the same name, "
                                f"{readable(name)}: a kernel is never compared with itself; give "
                                f"templates that make different names{why}")


def names_for_triggered_entries(exp: Experiment, use_cache: bool = True) -> Experiment:
    """When every given kernel's own name already holds the trigger, ``cutlass_{base}`` beside ``xutlass_{base}``
    would compare two triggered names and read as "no effect". Compare instead the name without the trigger
    (baseline), the name as given, and a second trigger-free spelling (control), and say so."""
    entries, module_wide_too = [], True
    for src in sources_of(exp, Cache(enabled=use_cache)):
        # ptx/cubin entries are known without compiling; a .cu file's from nvcc's PTX, a Triton/Gluon function's
        # name (its repr= may add the trigger, as Triton's Gluon attention example does for fp8) from its first
        # emit; both are cached: the sweep's own emit reads that cache entry
        if src.kind in ("ptx", "cubin", "cuda", "lib", "triton"):
            emitted = src.emit(src.build_archs(exp.archs)[0], Cache(enabled=use_cache))
            entries += list(emitted.swept_entries)
            others = [s for s in module_symbols(emitted.ptx) if TRIGGER in s]
            module_wide_too = module_wide_too and bool(others)
            if others:  # ptxas may read those names too: a column respells them with the kernel
                log.warning("%s: %d other symbols of its module hold %r (%s)", src.label, len(others), TRIGGER,
                            ", ".join(readable(s) for s in others[:3]) + (", …" if len(others) > 3 else ""))
    with_trigger = [e for e in entries if TRIGGER in e]
    names = exp.names
    if entries and with_trigger:
        where = _trigger_origins(with_trigger)
        if len(with_trigger) < len(entries):  # each kernel compared as it would be alone: one template set for both
            log.warning("these kernels' symbols already contain %r (%s): each is compared with the trigger removed "
                        "(cutlass -> xutlass, wherever it is in the symbol), as given, and a control (cutlass -> "
                        "zutlass); the other kernels with cutlass_ and xutlass_ before their names", TRIGGER, where)
            names = MIXED_TRIGGER_NAMES
        else:
            log.warning("every kernel's symbol contains %r (%s): comparing it with the trigger removed (baseline, "
                        "cutlass -> xutlass, wherever it is in the symbol), as given, and a control (cutlass -> "
                        "zutlass)", TRIGGER, where)
            names = TRIGGER_FREE_NAMES
    if entries and module_wide_too:
        log.warning("each kernel is also compared with the trigger spelled out of every symbol of its module "
                    "(%s, the column 'whole module'); the other answers respell the kernel's own symbol alone",
                    MODULE_UNTRIGGERED)
        names = (*names, MODULE_UNTRIGGERED)
    return exp if names == exp.names else override(exp, {"names": list(names)})


def _trigger_origins(symbols: list[str], shown: int = 4) -> str:
    """Where the trigger comes from in each kernel's symbol, for people: ``mask_kernel<cutlass::half_t>: the type
    cutlass::half_t in its signature``; the rest counted."""
    names = display_names(symbols)
    short = short_names(list(names.values()), 80)
    said = [f"{short[names[s]]}: {trigger_origin(s, TRIGGER).describe()}" for s in symbols[:shown]]
    return "; ".join(said) + (f"; and {len(symbols) - shown} more" if len(symbols) > shown else "")


def names_from_scan(exp: Experiment) -> Experiment:
    """Add a name template for every identifier-like strstr literal in the sweep's ptxas binaries."""
    from ptxprobe.toolchain.scan import name_templates, scan

    tools = discover(("ptxas",))
    paths = {t.path for arch in exp.archs for spec in exp.ptxas for t in select_ptxas(arch, spec, tools)}
    lits = sorted({s.literal for p in paths for s in scan(p).sites if s.function == "strstr"})
    extra = [t for t in name_templates(lits) if t not in exp.names]
    log.warning("names from ptxas-scan: %s", ", ".join(extra) or "none new")
    return override(exp, {"names": list(exp.names) + extra})
