"""Analysis of committed GPU runs made with the randomised, graph-timed design (runtime log + calibration.json).

DataFrames in, DataFrames or records out; the README's runtime findings and the notebook's runtime
section are computed here from the committed data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ptxprobe.api import RunDir, problem_label, serial, stats

NAME_COLUMNS = ["group_id", "kernel", "problem", "run_ptxas_version", "name_template", "ratio_vs_baseline",
                "ratio_ci_low", "ratio_ci_high", "runtime_verdict", "q_value", "rounds", "registers",
                "bitwise_equal_to_baseline", "max_ulp_vs_baseline", "rel_err_vs_reference", "numerics_draws"]


def load(run_dir: str | Path) -> pd.DataFrame:
    """The GPU rows with the sweep's q-values, as runtime.parquet holds them (raw samples stay in the log)."""
    df = RunDir(run_dir).runtime_table()
    df["problem"] = [problem_label(r) for r in df.to_dict("records")]
    return df


def calibration(run_dir: str | Path) -> dict:
    return RunDir(run_dir).calibration


# the GPU measurement's goals beyond what a calibration requires (power, A/A false positives: calibrate.CRITERIA)
GOALS = {"aa_halfwidth_median_max": 0.001, "aa_halfwidth_max_max": 0.0025, "gpu_seconds_per_48_groups_max": 180.0}


def goal_figures(run_dir: str | Path) -> dict:
    """A run's figures against the GPU measurement's goals, recomputed from its groups.jsonl: the calibration summary,
    GPU seconds scaled to 48 groups, and each goal met or not."""
    from ptxprobe.api import CRITERIA
    from ptxprobe.api import summarize_calibration as summarize

    c = summarize(RunDir(run_dir).groups)
    per48 = c["gpu_seconds"] / c["groups"] * 48
    met = {
        "aa_halfwidth_median": c["aa_halfwidth_median"] <= GOALS["aa_halfwidth_median_max"],
        "aa_halfwidth_max": c["aa_halfwidth_max"] <= GOALS["aa_halfwidth_max_max"],
        "power_0.5%": c["power"].get("0.005", 0) >= CRITERIA["power_min"]["0.005"],
        "power_1%": c["power"].get("0.01", 0) >= CRITERIA["power_min"]["0.01"],
        "aa_false_positives": c["aa_false_positive_rate"] <= CRITERIA["aa_false_positive_rate_max"],
        "gpu_seconds": per48 <= GOALS["gpu_seconds_per_48_groups_max"],
    }
    return {**c, "gpu_seconds_per_48_groups": round(per48, 1), "goals_met": met}


def pooled_calibration(run_dirs: list[str | Path]) -> dict:
    """Several runs' calibrations counted together (``gpu.calibrate.pooled``): the pooled A/A false-positive rate
    and each plant's power with their Clopper-Pearson one-sided 95 % bounds, and each run's own beside them."""
    from ptxprobe.api import pooled_calibration as pooled

    return pooled([RunDir(d).groups for d in run_dirs])


def groups(run_dir: str | Path) -> pd.DataFrame:
    """One row per group: its A/A comparison and each planted slowdown as measured."""
    rows = []
    for g in RunDir(run_dir).groups:
        aa = g["aa"]
        row = {"group_id": g["group_id"], "aa_ratio": aa["ratio_vs_baseline"], "aa_half_width": aa["half_width"],
               "aa_verdict": aa["runtime_verdict"], "rounds": aa["rounds"], "gpu_seconds": g["gpu_seconds"]}
        for f, p in (g.get("calibration") or {}).get("planted", {}).items():
            row[f"planted_{f}_measured"] = p["measured_fraction"]
            row[f"planted_{f}_detected"] = p["detected"]
        rows.append(row)
    return pd.DataFrame(rows)


def name_effects(df: pd.DataFrame) -> pd.DataFrame:
    """The renamed names' comparisons with the baseline name (names block only), with q-values, each judged by
    today's rule (``stats.current_decision``: faster / slower only beyond the margin) from its stored interval and
    q-value; the verdict the run recorded under its own rule stays in ``recorded_verdict``."""
    n = df[(df.block == "names") & df.name_template.notna() & ~df.is_baseline.astype(bool)]
    n = n[[c for c in [*NAME_COLUMNS, "margin", "ci_level"] if c in n.columns]].reset_index(drop=True)
    n["recorded_verdict"] = n.runtime_verdict
    n["runtime_verdict"] = [judged_now(r) for r in n.to_dict("records")]
    return n


def judged_now(row: dict) -> str:
    """A timed comparison's verdict under today's rule; untimed rows (identical code) keep theirs."""
    if any(pd.isna(row.get(k)) for k in ("ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high")):
        return row["runtime_verdict"]
    q, level, margin = (_number(row.get(k)) for k in ("q_value", "ci_level", "margin"))
    return stats.current_decision({**row, "q_value": q, "ci_level": level or 0.95}, margin or stats.EQUIVALENCE_MARGIN)


def _number(value) -> float | None:
    """A table cell as a number, None where it is empty (a row that never had the column: NaN, or None)."""
    return None if pd.isna(value) else float(value)


def verdict_counts(effects: pd.DataFrame) -> pd.DataFrame:
    """Verdicts per (template, ptxas): how often a name is faster, slower, across the margin, negligible, equivalent
    or inconclusive, or has the baseline's machine code."""
    t = effects.groupby(["name_template", "run_ptxas_version"]).runtime_verdict.value_counts().unstack(fill_value=0)
    kinds = ["faster", "slower", stats.STRADDLES_MARGIN, stats.NEGLIGIBLE, "equivalent", "inconclusive",
             stats.IDENTICAL_CODE]
    for v in kinds:
        if v not in t.columns:
            t[v] = 0
    return t[kinds]


def effect_ranges(effects: pd.DataFrame, template: str = "cutlass_{base}", q_max: float = 0.05) -> pd.DataFrame:
    """Per (kernel family and dtype, causal, ptxas): the ratio range of the groups significant after BH."""
    e = effects[(effects.name_template == template)].copy()
    e["family"] = e.kernel.map(lambda k: "/".join(k.split("/")[:2]) if "/" in k else k)
    e["causal"] = e.kernel.str.contains("/causal/")
    e["significant"] = e.q_value <= q_max
    return (e.groupby(["family", "causal", "run_ptxas_version"])
            .agg(groups=("ratio_vs_baseline", "size"), significant=("significant", "sum"),
                 ratio_min=("ratio_vs_baseline", "min"), ratio_max=("ratio_vs_baseline", "max"),
                 faster=("runtime_verdict", lambda v: int((v == "faster").sum())),
                 slower=("runtime_verdict", lambda v: int((v == "slower").sum())),
                 identical_code=("runtime_verdict", lambda v: int((v == stats.IDENTICAL_CODE).sum())))
            .reset_index())


def numerics_summary(effects: pd.DataFrame) -> dict:
    return {"rows": int(len(effects)), "bitwise_equal": int(effects.bitwise_equal_to_baseline.astype(bool).sum()),
            "draws": int(effects.numerics_draws.min()) if "numerics_draws" in effects else None,
            "max_ulp": int(effects.max_ulp_vs_baseline.max())}


def throttling(run_dir: str | Path) -> pd.DataFrame:
    """Per kernel family and mask: the share of samples NVML flagged as throttled, the median SM clock during
    the samples, and the median A/A half-width: how the card's power management relates to the noise."""
    rd = RunDir(run_dir)
    recs = rd.runtime_log
    aa = {g["group_id"]: g["aa"]["half_width"] for g in rd.groups}
    rows = []
    for r in recs:
        if r.get("block") != "names" or not r.get("is_baseline"):
            continue
        s = r["samples"]
        clocks = sorted(c for c in s["sm_clock_mhz"] if c)
        parts = r["kernel"].split("/")
        rows.append({"family": "/".join(parts[:2]), "causal": "causal" in parts, "throttled": float(pd.Series(
            s["throttled"]).mean()), "sm_clock_mhz": clocks[len(clocks) // 2] if clocks else None,
            "aa_half_width": aa.get(r["group_id"])})
    df = pd.DataFrame(rows)
    return (df.groupby(["family", "causal"]).agg(groups=("throttled", "size"), throttled=("throttled", "mean"),
                                                 sm_clock_mhz=("sm_clock_mhz", "median"),
                                                 aa_half_width=("aa_half_width", "median")).reset_index())


def compared_series(base: dict, row: dict) -> tuple[list, list]:
    """The two series of stored rows (baseline, other) their comparison paired (see ``stats.pair_series``)."""
    from ptxprobe.api import stats

    b, r = base["samples"], row["samples"]
    return stats.pair_series(base["label"], b["times_ms"], b.get("partners"), row["label"], r["times_ms"],
                             r.get("partners"))


def resequenced(run_dir: str | Path, min_rounds: int = 20, batch: int = 10,
                margin: float = stats.EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """The name comparisons recomputed from the raw per-round times at the sequential (look-adjusted) level:
    what the committed plain-95 % verdicts become under the rule the runs now use."""
    from ptxprobe.api import stats

    recs = RunDir(run_dir).runtime_log
    base = {r["group_id"]: r for r in recs if r.get("block") == "names" and r.get("is_baseline")}
    rows = []
    for r in recs:
        if r.get("block") != "names" or not r.get("name_template") or r.get("is_baseline"):
            continue
        logs = stats.log_ratios(*compared_series(base[r["group_id"]], r))
        level = stats.sequential_level(len(logs), min_rounds, batch)
        iv = stats.paired_interval(logs, level=level, n_boot=2000, seed=0, method="bca")  # as those runs
        rows.append({"group_id": r["group_id"], "name_template": r["name_template"], "level": level,
                     "verdict_plain": r["runtime_verdict"], "verdict_sequential": stats.decide_by_interval(iv, margin)})
    return pd.DataFrame(rows)


def _names_blocks(run_dir: str | Path) -> dict[str, dict[str, dict]]:
    """Every group's names-block rows (names, baseline, A/A copies) by label."""
    by: dict[str, dict] = {}
    for r in RunDir(run_dir).runtime_log:
        if r.get("block", "names") == "names":
            by.setdefault(r["group_id"], {})[r["label"]] = r
    return by


def block_pairs(rec: dict, templates: list[str]) -> list[tuple[str, str]]:
    """The names block's compared pairs of a group record: as recorded (``compared``: names, A/A and the plants
    timed in the block), else as the earlier runs drew them (names and A/A; their plants had a block of their own)."""
    from ptxprobe.api import names_compared

    if "compared" in rec:
        return [tuple(p) for p in rec["compared"]]
    return names_compared(templates, rec.get("identical_code", []))


def planted_rows(rec: dict) -> dict[str, dict]:
    """The plants a group timed in its names block, as rows ``compared_series`` reads (label and samples)."""
    if not (rec.get("calibration") or {}).get("in_names_block"):
        return {}
    return {label: {"label": label, "samples": s} for label, s in (rec.get("calibration_samples") or {}).items()}


def stopping_replay(run_dir: str | Path, stopping: str | None = None) -> pd.DataFrame:
    """Each group's names block replayed look by look from its recorded rounds through the timing's own stopping
    rule (``look_stops``) and the run's recorded plan: where the rule stops each comparison (and why) against the
    rounds each was timed for. A block's row: its longest comparison, why that one stopped, how many comparisons
    stopped where they were recorded to, each comparison's replayed rounds. ``stopping`` replays the block under
    another rule than it ran (a comparison the rule would have timed longer than it was reads as not stopped)."""
    from dataclasses import replace

    from ptxprobe.api import TimingPlan, look_halfwidths, look_rounds, look_stops, run_config

    rd = RunDir(run_dir)
    stated = run_config(rd.manifest["experiment"].get("run")).timing
    records = {g["group_id"]: g for g in rd.groups}
    rows = []
    for gid, labels in sorted(_names_blocks(run_dir).items()):
        rec = records.get(gid, {})
        base = next(label for label, r in labels.items() if r.get("is_baseline"))
        templates = [base, *(label for label, r in labels.items() if r.get("name_template") and label != base)]
        pairs = block_pairs(rec, templates)
        series = {**labels, **planted_rows(rec)}
        logs = [stats.log_ratios(*compared_series(series[a], series[b])) for a, b in pairs]
        # the plan the group recorded; older runs' groups did not: the experiment's keys over TimingPlan's defaults,
        # with the interval their rows name (defaults change; ``ci_method`` absent meaning BCa), every pair timed
        # until all could stop
        plan = TimingPlan(**rec["timing_plan"]) if "timing_plan" in rec else replace(
            stated, interval=stats.recorded_method(labels.values(), "bca"), stopping="together")
        plan = replace(plan, stopping=stopping or plan.stopping)
        recorded = [len(x) for x in logs]
        stops: list[int | None] = [None] * len(logs)
        why = ["not stopped"] * len(logs)
        timed, widths, first = list(range(len(logs))), [], None
        for done in look_rounds(plan):
            timed = [i for i in timed if done <= recorded[i]]  # a replay past a comparison's rounds cannot judge it
            if not timed:
                break
            widths = look_halfwidths([logs[i][:done] for i in timed], done, plan, rec.get("order_seed", 0))
            first = max(widths) if first is None and widths else first
            for i, reason in zip(timed, look_stops(done, widths or [math.inf] * len(timed), plan), strict=True):
                if reason is not None:
                    stops[i], why[i] = done, reason
            timed = [i for i in timed if stops[i] is None]
        last = max(range(len(logs)), key=lambda i: (stops[i] or 0, recorded[i]))
        rows.append({"group_id": gid, "pairs": len(pairs), "rounds_recorded": max(recorded),
                     "rounds_replayed": None if None in stops else max(stops), "stopped_by": why[last],
                     "comparisons_as_recorded": sum(s == n for s, n in zip(stops, recorded, strict=True)),
                     "comparison_rounds": stops,
                     "first_look_max_half_width": first, "max_half_width": max(widths) if widths else None,
                     "overflow_rounds_used": max(0, max(recorded) - plan.max_rounds), "stopping": plan.stopping,
                     "plan_source": "recorded" if "timing_plan" in rec else "experiment and TimingPlan defaults"})
    return pd.DataFrame(rows)


def pair_rounds(replay: pd.DataFrame) -> int:
    """The pair-rounds (one round of one compared pair) a ``stopping_replay`` table's rule times: each comparison's
    replayed rounds, summed (under ``together`` every comparison of a block stops at the block's round)."""
    if replay.comparison_rounds.map(lambda r: None in r).any():
        raise ValueError("a comparison's replay needs rounds the run did not record")
    return int(sum(sum(r) for r in replay.comparison_rounds))


def stopping_saving(run_dir: str | Path, together: pd.DataFrame | None = None) -> dict:
    """A run timed with every pair until all could stop, replayed with each comparison stopping on its own: the
    pair-rounds each rule times, from the recorded rounds (``together``: its replay under that rule, if made)."""
    together = stopping_replay(run_dir, "together") if together is None else together
    return {"together": pair_rounds(together), "each": pair_rounds(stopping_replay(run_dir, "each")),
            "blocks": len(together)}


def pair_rounds_by_kind(run_dir: str | Path, replay: pd.DataFrame | None = None) -> dict[str, int]:
    """The pair-rounds a run's names blocks timed, by what each comparison is: a name, the A/A pair or a plant
    (``replay``: the run's ``stopping_replay``, if made)."""
    compared = {g["group_id"]: [tuple(p) for p in g["compared"]] for g in RunDir(run_dir).groups}
    kinds = {"name": 0, "aa": 0, "plant": 0}
    for _, row in (stopping_replay(run_dir) if replay is None else replay).iterrows():
        for (_, b), rounds in zip(compared[row.group_id], row.comparison_rounds, strict=True):
            kinds["aa" if "#AA" in b else "plant" if "#planted" in b else "name"] += rounds
    return kinds


def _aa_pairs(run_dir: str | Path):
    """(group id, AA1 row, AA2 row) of every group of a run that timed two A/A copies."""
    return [(g, labels["{base}#AA1"], labels["{base}#AA2"]) for g, labels in sorted(_names_blocks(run_dir).items())
            if "{base}#AA1" in labels and "{base}#AA2" in labels]


def aa_halfwidth_by_interval(run_dir: str | Path, min_rounds: int = 20, batch: int = 10) -> pd.DataFrame:
    """Each group's A/A half-width recomputed from its raw rounds with both interval methods at the level the
    run's looks left: how much of a change between runs is the interval's and how much the card's."""
    from ptxprobe.api import stats

    rows = []
    for gid, aa1, aa2 in _aa_pairs(run_dir):
        logs = stats.log_ratios(*compared_series(aa1, aa2))
        level = stats.sequential_level(len(logs), min_rounds, batch)
        row = {"group_id": gid, "rounds": len(logs), "level": level}
        for method in stats.INTERVAL_METHODS:
            row[f"half_width_{method}"] = stats.half_width(stats.paired_interval(logs, level=level, method=method))
        rows.append(row)
    return pd.DataFrame(rows)


def aa_spread_by_distance(run_dir: str | Path, dtype: str | None = "fp16") -> pd.DataFrame:
    """How far apart in a round the two A/A samples were, against their log ratio's spread (median |x - median|)."""
    import numpy as np

    acc: dict[int, list[float]] = {}
    for gid, a, b in _aa_pairs(run_dir):
        if dtype and f"/{dtype}/" not in gid:
            continue
        sa, sb = a["samples"], b["samples"]
        n = min(len(sa["times_ms"]), len(sb["times_ms"]))
        lr = np.log(np.array(sb["times_ms"][:n]) / np.array(sa["times_ms"][:n]))
        lr -= np.median(lr)
        for d, x in zip(np.abs(np.array(sa["positions"][:n]) - np.array(sb["positions"][:n])), lr, strict=True):
            acc.setdefault(int(d), []).append(float(x))
    return pd.DataFrame([{"distance": d, "pairs": len(v), "mad": float(np.median(np.abs(v)))}
                         for d, v in sorted(acc.items())])


def aa_clock_normalised(run_dir: str | Path) -> pd.DataFrame:
    """Per group, the A/A 95 % half-width of the raw times and of times x the SM clock NVML read with each sample."""
    import numpy as np

    from ptxprobe.api import stats

    rows = []
    for gid, a, b in _aa_pairs(run_dir):
        ta, tb = (np.array(x["samples"]["times_ms"]) for x in (a, b))
        ca, cb = (np.array(x["samples"]["sm_clock_mhz"], float) for x in (a, b))
        n = min(len(ta), len(tb))
        widths = [stats.half_width(stats.paired_interval(list(logs), level=0.95, n_boot=2000, seed=1, method="bca"))
                  for logs in (np.log(tb[:n] / ta[:n]), np.log(tb[:n] * cb[:n] / (ta[:n] * ca[:n])))]
        rows.append({"group_id": gid, "rounds": n, "raw": widths[0], "clock_normalised": widths[1]})
    return pd.DataFrame(rows)


def window_log_ratios(launch_ms, per_label: int, unit: int | None):
    """From one continuous series of launches of identical code, the A/A log ratios a design would see.

    Consecutive windows of ``2 * per_label`` launches each give one ratio. ``unit=None``: the first half
    against the second (two whole samples back to back); ``unit=u``: blocks of ``u`` launches assigned
    A B B A in turn (the interleaved design). Identical code, so any spread is the card's.
    """
    import numpy as np

    x = np.asarray(launch_ms, dtype=float)
    w = 2 * per_label
    n = len(x) // w
    win = x[: n * w].reshape(n, w)
    if unit is None:
        who = np.repeat([0, 1], per_label)
    else:
        blocks = -(-w // unit)
        who = np.repeat(np.array([0, 1, 1, 0] * (-(-blocks // 4)))[:blocks], unit)[:w]
    a, b = (win[:, who == i].sum(axis=1) / np.count_nonzero(who == i) for i in (0, 1))
    return np.log(a / b)


def trace_design_spread(trace: pd.DataFrame, sample_ms: float = 10.0, units_ms=(None, 4.0, 1.0, 0.0)) -> pd.DataFrame:
    """Per traced group, the SD of A/A log ratios per design: whole samples back to back (``None``) or interleaved
    units of about ``u`` ms (0: one launch), each label running about ``sample_ms`` per sample."""
    import numpy as np

    rows = []
    for gid, g in trace.groupby("group", sort=False):
        ms = g.sort_values("index").ms.to_numpy()
        launch = float(np.median(ms))
        per_label = max(1, int(round(sample_ms / launch)))
        seen = set()
        for u in units_ms:
            unit = None if u is None else max(1, int(round(u / launch)))
            if unit in seen or (unit is not None and unit >= per_label):
                continue  # the same design again (a unit as long as the sample is back to back)
            seen.add(unit)
            lr = window_log_ratios(ms, per_label, unit)
            rows.append({"group": gid, "launch_ms": launch, "per_label": per_label,
                         "design": "back to back" if unit is None else f"interleaved {unit} launch(es)",
                         "unit_launches": unit, "samples": len(lr), "sd_log_ratio": float(np.std(lr, ddof=1))})
    return pd.DataFrame(rows)


def first_in_replay(run_dir: str | Path) -> pd.DataFrame:
    """Per group, the A/A pair's log ratio (copy 1 over copy 2) in the rounds where copy 1 ran first in the graph
    replay and in those where copy 2 did; half their difference is the penalty of running first.

    Who ran first is recovered from the group's recorded ``order_seed`` through the same ``order_batches`` the
    timing used; ``consistent`` says the recovered orders reproduce every recorded position and predecessor of
    the A/A copies (None where the A/A pair was the only pair: nothing to check; runs from before per-group
    seeds and balanced orders have no ``order_seed``: no rows).
    """
    import numpy as np

    from ptxprobe.api import AA_LABELS, experiment_from_dict, order_batches, recorded_axes, run_config

    d = RunDir(run_dir)
    exp = experiment_from_dict(recorded_axes(d.manifest))
    plan = run_config(exp.run).timing
    templates = list(exp.names)
    blocks = _names_blocks(d.path)
    out = []
    for g in d.groups:
        if "order_seed" not in g:
            continue
        compare = block_pairs(g, templates)
        a, b = (blocks[g["group_id"]][label]["samples"] for label in AA_LABELS)
        n = len(a["partners"][AA_LABELS[1]])
        orders = [o for batch in order_batches(plan, [], compare, g["order_seed"]) for o in batch][:n]
        firsts, expected_pos, expected_prev = [], [], []
        for order in orders:
            prev = None
            for pos, unit in enumerate(order):
                if set(unit) == set(AA_LABELS):
                    firsts.append(unit[0] == AA_LABELS[0])
                    expected_pos.append(pos)
                    expected_prev.append(prev)
                prev = unit[0]
        logs = np.log(np.array(a["partners"][AA_LABELS[1]]) / np.array(b["partners"][AA_LABELS[0]]))
        first = np.array(firsts)
        out.append({"group_id": g["group_id"], "rounds": n, "aa1_first": int(first.sum()),
                    "log_ratio_aa1_first": float(logs[first].mean()), "log_ratio_aa2_first": float(logs[~first].mean()),
                    "first_penalty": float((logs[first].mean() - logs[~first].mean()) / 2),
                    # one compared pair: every position is 0 with no predecessor, so nothing can be checked
                    "consistent": None if len(compare) < 2 else
                    a["positions"] == expected_pos and a["predecessors"] == expected_prev})
    return pd.DataFrame(out)


SW_POWER_CAP = 0x4  # nvidia-smi's clocks_event_reasons bit: the clocks lowered to stay under the power limit


def burst_gains(path: Path, seed: int = 0) -> pd.DataFrame:
    """experiments/gpu/burst_length.py's run: per burst length, the trigger-free name against the ``cutlass_`` one
    (paired per round: log(cutlass ms / trigger-free ms), Hodges-Lehmann with its signed-rank interval; ratio > 1:
    the trigger-free name is faster), and per name the median SM clock, power and the share of bursts during
    which the power cap held the clocks down."""
    rec = json.loads(Path(path).read_text())
    s = pd.DataFrame(rec["samples"])
    out = []
    for n in rec["bursts"]:
        b = s[s.burst == n].pivot_table(index="round", columns="role", values="ms")
        iv = stats.paired_interval(stats.log_ratios(b["cutlass"], b["trigger_free"]), seed=seed)
        row = {"burst": n, "rounds": len(b), "seconds": float(b.mean().mean()) * n / 1000, "ratio": iv.estimate,
               "low": iv.low, "high": iv.high}
        for role in ("trigger_free", "cutlass"):
            r = s[(s.burst == n) & (s.role == role)]
            row[f"{role}_ms"] = float(r.ms.median())
            row[f"{role}_mhz"] = float(r.sm_mhz.median())
            row[f"{role}_w"] = float(r.power_w.median())
            capped = r.reasons_any.dropna().map(lambda x: bool(int(x, 16) & SW_POWER_CAP))
            row[f"{role}_capped"] = float(capped.mean()) if len(capped) else float("nan")
        out.append(row)
    return pd.DataFrame(out)


def name_series(runs: tuple[str, ...]) -> list[dict]:
    """Every timed name comparison's per-round log ratios (baseline over the renamed name) in these committed runs,
    with its place and lag-1 autocorrelation (what the serial-correlation and stopping analyses resample)."""
    results = Path(__file__).resolve().parents[1] / "results"
    out = []
    for run in runs:
        for group, rows in _names_blocks(results / run).items():
            base = next((r for r in rows.values() if r.get("is_baseline")), None)
            for label, r in rows.items():
                if base is None or r is base or not r.get("name_template") or not r.get("samples", {}).get("times_ms"):
                    continue
                x = stats.log_ratios(*compared_series(base, r))
                out.append({"run": run, "group": group, "label": label, "logs": x, "lag1": serial.lag1(x)})
    return out
