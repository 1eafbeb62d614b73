"""``capture --run``: the captured program timed end to end with every kernel renamed, A/B against itself.

For each arm (the baseline name, the triggered name, the control name, and an A/A copy of the
baseline) every captured kernel is renamed and assembled by one ptxas (the one Triton uses for the
arch, unless told otherwise), and the program is re-run with :mod:`ptxprobe.capture.swap` loading those
cubins in place of its own. So the arms differ by the entry names alone; the baseline arm is not
the program's own cubin but ptxprobe's, assembled the same way.

Each round runs every arm once in a fresh random order; a run's measure is the program's wall time,
or a number it prints (``--metric REGEX``, one group, smaller is better: e.g. its own CUDA-event
milliseconds). Arms are compared with the baseline round by round (paired log ratios, Hodges-Lehmann
with its signed-rank interval, the ±margin TOST decision), the same statistics as the kernel timing; the A/A
arm is the calibration: it should come out equivalent or inconclusive, never faster or slower.
A run that fails, or in which the hook swapped nothing, is recorded and left out of the statistics.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from statistics import NormalDist

import numpy as np

import ptxprobe
from ptxprobe.capture.swap import ENV, write_swap_site
from ptxprobe.core.cache import Cache, atomic_write, sha256_text
from ptxprobe.core.errors import SpecError, ToolFailed
from ptxprobe.core.proc import run_tool
from ptxprobe.gpu.monitor import Monitor, mostly_throttled, program_reader
from ptxprobe.gpu.timing import Nvml
from ptxprobe.ptx.rename import TRIGGER, TRIGGER_FREE_NAMES, apply_template, renamed_ptx
from ptxprobe.records.program import ProgramAB
from ptxprobe.stats import meta, serial
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import PROGRAM, Reading, regime_of
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import Tool

AB = ProgramAB.FILE
ROLES = ("baseline", "trigger", "control")
DEFAULT_TEMPLATES = ("{base}", "cutlass_{base}", "xutlass_{base}")
MIN_ROUNDS = 6  # the fewest rounds whose exact signed-rank interval can exclude 1 (5 rounds: p >= 0.0625)


@dataclass(frozen=True)
class Arm:
    label: str  # baseline, trigger, control, aa
    plan: str  # path of the swap plan
    names: dict  # entry -> name loaded in this arm
    report: str = ""  # where the hook appends what it swapped (named in the plan too)


@dataclass(frozen=True)
class Run:
    arm: str
    round: int
    position: int
    ok: bool
    seconds: float
    value: float | None  # the measure (metric or wall seconds); None when the run is discarded
    swapped: int
    note: str = ""
    # what NVML said while the run lasted (gpu.monitor): median SM clock and power, share of readings throttled
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    throttled_share: float | None = None
    resolution: float | None = None  # the unit of the --metric number's last printed digit

    def reading(self) -> Reading:
        return Reading(self.sm_clock_mhz, self.power_w, mostly_throttled(self.throttled_share))


def templates_for(entry: str, templates: tuple[str, ...] | None) -> tuple[str, ...]:
    """The (baseline, trigger, control) templates of one entry: trigger-free names when it holds the trigger."""
    if templates:
        if len(templates) != 3:
            raise SpecError("capture --run needs three name templates: baseline, triggered, control")
        return templates
    return TRIGGER_FREE_NAMES if TRIGGER in entry else DEFAULT_TEMPLATES


def build_arms(kernels: list, capture_dir: Path, out: Path, tools_by_arch: dict[str, Tool], default_arch: str,
               cache: Cache, templates: tuple[str, ...] | None = None) -> list[Arm]:
    """Rename and assemble every captured kernel for every arm; write one swap plan per arm."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "cubins").mkdir(exist_ok=True)
    names_by_role: dict[str, dict[str, str]] = {r: {} for r in ROLES}
    plans: dict[str, list] = {r: [] for r in ROLES}
    for k in kernels:
        ptx = (capture_dir / k.ptx).read_text()
        arch = k.arch or default_arch
        tool = tools_by_arch[arch]
        for role, template in zip(ROLES, templates_for(k.entry, templates), strict=True):
            name = apply_template(template, k.entry)
            text = renamed_ptx(ptx, k.entry, name)
            art = assemble(text, arch, tool, cache=cache)
            if not art.ok:
                raise ToolFailed(f"ptxas {tool.version} could not assemble {k.entry} as {name}: {art.stderr[-300:]}")
            cubin = out / "cubins" / f"{name}-{sha256_text(text)[:12]}.cubin"
            atomic_write(cubin, art.cubin())
            names_by_role[role][k.entry] = name
            plans[role].append({"entry": k.entry, "name": name, "cubin": str(cubin.resolve()),
                                "ptx_sha256": k.ptx_sha256, "ptxas": tool.version, "ptxas_sha256": tool.sha256})
    arms = []
    for label, role in (("baseline", "baseline"), ("trigger", "trigger"), ("control", "control"), ("aa", "baseline")):
        plan = out / f"plan-{label}.json"
        report = out / f"report-{label}.jsonl"
        atomic_write(plan, json.dumps({"arm": label, "kernels": plans[role], "report": str(report.resolve())},
                                      indent=1).encode())
        arms.append(Arm(label, str(plan), names_by_role[role], str(report.resolve())))
    return arms


def swap_env(arm: Arm, site: Path, extra: dict | None = None) -> dict[str, str]:
    """The program's environment for one arm: the swap hook first on PYTHONPATH, ptxprobe importable."""
    root = str(Path(ptxprobe.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (str(site), root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **(extra or {}), "PYTHONPATH": path, ENV: arm.plan}


def printed_resolution(text: str) -> float | None:
    """The unit of a printed number's last digit ("1.23" -> 0.01, "1.5e-3" -> 0.0001, "120" -> 1): what the program's
    rounding hides. None for a number Decimal cannot read (inf, nan)."""
    try:
        exponent = Decimal(text.strip()).as_tuple().exponent
    except InvalidOperation:
        return None
    return float(Decimal(1).scaleb(exponent)) if isinstance(exponent, int) else None


def _measure(stdout: str, metric: re.Pattern | None, seconds: float) -> tuple[float | None, float | None]:
    """A run's measure and the resolution it was printed with (wall seconds: None, the clock's own)."""
    if metric is None:
        return seconds, None
    found = metric.findall(stdout)
    if not found:
        return None, None
    last = found[-1]
    text = last[0] if isinstance(last, tuple) else last
    try:
        return float(text), printed_resolution(text)
    except ValueError:  # matched, but not a number: the run has no measure (its note says so)
        return None, None


def to_resolution(iv: stats.Interval, p: float, floor: float) -> tuple[stats.Interval, float]:
    """An interval narrower than the rounding's log half-width ``floor`` can resolve, widened to it, with its p-value
    raised to the one the widened interval implies (normal, at its level); otherwise both as they were. A metric
    rounded to 3 digits gives identical rounds, a zero-width interval and a tiny p: read as that, "faster"."""
    if not floor or min(iv.estimate / iv.low, iv.high / iv.estimate) >= math.exp(floor):
        return iv, p
    wide = stats.Interval(iv.estimate, min(iv.low, iv.estimate * math.exp(-floor)),
                          max(iv.high, iv.estimate * math.exp(floor)), iv.level)
    se = meta.standard_error(wide.low, wide.high, wide.level)
    return wide, max(p, 2.0 * NormalDist().cdf(-abs(math.log(wide.estimate)) / se))


def resolution_floor(pairs: list[tuple[Run, Run]]) -> float:
    """The log half-width the printed digits cannot resolve: a value printed to a unit u lies within u/2 of the
    truth, so a round's log ratio is unknown by up to u_b/(2b) + u_v/(2v); the worst round's (0 when the measures
    carry no resolution: wall time)."""
    return max((((b.resolution or 0.0) / (2 * b.value)) + ((v.resolution or 0.0) / (2 * v.value))
                for b, v in pairs), default=0.0)


def _report_lines(arm: Arm) -> list[str]:
    """The lines the hook has appended to the arm's report so far (one per program run that reached exit)."""
    report = Path(arm.report)
    return [x for x in report.read_text().splitlines() if x.strip()] if report.exists() else []


def _swapped_since(arm: Arm, before: int) -> tuple[int, list[str]]:
    """Kernels the hook swapped, and captured entries whose PTX did not match, in the runs after ``before`` lines."""
    lines = [json.loads(x) for x in _report_lines(arm)[before:]]
    swapped = sum(sum(x["swapped"].values()) for x in lines)
    mismatched = sorted({m for x in lines for m in x["mismatched"]})
    return swapped, mismatched


def run_rounds(argv: list[str], arms: list[Arm], out: Path, rounds: int, timeout: float, metric: str | None,
               seed: int = 0, env_extra: dict | None = None, log=print, runs: list[Run] | None = None) -> list[Run]:
    """Every round: each arm once, in a fresh random order. Runs are appended to ``runs`` (when given) as they
    finish, so a caller interrupted mid-way still holds every finished run."""
    site = write_swap_site(out / "site")
    pattern = re.compile(metric) if metric else None
    by_label = {a.label: a for a in arms}
    runs = [] if runs is None else runs
    read = program_reader(Nvml())
    for r, order in enumerate(stats.random_orders([a.label for a in arms], rounds, seed=seed)):
        for pos, label in enumerate(order):
            arm = by_label[label]
            before = len(_report_lines(arm))
            t0 = time.perf_counter()
            with Monitor(read) as card:
                res = run_tool(argv, timeout=timeout, env=swap_env(arm, site, env_extra))
            secs = time.perf_counter() - t0
            swapped, mismatched = _swapped_since(arm, before)
            value, resolution = _measure(res.stdout, pattern, secs) if res.ok else (None, None)
            note = "" if res.ok else res.describe()[:200]
            if res.ok and swapped == 0:
                note, value = "the hook swapped no kernel: nothing of ptxprobe's ran", None
            elif mismatched:  # part of the program ran its own cubins: the run measured a mixture
                note, value = f"PTX differs from the capture for {', '.join(mismatched)[:120]}", None
            elif res.ok and value is None:
                note = f"no number for --metric {metric!r} in the output"
            seen = card.result
            runs.append(Run(label, r, pos, res.ok, round(secs, 4), value, swapped, note, seen.sm_clock_mhz,
                            seen.power_w, seen.throttled_share, resolution))
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{x.arm} {x.value if x.value is not None else 'x'}"
                                                     for x in runs[-len(arms):]))
    return runs


def compare(runs: list[Run], margin: float = stats.EQUIVALENCE_MARGIN, baseline: str = "baseline",
            arms: tuple[str, ...] = ("trigger", "control", "aa"), method: str = stats.SERIAL_SIGNED_RANK,
            power_limit_w: float | None = None) -> list[dict]:
    """Each of ``arms`` against ``baseline``, round by round (rounds where either run was discarded are dropped):
    Hodges-Lehmann with its interval (``method``: by default the exact signed-rank interval widened for serial
    correlation; records name theirs in ``ci_method``) and the ±margin decision (``stats.decide``), the p-value the
    interval inverts beside it, and the ratio of means with ``contaminated`` where the two part by more than the
    half-width (``stats.contaminated``: one-sided outliers); the verdicts of the arms other than the A/A copy are
    adjusted over them (``adjusted_over_arms``); with fewer than ``MIN_ROUNDS`` usable rounds the verdict is
    ``too_few_runs``. Each row carries the regime of its runs (``stats.regime``, ``program``: the card's clock,
    throttling and power while they ran, against ``power_limit_w``). The exact
    interval holds its level at the handful of rounds a program affords (a BCa bootstrap did not:
    tests/test_capture_ab.py measures both). (``tune.apply`` compares its arms here too: its baseline is ``yours``,
    so its rows hold ``yours_median``.)"""
    by = {(x.arm, x.round): x for x in runs}
    rounds = sorted({x.round for x in runs})
    rows = []
    ivs: dict[str, stats.Interval] = {}
    for arm in arms:
        kept = [(by[(baseline, r)], by[(arm, r)]) for r in rounds if (baseline, r) in by and (arm, r) in by]
        kept = [(b, v) for b, v in kept if b.value is not None and v.value is not None and b.value > 0 and v.value > 0]
        pairs = [(b.value, v.value) for b, v in kept]
        row = {"arm": arm, "rounds": len(pairs)}
        if len(pairs) >= MIN_ROUNDS:
            logs = stats.log_ratios([b for b, _ in pairs], [v for _, v in pairs])
            row["regime"] = regime_of(PROGRAM, logs, [b.reading() for b, _ in kept], [v.reading() for _, v in kept],
                                      power_limit_w).fields()
            floor = resolution_floor(kept)
            raw = stats.paired_interval(logs, method=method)
            iv, p = to_resolution(raw, stats.paired_pvalue(logs, method), floor)
            row["resolution_floor"] = floor
            if iv is not raw:
                row["widened_to_resolution"] = True
            means = stats.ratio_of_means([b for b, _ in pairs], [v for _, v in pairs])
            ivs[arm] = iv
            row.update(ratio=iv.estimate, low=iv.low, high=iv.high, half_width=stats.half_width(iv),
                       verdict=stats.decide(iv, margin), p_value=p,
                       ci_method=method, lag1=serial.lag1(logs), ratio_of_means=means,
                       contaminated=stats.contaminated(iv, means),
                       **{f"{baseline}_median": float(np.median([b for b, _ in pairs]))},
                       arm_median=float(np.median([v for _, v in pairs])))
        else:
            row.update(verdict="too_few_runs")
        rows.append(row)
    return adjusted_over_arms(rows, ivs, margin)


def adjusted_over_arms(rows: list[dict], ivs: dict, margin: float) -> list[dict]:
    """The arms compared with the baseline are a family (a program A/B asks "does any name change it?"): their
    verdicts read Benjamini-Hochberg q-values over the arms that have an interval, the A/A calibration arm left
    out (it asks another question); one arm's q is its p, and its verdict is unchanged."""
    family = [r for r in rows if r["arm"] != "aa" and r["arm"] in ivs]
    q = stats.bh_qvalues([r["p_value"] for r in family])
    names = ", ".join(r["arm"] for r in family)
    for r, qv in zip(family, q, strict=True):
        r.update(q_value=qv, verdict=stats.decide(ivs[r["arm"]], margin, qv), multiplicity=f"bh over {names}")
    return rows


def calibration_failed(rows: list[dict]) -> bool:
    """The A/A arm must not come out faster or slower than the baseline it copies."""
    aa = next((r for r in rows if r["arm"] == "aa"), None)
    return aa is None or aa["verdict"] in (*stats.SIGNIFICANT, "too_few_runs")


def write_ab(out: Path, argv: list[str], arms: list[Arm], runs: list[Run], rows: list[dict], meta: dict) -> dict:
    rec = {"command": argv, "python": sys.version.split()[0], "arms": [asdict(a) for a in arms],
           "runs": [asdict(r) for r in runs], "comparisons": rows, "calibration_failed": calibration_failed(rows),
           **meta}
    ProgramAB.of(rec, str(out / AB)).write(out)
    return rec
