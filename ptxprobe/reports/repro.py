"""Reproducibility: re-run a recorded sweep with the recorded tools and compare, and bisect
ptxas releases for the first one where a name changes the code beyond ptxas's own noise.

A re-run *matches* a deterministic recorded result when it yields the same code hash, and a
nondeterministic one when every new output falls inside the recorded set. Anything else is
a divergence, named with its most likely reason (another ptxas binary, changed kernel
source, another Triton).
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import PtxprobeError
from ptxprobe.core.schema import problem_label
from ptxprobe.core.store import MANIFEST
from ptxprobe.gpu.plan import RunConfig
from ptxprobe.runs.inputs import INPUTS, Staged, stage
from ptxprobe.runs.rundir import RunDir, same_code_column
from ptxprobe.sources.registry import kernel_source_hashes
from ptxprobe.static.experiment import experiment_from_dict, recorded_axes
from ptxprobe.static.sweep import run_sweep
from ptxprobe.stats import paired as stats
from ptxprobe.toolchain.tools import Tool, discover

MATCH, WITHIN_SET, DIVERGED, NOT_RUN = "match", "within_recorded_set", "diverged", "not_rerun"
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
    tolerance: float | None = None  # runtime: how far apart two runs may land (``runtime_tolerance``)


@dataclass
class ReproOutcome:
    rows: list[ReproRow]
    problems: list[str] = field(default_factory=list)  # environment differences found before re-running
    runtime_note: str = ""
    notes: list[str] = field(default_factory=list)  # differences worth knowing that do not decide the outcome

    runtime_rows: list[ReproRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        good = (MATCH, WITHIN_SET, WITHIN_CI, REPRODUCED)
        return not self.problems and all(r.status in good for r in self.rows + self.runtime_rows)


def _load(run_dir: Path) -> tuple[dict, list[dict]]:
    """The manifest and the recorded variants (the variant log; an old run without one: its recorded rows)."""
    rd = RunDir(run_dir)
    if not rd.has(MANIFEST):
        raise PtxprobeError(f"{run_dir}: no {MANIFEST}; not a ptxprobe run directory")
    manifest = rd.manifest
    rows = rd.variants or rd.static_rows()
    if not rows:
        raise PtxprobeError(f"{run_dir}: no recorded variants")
    return manifest, rows


def check_environment(manifest: dict, rows: list[dict], tools: list[Tool]) -> tuple[list[str], dict[str, Tool]]:
    """Differences that make a re-run meaningless or suspicious, and recorded ptxas sha256 -> tool here."""
    import importlib.metadata as md

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


def changed_sources(manifest: dict) -> list[str]:
    """Files under kernels/ whose content differs from the recorded run's."""
    here = kernel_source_hashes()
    return [path for path, sha in sorted(manifest.get("kernel_sources", {}).items()) if here.get(path) != sha]


def compare(recorded: list[dict], new: list[dict]) -> list[ReproRow]:
    def group(rows):
        g: dict[tuple, list[dict]] = defaultdict(list)
        for r in rows:
            g[(r["kernel"], r["arch"], r["ptxas_sha256"], r["ptxas_flags"], r["name"])].append(r)
        return g

    rec, cur = group(recorded), group(new)
    column = same_code_column(recorded)  # a run recorded before machine_code_sha256 is compared on its own column
    out = []
    for key, rs in sorted(rec.items()):
        kernel, arch, _, _, name = key
        ver = rs[0]["ptxas_version"]
        ok_rec = Counter(r[column] for r in rs if r["status"] == "ok")
        ns = cur.get(key, [])
        if not ns:
            out.append(ReproRow(kernel, arch, ver, name, NOT_RUN, len(ok_rec), 0, "not re-run"))
            continue
        statuses_rec = Counter(r["status"] for r in rs)
        statuses_new = Counter(r["status"] for r in ns)
        ok_new = Counter(r[column] for r in ns if r["status"] == "ok")
        if set(statuses_rec) != set(statuses_new):
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
            why = (
                "deterministic output changed"
                if len(ok_rec) == 1
                else f"{unseen} output(s) outside the {len(ok_rec)} recorded"
            )
            out.append(ReproRow(kernel, arch, ver, name, DIVERGED, len(ok_rec), len(ok_new), why))
    return out


BETWEEN_RUN_SD = RunConfig.between_run_sd  # the stated between-run SD when the run names none ([run] between_run_sd)
_SAME = {"no_difference": {"equivalent", "inconclusive", "no_difference"}}


def _same_verdict(recorded: str | None, new: str | None) -> bool:
    """Verdicts agree; the old design's ``no_difference`` matches ``equivalent`` and ``inconclusive``."""
    if recorded is None or new is None:
        return True
    return new == recorded or new in _SAME.get(recorded, set()) or recorded in _SAME.get(new, set())


def supported_verdicts(row: dict, margin: float) -> set[str]:
    """Every verdict a row's interval supports: its own, and ``equivalent`` too when a faster/slower interval
    lies inside 1 ± margin (TOST holds; only the sign of an effect smaller than the margin is claimed)."""
    verdict = row.get("runtime_verdict")
    out = {verdict}
    lo, hi = row.get("ratio_ci_low"), row.get("ratio_ci_high")
    if verdict in (stats.FASTER, stats.SLOWER) and lo is not None and 1 - margin <= lo and hi <= 1 + margin:
        out.add(stats.EQUIVALENT)
    return out


def verdicts_agree(recorded: dict, new: dict, margin: float) -> bool:
    """Two runs agree on a comparison when some verdict is supported by both; a sub-margin effect found
    significant in one run and equivalent in the other agrees, a real effect against equivalence does not."""
    rec, cur = supported_verdicts(recorded, margin), supported_verdicts(new, margin)
    return any(_same_verdict(a, b) for a in rec for b in cur)


def runtime_tolerance(rec: dict, new: dict, between_sd: float) -> float:
    """How far apart (in log ratio) two independent runs of one comparison may land: both runs' within-run
    uncertainty and the between-run SD, at 95 %."""
    def se(r):
        return (math.log(r["ratio_ci_high"]) - math.log(r["ratio_ci_low"])) / (2 * 1.96)

    return 1.96 * math.sqrt(se(rec) ** 2 + se(new) ** 2 + between_sd**2)


def between_run_sd(run_a: list[dict], run_b: list[dict]) -> float | None:
    """The between-run SD of log ratios, estimated from two runs of the same comparisons: the spread of their
    differences beyond what the two within-run intervals explain (method of moments)."""
    b = {(r["group_id"], r["label"]): r for r in run_b}
    diffs, within = [], []
    for r in run_a:
        other = b.get((r["group_id"], r["label"]))
        if other is None or not r.get("name_template") or r.get("is_baseline") or not _timed(r) or not _timed(other):
            continue
        diffs.append(math.log(r["ratio_vs_baseline"]) - math.log(other["ratio_vs_baseline"]))
        se2 = [((math.log(x["ratio_ci_high"]) - math.log(x["ratio_ci_low"])) / 3.92) ** 2 for x in (r, other)]
        within.append(sum(se2))
    if len(diffs) < 3:
        return None
    mean = sum(diffs) / len(diffs)
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return math.sqrt(max(0.0, var - sum(within) / len(within)) / 2)


def _timed(r: dict) -> bool:
    """A row with a measured ratio (names whose machine code is the baseline's are not timed)."""
    return r.get("ratio_vs_baseline") is not None


def compare_runtime(recorded: list[dict], new: list[dict], between_sd: float = BETWEEN_RUN_SD,
                    margin: float = stats.EQUIVALENCE_MARGIN) -> list[ReproRow]:
    """A re-measured comparison reproduces when the two runs agree on its verdict (``verdicts_agree``) and its
    ratio lies within the tolerance of two independent runs (within-run intervals and the between-run SD)."""

    def key(r):
        return (r["group_id"], r["label"])

    cur = {key(r): r for r in new}
    out = []
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
        gap = abs(math.log(n["ratio_vs_baseline"]) - math.log(r["ratio_vs_baseline"]))
        tol = runtime_tolerance(r, n, between_sd)
        rv, nv = r.get("runtime_verdict"), n.get("runtime_verdict")
        why = (f"ratio {n['ratio_vs_baseline']:.4f} [{n['ratio_ci_low']:.4f}, {n['ratio_ci_high']:.4f}] {nv} vs "
               f"recorded {r['ratio_vs_baseline']:.4f} [{r['ratio_ci_low']:.4f}, {r['ratio_ci_high']:.4f}] {rv}; "
               f"gap {gap:.4f} vs tolerance {tol:.4f}")
        ok = gap <= tol and verdicts_agree(r, n, margin)
        out.append(ReproRow(r["kernel"], r["arch"], ver, label, REPRODUCED if ok else DIVERGED, 1, 1, why, gap, tol))
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
    new_rows: list[dict] = []
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="ptxprobe-repro-"))
    staged = stage(run, manifest, out / INPUTS)  # the inputs the run kept, laid out again (None: an older run)
    relabel = {}
    if staged is not None:
        exp_d = {**exp_d, **staged.axes}
        relabel = _recorded_labels(exp_d, staged)
    with tempfile.TemporaryDirectory(prefix="ptxprobe-repro-cache-") as cache_dir:
        cache = Cache(cache_dir)  # nothing reused: every ptxas run happens again
        for arch in exp_d["archs"]:
            shas = sorted({r["ptxas_sha256"] for r in recorded if r["arch"] == arch and r["ptxas_sha256"] in found})
            if not shas:
                continue
            sub = experiment_from_dict({**exp_d, "archs": [arch], "ptxas": [found[s].path for s in shas]})
            res = run_sweep(sub, out / arch, jobs=jobs, cache=cache, progress=progress, argv=["ptxprobe", "repro"],
                            executor=executor, ray_address=ray_address)
            new_rows.extend(res.rows)
    rows = compare(recorded, _as_recorded(new_rows, relabel))
    # an edit to kernels/ is reported, not fatal: whether the re-run matches is decided by the outputs
    edited = changed_sources(manifest)
    notes = [f"kernel sources changed since the recorded run: {', '.join(edited)}"] if edited else []
    notes += staged.notes if staged else []
    note, runtime_rows = "", []
    if RunDir(run).has_runtime:
        from ptxprobe.core.errors import NoGpu
        from ptxprobe.gpu import runtime_sweep

        sub = experiment_from_dict(exp_d)
        try:
            new_rt = runtime_sweep(sub, out / "runtime", progress=progress, executor=executor)
            between = float(exp_d.get("run", {}).get("between_run_sd", BETWEEN_RUN_SD))
            margin = float(exp_d.get("run", {}).get("timing", {}).get("margin", stats.EQUIVALENCE_MARGIN))
            runtime_rows = compare_runtime(RunDir(run).runtime_log, _as_recorded(new_rt, relabel), between, margin)
        except NoGpu as exc:
            note = f"runtime results recorded but not re-checked: {exc}"
    return ReproOutcome(rows, problems, runtime_note=note, runtime_rows=runtime_rows, notes=notes)


def _recorded_labels(exp_d: dict, staged: Staged) -> dict[str, str]:
    """The label each source re-run from a kept copy gets -> the label the recorded run gave it."""
    from ptxprobe.sources import sources_of

    return {s.label: staged.labels[s.path] for s in sources_of(experiment_from_dict(exp_d))
            if getattr(s, "path", None) in staged.labels}


def _as_recorded(rows: list[dict], relabel: dict[str, str]) -> list[dict]:
    """Rows of sources re-run from kept copies, under the labels the recorded run gave them."""
    return [{**r, "kernel": relabel.get(r["kernel"], r["kernel"])} for r in rows] if relabel else rows
