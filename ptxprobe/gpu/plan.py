"""Planning GPU runs: which groups (one source at one problem, one ptxas) to time on this arch.

Pure: no GPU is touched, so the plan and its notes are tested on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ptxprobe.core.errors import SpecError
from ptxprobe.gpu.timing import TimingPlan
from ptxprobe.sources import KernelSource, RegisteredSource, sources_of
from ptxprobe.sources.launch import size_label
from ptxprobe.sources.registry import Problem

# the planted slowdowns of the calibration, as fractions of the baseline's time; 0.2 % is about twice the target
# half-width (the detection limit the findings need), the others check the sizing and power above it
PLANTED = (0.002, 0.005, 0.01, 0.02)
CODE_PLANT = "code"  # a planted code change: an extra dependent chain in the hot loop (ptx.plant), truth "slower"
PLANT_KINDS = (*PLANTED, CODE_PLANT)
# ``plants = "rotate"``: one plant per group, in this turn: 0.2 % in every other group (its power is the goal's
# figure, so it gets the most groups), the others in between; a sweep of >= 8 groups plants every kind
ROTATION = (0.002, 0.005, 0.002, 0.01, 0.002, 0.02, 0.002, CODE_PLANT)
PLANT_MODES = ("rotate", "all")


@dataclass(frozen=True)
class GpuRunConfig:
    """The ``[run]`` table of an experiment: how its GPU runs are made (problem sizes, plants, the timing plan)."""

    seq_lens: tuple[int, ...] = (1024, 4096, 16384)
    tokens: int = 16384  # batch * seq_len held constant, as in the FlashAttention benchmarks
    heads: int = 32
    numerics_seq_len: int = 1024
    numerics_heads: int = 4
    sdpa_backends: tuple[str, ...] = ("cudnn", "flash")
    calibrate: bool = True  # every group also times planted slowdowns (calibration.json)
    # "rotate": each group plants one kind in turn (``ROTATION``: 0.2 % in every other group, then 0.5, 1, 2 % and
    # the code change; power per kind is over the groups that planted it; a sweep of fewer groups than the turn
    # deals every kind out over its groups); "all": every group plants every kind (``PLANT_KINDS``). The plants
    # are timed in the names block, with the names' stopping
    plants: str = "rotate"
    time_identical_code: bool = False  # names whose machine code equals the baseline's are not timed (verdict says so)
    numerics_draws: int = 5  # input draws the numbers are compared on, at the timed size and a small one
    # the flat between-run SD earlier runs stated; repro now uses the fitted model (repro.MEASURED_BETWEEN_RUN)
    between_run_sd: float = 0.005
    timing: TimingPlan = field(default_factory=TimingPlan)

    def __post_init__(self):
        if self.plants not in PLANT_MODES:
            raise ValueError(f"plants {self.plants!r}: choose one of {', '.join(PLANT_MODES)}")

    def problem(self, seq_len: int) -> Problem:
        return Problem(batch=max(1, self.tokens // seq_len), heads=self.heads, seq_len=seq_len)

    @property
    def numerics_problem(self) -> Problem:
        return Problem(1, self.numerics_heads, self.numerics_seq_len)


def run_config(d: dict | None) -> GpuRunConfig:
    """The ``[run]`` table, every key known (a typo is named with the keys there are) and every value checked."""
    d = dict(d or {})
    for where, table, cls in (("[run]", d, GpuRunConfig), ("[run.timing]", d.get("timing", {}), TimingPlan)):
        if not isinstance(table, dict):
            raise SpecError(f"{where}: expected a table, got {table!r}")
        known = {f.name for f in fields(cls)} - ({"timing"} if cls is TimingPlan else set())
        unknown = sorted(set(table) - known)
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    try:
        timing = TimingPlan(**d.pop("timing", {}))
        for k in ("seq_lens", "sdpa_backends"):
            if k in d:
                d[k] = tuple(d[k])
        return GpuRunConfig(**d, timing=timing)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"[run]: {exc}") from exc


@dataclass(frozen=True)
class Group:
    """One timed group: a source at one problem (a seq_len, or a user kernel's size set), one ptxas."""

    group_id: str
    source: KernelSource
    ptxas: str
    seq_len: int | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    plants: tuple[float | str, ...] = PLANT_KINDS  # the plants this group calibrates with (empty: none)
    dtype: str | None = None

    @property
    def sizes_dict(self) -> dict:
        return dict(self.sizes)


def plan_groups(exp, cfg: GpuRunConfig, arch: str) -> tuple[list[Group], list[str]]:
    """Every group to time on a GPU of ``arch``, and notes on what cannot run there and why."""
    groups: list[Group] = []
    notes: list[str] = []
    for src in sources_of(exp):
        built = src.build_archs(exp.archs)
        target = getattr(src, "target", src.label)
        if arch not in built:
            if src.kind != "registered":
                notes.append(f"{target}: not run: built for {', '.join(built)}, this GPU is {arch}")
            continue
        suffix = {pt: ("" if pt == "triton" else f"@ptxas={pt}") for pt in exp.ptxas}
        if isinstance(src, RegisteredSource):
            for pt in exp.ptxas:
                for n in cfg.seq_lens:
                    groups.append(Group(f"{src.label}@{n}{suffix[pt]}", src, pt, seq_len=n, dtype=src.dtype))
            continue
        launch = src.launch()
        if launch is None:
            why = "its spec has no [launch] table" if getattr(src, "spec_path", None) else \
                "no spec: give --spec with a [launch] table to run it"
            notes.append(f"{target}: static only ({why})")
            continue
        for pt in exp.ptxas:
            for sizes in launch.size_sets():
                groups.append(Group(f"user:{target}@{size_label(sizes)}{suffix[pt]}", src, pt,
                                    sizes=tuple(sorted(sizes.items()))))
    return with_plants(groups, cfg), notes


def with_plants(groups: list[Group], cfg: GpuRunConfig) -> list[Group]:
    """Each group's plants: none, every kind, or (``rotate``) one kind per group in the turn of ``ROTATION``, so
    that a sweep still plants every kind while each group times one planted pair.

    The turn shifts by one every ``len(ROTATION)`` groups: consecutive groups often differ only in the innermost
    axis (three problem sizes), which a plain turn could tie to one kind each. A sweep of fewer groups than the
    turn has deals ``PLANT_KINDS`` out over its groups in order (one group: all of them; every kind planted once).
    """
    if not cfg.calibrate:
        return [replace(g, plants=()) for g in groups]
    if cfg.plants == "all":
        return [replace(g, plants=PLANT_KINDS) for g in groups]
    n = len(ROTATION)
    if len(groups) < n:
        return [replace(g, plants=PLANT_KINDS[i::len(groups)]) for i, g in enumerate(groups)]
    return [replace(g, plants=(ROTATION[(i + i // n) % n],)) for i, g in enumerate(groups)]
