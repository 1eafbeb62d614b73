"""Reproducibility: re-run a recorded sweep with the recorded tools and compare, and bisect
ptxas releases for the first one where a name changes the code beyond ptxas's own noise.

A re-run *matches* a deterministic recorded result when it yields the same code hash, and a
nondeterministic one when every new output falls inside the recorded set. Anything else is
a divergence, named with its most likely reason (another ptxas binary, changed kernel
source, another Triton).
"""

from __future__ import annotations

import importlib.metadata as md
import math
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.display import problem_label
from ptxprobe.core.errors import NoGpu, PtxprobeError, SpecError
from ptxprobe.core.inputs import INPUTS, Staged, stage
from ptxprobe.core.store import MANIFEST
from ptxprobe.gpu import runtime_sweep
from ptxprobe.gpu.device import IDENTITY
from ptxprobe.gpu.dispatch import with_q_values
from ptxprobe.gpu.plan import GpuRunConfig
from ptxprobe.records.record import DamagedRecord
from ptxprobe.reports.gpu_section import regime_text
from ptxprobe.runs.rundir import RunDir, same_code_columns
from ptxprobe.sources import sources_of
from ptxprobe.sources.registry import kernel_source_hashes
from ptxprobe.static.experiment import experiment_from_dict, recorded_axes
from ptxprobe.static.sweep import run_sweep
from ptxprobe.static.verdicts import DIFFERS, variant_label, variant_of
from ptxprobe.stats import meta
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import Regime
from ptxprobe.toolchain.tools import Tool, discover

MATCH, WITHIN_SET, DIVERGED, NOT_RUN = "match", "within_recorded_set", "diverged", "not_rerun"
WITHIN_SPREAD = "within_ptxas_spread"  # a new output where ptxas showed run-to-run spread on that kernel
WITHIN_CI = "within_ci"  # the old criterion's name (overlapping intervals), kept for recorded outcomes
REPRODUCED = "reproduced"


@dataclass(frozen=True)
class ReproRow:
    kernel: str
    arch: str
    ptxas_version: str
    name: str
    status: str
    recorded_outputs: int
    new_outputs: int
    reason: str = ""
    gap: float | None = None  # runtime: |log ratio difference| between the runs (None: nothing timed to compare)
    tolerance: float | None = None  # runtime: how far apart two runs may land (at its Holm step)
    p_value: float | None = None  # runtime: the difference's two-sided p (between-run model included)
    p_adjusted: float | None = None  # the same, Holm-adjusted over the repro's timed comparisons


@dataclass
class ReproOutcome:
    rows: list[ReproRow]
    problems: list[str] = field(default_factory=list)  # environment differences found before re-running
    runtime_note: str = ""
    notes: list[str] = field(default_factory=list)  # differences worth knowing that do not decide the outcome

    runtime_rows: list[ReproRow] = field(default_factory=list)
    between_run: dict = field(default_factory=dict)  # the model used, and the one re-fitted from this pair
    interrupted: bool = False  # Ctrl-C: the rows not re-run are NOT_RUN, and nothing is said of them

    @property
    def ok(self) -> bool:
        good = (MATCH, WITHIN_SET, WITHIN_SPREAD, WITHIN_CI, REPRODUCED)
        return not self.interrupted and not self.problems and all(r.status in good
                                                                  for r in self.rows + self.runtime_rows)

    @property
    def rerun(self) -> int:
        """Comparisons (variant groups, timed names) that were re-run, of ``len(rows) + len(runtime_rows)``."""
        return sum(1 for r in self.rows + self.runtime_rows if r.status != NOT_RUN)

    @property
    def diverged(self) -> list[ReproRow]:
        """Re-run comparisons that did not reproduce (never one that was not re-run)."""
        good = (MATCH, WITHIN_SET, WITHIN_SPREAD, WITHIN_CI, REPRODUCED, NOT_RUN)
        return [r for r in self.rows + self.runtime_rows if r.status not in good]


def _load(run_dir: Path) -> tuple[dict, list[dict]]:
    """The manifest and the recorded variants (the variant log; an old run without one: its recorded rows)."""
    rd = RunDir(run_dir)
    if not rd.has(MANIFEST):
        raise PtxprobeError(f"{run_dir}: no {MANIFEST}; not a ptxprobe run directory")
    manifest = rd.manifest  # its shape checked by the one reader of manifests (DamagedRecord names the fault)
    try:
        experiment_from_dict(recorded_axes(manifest))
    except SpecError as exc:
        raise DamagedRecord(f"{run_dir / MANIFEST}: {exc}") from None
    rows = rd.variants or rd.static_rows()
    if not rows:
        raise PtxprobeError(f"{run_dir}: no recorded variants")
    return manifest, rows


def _staged(run: Path, manifest: dict, dest: Path) -> Staged | None:
    """The kept inputs laid out under ``dest``; a kept copy gone from the run directory is a damaged run (exit 2)."""
    try:
        return stage(run, manifest, dest)
    except FileNotFoundError as exc:
        raise DamagedRecord(f"{exc}; copy it back, or re-run the sweep from the original sources") from None


def check_environment(manifest: dict, rows: list[dict], tools: list[Tool]) -> tuple[list[str], dict[str, Tool]]:
    """Differences that make a re-run meaningless or suspicious, and recorded ptxas sha256 -> tool here."""
    problems = []
    by_sha = {t.sha256: t for t in tools if t.kind == "ptxas"}
    recorded = {t["sha256"]: t for t in manifest.get("tools", []) if t.get("kind") == "ptxas"}
    used = {(r["ptxas_sha256"], r["ptxas_version"]) for r in rows}
    found: dict[str, Tool] = {}
    for sha, version in sorted(used):
        if sha not in recorded:
            problems.append(f"ptxas {version} sha256 {sha[:12]} used by the results is not in the manifest's tools")
        if sha in by_sha:
            found[sha] = by_sha[sha]
        else:
            same_version = [t for t in by_sha.values() if t.version == version]
            hint = (
                f" (ptxas {version} here has sha256 {same_version[0].sha256[:12]}: a different binary)"
                if same_version
                else f" (try `ptxprobe toolchain install {version}`)"
            )
            problems.append(f"ptxas {version} with sha256 {sha[:12]} not found{hint}")
    try:
        triton_here = md.version("triton")
    except md.PackageNotFoundError:
        triton_here = None
    if manifest.get("triton") and triton_here != manifest["triton"]:
        problems.append(f"triton {triton_here} here, {manifest['triton']} recorded: PTX will differ")
    return problems, found


def gpu_differences(recorded: dict, here: dict) -> list[str]:
    """How the GPU a re-measurement runs on differs from the recorded run's, by the facts that tell cards and their
    settings apart (``gpu.device.IDENTITY``); a fact either side did not record is not compared."""
    return [f"{key} {here[key]} here, {recorded[key]} recorded" for key in IDENTITY
            if recorded.get(key) not in (None, "") and here.get(key) not in (None, "")
            and str(recorded[key]) != str(here[key])]


def changed_sources(manifest: dict) -> list[str]:
    """Files under kernels/ whose content differs from the recorded run's."""
    here = kernel_source_hashes()
    return [path for path, sha in sorted(manifest.get("kernel_sources", {}).items()) if here.get(path) != sha]


def compare(recorded: list[dict], new: list[dict], interrupted: bool = False) -> list[ReproRow]:
    """Each recorded variant group against its re-run; ``interrupted``: a group cut short (fewer runs than recorded)
    is not re-run unless an output it did give is outside the recorded set."""
    def group(rows):
        g: dict[tuple, list[dict]] = defaultdict(list)
        for r in rows:
            g[(r["kernel"], r["arch"], r["ptxas_sha256"], r["ptxas_flags"], variant_of(r))].append(r)
        return g

    rec, cur = group(recorded), group(new)
    column, new_column = same_code_columns(recorded, new)  # a run recorded under an older definition: on its own terms
    spread = _spread(rec, column) | _spread(cur, new_column)
    out = []
    for key, rs in sorted(rec.items()):
        kernel, arch, name = key[0], key[1], variant_label(rs[0])
        ver = rs[0]["ptxas_version"]
        ok_rec = Counter(r[column] for r in rs if r["status"] == "ok")
        ns = cur.get(key, [])
        if not ns:
            out.append(ReproRow(kernel, arch, ver, name, NOT_RUN, len(ok_rec), 0, "not re-run"))
            continue
        statuses_rec = Counter(r["status"] for r in rs)
        statuses_new = Counter(r["status"] for r in ns)
        ok_new = Counter(r[new_column] for r in ns if r["status"] == "ok")
        if interrupted and len(ns) < len(rs) and set(ok_new) <= set(ok_rec):
            out.append(ReproRow(kernel, arch, ver, name, NOT_RUN, len(ok_rec), len(ok_new),
                                f"interrupted after {len(ns)} of {len(rs)} runs"))
        elif set(statuses_rec) != set(statuses_new):
            out.append(
                ReproRow(
                    kernel,
                    arch,
                    ver,
                    name,
                    DIVERGED,
                    len(ok_rec),
                    len(ok_new),
                    f"ptxas status {dict(statuses_new)} vs recorded {dict(statuses_rec)}",
                )
            )
        elif not ok_rec:
            out.append(ReproRow(kernel, arch, ver, name, MATCH, 0, 0, f"same status {dict(statuses_rec)}"))
        elif set(ok_new) == set(ok_rec) and len(ok_rec) == 1:
            out.append(ReproRow(kernel, arch, ver, name, MATCH, 1, 1))
        elif set(ok_new) <= set(ok_rec):
            out.append(ReproRow(kernel, arch, ver, name, WITHIN_SET, len(ok_rec), len(ok_new)))
        else:
            unseen = len(set(ok_new) - set(ok_rec))
            verdicts = (rs[0].get("verdict"), ns[0].get("verdict"))
            if key[:4] in spread and _same_answer(*verdicts):  # ptxas's own spread, and the same answer
                out.append(ReproRow(kernel, arch, ver, name, WITHIN_SPREAD, len(ok_rec), len(ok_new),
                                    f"{unseen} new output(s); ptxas gave this kernel several outputs run to run "
                                    f"(up to {spread[key[:4]]} for one name), and the verdict ({verdicts[1]}) stands"))
                continue
            why = (
                "deterministic output changed"
                if len(ok_rec) == 1
                else f"{unseen} output(s) outside the {len(ok_rec)} recorded"
            )
            if verdicts[0] != verdicts[1]:
                why += f"; verdict {verdicts[0]} -> {verdicts[1]}"
            out.append(ReproRow(kernel, arch, ver, name, DIVERGED, len(ok_rec), len(ok_new), why))
    return out


def _spread(groups: dict[tuple, list[dict]], column: str) -> dict[tuple, int]:
    """(kernel, arch, ptxas, flags) -> the most distinct outputs one name gave, where some name gave several:
    ptxas is not deterministic on that kernel there, so a name seen with one output may give another."""
    most: dict[tuple, int] = {}
    for key, rows in groups.items():
        n = len({r[column] for r in rows if r["status"] == "ok"})
        if n > 1:
            most[key[:4]] = max(n, most.get(key[:4], 0))
    return most


def _same_answer(recorded: str | None, new: str | None) -> bool:
    """Do two verdicts answer "does the name change the code?" alike (``differs`` and ``differs_unrepeated`` do;
    ``identical`` and ``differs_within_noise`` do)?"""
    return (recorded in DIFFERS) == (new in DIFFERS)


BETWEEN_RUN_SD = GpuRunConfig.between_run_sd  # the flat SD the runs before the between-run model stated (0.5 %)
REPRO_LEVEL = 0.95  # two runs of one comparison diverge when their difference is significant at this level
HOLM = "holm"  # compare_runtime's family adjustment: Holm over a repro's timed comparisons
# The between-run model (stats.meta) fitted by REML on five runs of the every-default H200 study (36 timed name
# comparisons each): the run effect grows with the effect (2.9 % of it) and has no measurable floor (tau0 ~ 0);
# DerSimonian-Laird's flat tau is 0.027 %. The first pair alone gave 4.0 %. tests/study/test_between_run.py re-estimates
# it from those runs and pins these numbers.
BETWEEN_RUN_RUNS = ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro", "2026-12-04-h200-defaults",
                    "2026-12-04-h200-defaults-repro", "2026-12-04-h200-defaults-sized-plants")
MEASURED_BETWEEN_RUN = meta.BetweenRun(tau0=0.0, slope=0.0288, method="REML", comparisons=36, runs=5,
                                       source=" + ".join(BETWEEN_RUN_RUNS), tau0_dl=0.000266)


def between_run_model(value: meta.BetweenRun | dict | float | None) -> meta.BetweenRun:
    """The model a comparison of runs uses: a fitted one, a stated flat SD, or (None) the measured one."""
    if value is None:
        return MEASURED_BETWEEN_RUN
    if isinstance(value, meta.BetweenRun):
        return value
    if isinstance(value, dict):
        return meta.BetweenRun.of(value)
    return meta.BetweenRun(float(value), 0.0, "stated")


def log_ratio_and_se(row: dict) -> tuple[float, float]:
    """A row's log ratio and its standard error from its interval at that interval's own level."""
    se = meta.standard_error(row["ratio_ci_low"], row["ratio_ci_high"], row.get("ci_level") or 0.95)
    return math.log(row["ratio_vs_baseline"]), se


def direction(row: dict) -> int:
    """+1 / -1 when the row claims an effect that is not shown to be inside the margin (a significant verdict
    under its own rule, ``negligible`` excepted: a sub-margin sign does not reproduce, and the docs say so), 0 when
    it does not."""
    if (row.get("runtime_verdict") not in stats.SIGNIFICANT or row.get("runtime_verdict") == stats.NEGLIGIBLE
            or row.get("ratio_vs_baseline") is None):
        return 0
    return 1 if row["ratio_vs_baseline"] > 1.0 else -1


def opposite_directions(recorded: dict, new: dict) -> bool:
    """Both runs claim an effect not shown inside the margin, of opposite signs: never a reproduction, whatever the
    gap and its tolerance (two ``negligible`` results of opposite sign are judged by the gap alone)."""
    return direction(recorded) * direction(new) < 0


def name_comparisons(rows: list[dict]) -> dict[tuple, dict]:
    """The timed name comparisons of a run's rows, by (group_id, label)."""
    return {(r["group_id"], r["label"]): r for r in rows if r.get("name_template") and not r.get("is_baseline")
            and r.get("block", "names") == "names" and _timed(r)}


def estimate_from_runs(runs: list[list[dict]], source: str = "") -> meta.BetweenRun | None:
    """The between-run model fitted (REML, ``stats.meta``) on two or more runs of the same comparisons."""
    return meta.estimate_between_run([{k: log_ratio_and_se(r) for k, r in name_comparisons(rows).items()}
                                      for rows in runs], source)


def between_run_sd(run_a: list[dict], run_b: list[dict]) -> float | None:
    """A flat between-run SD of log ratios from two runs of the same comparisons (REML, no slope)."""
    runs = [{k: log_ratio_and_se(r) for k, r in name_comparisons(rows).items()} for rows in (run_a, run_b)]
    fit = meta.estimate_between_run(runs, allow_slope=False)
    return None if fit is None else fit.tau0


def _timed(r: dict) -> bool:
    """A row with a measured ratio (names whose machine code is the baseline's are not timed)."""
    return r.get("ratio_vs_baseline") is not None


def judged(rows: list[dict]) -> list[dict]:
    """Rows as the run's final table has them: a run's log holds its rows before Benjamini-Hochberg over the
    run gated their verdicts (rows of the earlier rule, or already judged, come back as they were)."""
    if not any(r.get("verdict_rule") in stats.BH_RULES and "q_value" not in r for r in rows):
        return rows

    return with_q_values(rows)


def compare_runtime(recorded: list[dict], new: list[dict], between: meta.BetweenRun | float | None = None,
                    margin: float = stats.EQUIVALENCE_MARGIN, level: float = REPRO_LEVEL,
                    family: str | None = HOLM) -> list[ReproRow]:
    """A re-measured comparison reproduces when the two log ratios do not differ significantly (their difference's
    p-value, with both within-run errors and each run's own run effect from the between-run model, adjusted by
    ``family``: Holm over the timed comparisons of this repro, so that a run of many comparisons that all reproduce
    is called diverged at most ``1 - level`` of the time; None: each comparison at ``level`` alone) and the runs do
    not claim effects of opposite sign. ``tolerance`` is the gap the comparison could have at its Holm step.
    ``margin`` is kept for callers; the verdicts come as each run recorded them."""
    del margin

    def key(r):
        return (r["group_id"], r["label"])

    model = between_run_model(between)
    recorded, new = judged(recorded), judged(new)
    cur = {key(r): r for r in new}
    out: list = []
    timed: list[tuple] = []  # (row index, recorded, new, label, ptxas): judged together below
    for r in sorted(recorded, key=key):
        if not r.get("name_template") or r.get("is_baseline") or r.get("block", "names") != "names":
            continue
        ver = r.get("run_ptxas_version", "")
        n = cur.get(key(r))
        label = f"{r['name']} @ {problem_label(r)}"
        if n is None:
            out.append(ReproRow(r["kernel"], r["arch"], ver, label, NOT_RUN, 1, 0, "not re-run"))
            continue
        if not _timed(r) or not _timed(n):  # identical machine code on one side: reproduced only if on both
            rv, nv = r.get("runtime_verdict"), n.get("runtime_verdict")
            ok = rv == nv == stats.IDENTICAL_CODE
            out.append(ReproRow(r["kernel"], r["arch"], ver, label, REPRODUCED if ok else DIVERGED, 1, 1,
                                f"{nv} vs recorded {rv}"))
            continue
        timed.append((len(out), r, n, label, ver))
        out.append(None)
    return _judged_gaps(out, timed, model, level, family)


def _regimes(recorded: dict, new: dict) -> str:
    """The two runs' regimes beside a timed comparison's judgement, where both recorded one (a gain can move with
    the clock: the rows' own slopes say whether it did within each run)."""
    a, b = Regime.from_fields(recorded), Regime.from_fields(new)
    if a is None or b is None:
        return ""
    return f"; regime now {regime_text(b)}, recorded {regime_text(a)}"


def _judged_gaps(out: list, timed: list[tuple], model: meta.BetweenRun, level: float,
                 family: str | None) -> list[ReproRow]:
    """The timed comparisons' rows: each gap d = log r1 - log r2 against its standard error sqrt(s1^2 + s2^2 +
    2 tau^2) (each run with its own run effect, tau at the two runs' mean effect), read against a t on the model's
    degrees of freedom where tau was fitted (its uncertainty paid for); the p-values, adjusted over them all
    (``family``), decide. ``tolerance`` is the gap allowed at the comparison's own Holm step."""
    gaps = [meta.divergence_z(*log_ratio_and_se(r), *log_ratio_and_se(n), model) for _, r, n, _, _ in timed]
    p = [model.p_value(abs(d) / se if se > 0 else (math.inf if d else 0.0)) for d, se in gaps]
    holm = family == HOLM
    adjusted = stats.holm_adjusted(p) if holm else p
    steps = [1] * len(p)  # Holm compares the k-th smallest p with alpha / (m - k)
    for k, i in enumerate(sorted(range(len(p)), key=lambda i: p[i])):
        steps[i] = len(p) - k if holm else 1
    for j, (at, r, n, label, ver) in enumerate(timed):
        d, se = gaps[j]
        gap, tol = abs(d), model.critical(1.0 - (1.0 - level) / steps[j]) * se
        rv, nv = r.get("runtime_verdict"), n.get("runtime_verdict")
        flipped = opposite_directions(r, n)
        why = (f"ratio {n['ratio_vs_baseline']:.4f} [{n['ratio_ci_low']:.4f}, {n['ratio_ci_high']:.4f}] {nv} vs "
               f"recorded {r['ratio_vs_baseline']:.4f} [{r['ratio_ci_low']:.4f}, {r['ratio_ci_high']:.4f}] {rv}; "
               f"gap {gap:.4f} vs tolerance {tol:.4f}, p {p[j]:.3g}"
               + (f" (Holm over {len(p)}: {adjusted[j]:.3g})" if holm else "")
               + ("; significant effects of opposite sign" if flipped else "") + _regimes(r, n))
        ok = adjusted[j] > 1.0 - level and not flipped
        out[at] = ReproRow(r["kernel"], r["arch"], ver, label, REPRODUCED if ok else DIVERGED, 1, 1, why, gap, tol,
                           p[j], adjusted[j])
    return out


def repro(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    jobs: int | None = None,
    progress: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
) -> ReproOutcome:
    """Re-run the recorded sweep with the recorded ptxas binaries (fresh cache) and compare."""
    run = Path(run_dir)
    manifest, recorded = _load(run)
    tools = discover()
    problems, found = check_environment(manifest, recorded, tools)
    exp_d = recorded_axes(manifest)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="ptxprobe-repro-"))
    try:
        return _rerun_and_compare(run, manifest, recorded, found, problems, exp_d, out, jobs, progress, executor,
                                  ray_address)
    finally:
        if not out_dir:  # the re-run's own files: nothing of them is in the outcome, and no one was told where
            shutil.rmtree(out, ignore_errors=True)


def _rerun_and_compare(run: Path, manifest: dict, recorded: list[dict], found: dict, problems: list[str],
                       exp_d: dict, out: Path, jobs: int | None, progress: bool, executor: str,
                       ray_address: str | None) -> ReproOutcome:
    staged = _staged(run, manifest, out / INPUTS)  # the inputs the run kept, laid out again (None: an older run)
    relabel = {}
    if staged is not None:
        exp_d = {**exp_d, **staged.axes}
        relabel = _recorded_labels(exp_d, staged)
    new_rows, interrupted = _static_rerun(exp_d, recorded, found, out, jobs, progress, executor, ray_address)
    rows = compare(recorded, _as_recorded(new_rows, relabel), interrupted)
    # an edit to kernels/ is reported, not fatal: whether the re-run matches is decided by the outputs
    edited = changed_sources(manifest)
    notes = [f"kernel sources changed since the recorded run: {', '.join(edited)}"] if edited else []
    notes += staged.notes if staged else []
    note, runtime_rows, between_run = "", [], {}
    if RunDir(run).has_runtime and interrupted:
        runtime_rows = compare_runtime(RunDir(run).runtime_log, [])  # every timed comparison: not re-run
    elif RunDir(run).has_runtime:
        note, runtime_rows, between_run, interrupted = _runtime_recheck(run, exp_d, out, relabel, progress, executor,
                                                                        notes)
    return ReproOutcome(rows, problems, runtime_note=note, runtime_rows=runtime_rows, notes=notes,
                        between_run=between_run, interrupted=interrupted)


def _static_rerun(exp_d: dict, recorded: list[dict], found: dict, out: Path, jobs: int | None, progress: bool,
                  executor: str, ray_address: str | None) -> tuple[list[dict], bool]:
    """The recorded sweep again, per arch, with the recorded ptxas binaries found here and a fresh cache: the new
    rows, and whether an interrupt cut it (the archs after it not started)."""
    new_rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ptxprobe-repro-cache-") as cache_dir:
        cache = Cache(cache_dir)  # nothing reused: every ptxas run happens again
        try:
            for arch in exp_d["archs"]:
                shas = sorted({r["ptxas_sha256"] for r in recorded
                               if r["arch"] == arch and r["ptxas_sha256"] in found})
                if not shas:
                    continue
                sub = experiment_from_dict({**exp_d, "archs": [arch], "ptxas": [found[s].path for s in shas]})
                res = run_sweep(sub, out / arch, jobs=jobs, cache=cache, progress=progress,
                                argv=["ptxprobe", "repro"], executor=executor, ray_address=ray_address)
                new_rows.extend(res.rows)
                if res.interrupted:  # the sweep kept what finished and returned: the other archs are not started
                    return new_rows, True
        except KeyboardInterrupt:  # between two archs' sweeps, or before one had assembled anything
            return new_rows, True
    return new_rows, False


def _runtime_recheck(run: Path, exp_d: dict, out: Path, relabel: dict, progress: bool, executor: str,
                     notes: list[str]) -> tuple[str, list, dict, bool]:
    """Every timed comparison re-measured and judged against the recorded one under the between-run model (Holm
    over them); another card said in ``notes``. (note, rows, the model used and this pair's, interrupted)."""
    sub = experiment_from_dict(exp_d)
    between = between_run_model(exp_d.get("run", {}).get("between_run"))  # the measured model by default
    margin = float(exp_d.get("run", {}).get("timing", {}).get("margin", stats.EQUIVALENCE_MARGIN))
    try:
        new_rt = runtime_sweep(sub, out / "runtime", progress=progress, executor=executor)
        moved = gpu_differences(RunDir(run).gpu or {}, RunDir(out / "runtime").gpu or {})  # both runs' gpu.json
        if moved:  # another card, or the same one set otherwise: re-measured all the same, and said
            notes.append("the GPU differs from the recorded run's: " + "; ".join(moved))
        rows = compare_runtime(RunDir(run).runtime_log, _as_recorded(new_rt, relabel), between, margin)
        fit = estimate_from_runs([RunDir(run).runtime_log, new_rt], f"{run.name} + its repro")
        return "", rows, {"used": between.to_json(), "this_pair": fit.to_json() if fit else None,
                          "multiplicity": f"{HOLM} over {sum(r.p_value is not None for r in rows)} timed "
                                          f"comparisons, family-wise {1.0 - REPRO_LEVEL:g}"}, False
    except NoGpu as exc:
        return f"runtime results recorded but not re-checked: {exc}", [], {}, False
    except KeyboardInterrupt:  # the groups timed before it are in the runtime log: compared, the rest not re-run
        rows = compare_runtime(RunDir(run).runtime_log, _as_recorded(RunDir(out / "runtime").runtime_log, relabel),
                               between, margin)
        return "", rows, {}, True


def _recorded_labels(exp_d: dict, staged: Staged) -> dict[str, str]:
    """The label each source re-run from a kept copy gets -> the label the recorded run gave it."""
    return {s.label: staged.labels[s.path] for s in sources_of(experiment_from_dict(exp_d))
            if getattr(s, "path", None) in staged.labels}


def _as_recorded(rows: list[dict], relabel: dict[str, str]) -> list[dict]:
    """Rows of sources re-run from kept copies, under the labels the recorded run gave them."""
    return [{**r, "kernel": relabel.get(r["kernel"], r["kernel"])} for r in rows] if relabel else rows
