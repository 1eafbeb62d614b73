"""Analysis of committed results: tables the notebook plots and the tests check.

Every function takes DataFrames and returns DataFrames (or plain records); nothing here
prints or formats prose, so conclusions in the notebook are computed from what is shown.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import RESULTS
from experiments.analysis import superseded
from ptxprobe.api import DIFFERS, MANIFEST, Interval, RunDir, problem_label, version_key


def results_dir(name: str) -> Path:
    """A committed run directory by name (e.g. ``2026-12-02-cpu-ptxas-matrix``)."""
    p = RESULTS / name
    if not p.is_dir():
        have = ", ".join(sorted(x.name for x in RESULTS.iterdir()))
        raise FileNotFoundError(f"no committed results {name!r} (have: {have})")
    return p


def load_static(run_dir: str | Path) -> pd.DataFrame:
    """Static rows with verdicts (derived from the variant log; a capture's from its sweep; see
    ``ptxprobe.runs.rundir``)."""
    return RunDir(run_dir).static_part().static_table()


def load_runtime(run_dir: str | Path) -> pd.DataFrame:
    """Runtime rows with their raw per-round times."""
    return pd.DataFrame(RunDir(run_dir).runtime_log)


def load_manifest(run_dir: str | Path) -> dict:
    return RunDir(run_dir).json(MANIFEST)


def renamed(static: pd.DataFrame) -> pd.DataFrame:
    """One row per renamed (non-baseline) variant: its repeat-0 row, which carries the group's verdict."""
    return static[~static.is_baseline & (static.repeat == 0)].copy()


def change_matrix(static: pd.DataFrame, template: str = "cutlass_{base}") -> pd.DataFrame:
    """Share of kernels whose code a name template changes beyond noise, per arch x ptxas version."""
    r = renamed(static)
    r = r[r.name_template == template]
    r["changed"] = r.verdict.isin(DIFFERS)
    return r.pivot_table(index="arch", columns="ptxas_version", values="changed", aggfunc="mean")


def register_deltas(static: pd.DataFrame) -> pd.DataFrame:
    r = renamed(static)
    r["register_delta"] = r.registers - r.baseline_registers
    r["capmerc_ratio"] = r.capmerc_bytes / r.baseline_capmerc_bytes.where(r.baseline_capmerc_bytes > 0)
    r["spill_bytes"] = r.spill_store_bytes.fillna(0) + r.spill_load_bytes.fillna(0)
    cols = [
        "kernel",
        "dtype",
        "causal",
        "arch",
        "ptxas_version",
        "ptxas_flags",
        "name_template",
        "verdict",
        "baseline_registers",
        "registers",
        "register_delta",
        "baseline_capmerc_bytes",
        "capmerc_bytes",
        "capmerc_ratio",
        "spill_bytes",
        "distinct_outputs",
        "baseline_distinct_outputs",
    ]
    return r[[c for c in cols if c in r.columns]]


def determinism(static: pd.DataFrame) -> pd.DataFrame:
    """Per arch and ptxas: how many kernels gave more than one distinct output for the same PTX."""
    g = static[static.is_baseline].groupby(["arch", "ptxas_version", "kernel"]).code_sha256.nunique()
    d = g.reset_index(name="distinct")
    return (
        d.groupby(["arch", "ptxas_version"])
        .agg(
            kernels=("kernel", "count"),
            nondeterministic=("distinct", lambda x: int((x > 1).sum())),
            max_distinct=("distinct", "max"),
        )
        .reset_index()
    )


def runtime_effects(runtime: pd.DataFrame) -> pd.DataFrame:
    """Named variants only: throughput ratio vs the baseline name with its CI and both verdicts."""
    r = runtime[runtime.name_template.notna() & ~runtime.is_baseline.astype(bool)].copy()
    if "run_ptxas_version" not in r.columns:
        r["run_ptxas_version"] = r.get("ptxas_version")
    cols = [
        "kernel",
        "family",
        "dtype",
        "causal",
        "seq_len",
        "sizes",
        "run_ptxas_version",
        "name_template",
        "registers",
        "ratio_vs_baseline",
        "ratio_ci_low",
        "ratio_ci_high",
        "runtime_verdict",
        "runtime_verdict_vs_floor",
        "noise_floor",
        "bitwise_equal_to_baseline",
        "max_ulp_vs_baseline",
        "rel_err_vs_reference",
    ]
    return r[[c for c in cols if c in r.columns]].reset_index(drop=True)


def recompute(runtime: pd.DataFrame, group_id: str, label: str, n_boot: int = 4000, seed: int = 0) -> Interval:
    """The ratio vs baseline of one row, recomputed from the raw times (checks the stored numbers)."""
    g = runtime[runtime.group_id == group_id]
    base = g[g.is_baseline.astype(bool)].iloc[0]
    row = g[g.label == label].iloc[0]
    return superseded.paired_ratio(base.times_ms, row.times_ms, n_boot=n_boot, seed=seed)


def aa_summary(runtime: pd.DataFrame) -> dict:
    aa = runtime[runtime.label.str.endswith("#AA")]
    half = (aa.ratio_ci_high - aa.ratio_ci_low) / 2
    return {
        "groups": len(aa),
        "median_halfwidth": float(half.median()),
        "p90_halfwidth": float(half.quantile(0.9)),
        "raw_false_positives": int((aa.runtime_verdict != superseded.NO_DIFFERENCE).sum()),
        "floor_false_positives": int((aa.runtime_verdict_vs_floor != superseded.NO_DIFFERENCE).sum())
        if "runtime_verdict_vs_floor" in aa
        else None,
    }


def versus_sdpa(runtime: pd.DataFrame) -> pd.DataFrame:
    """Our baseline kernels' TFLOPS beside torch SDPA (cuDNN, flash) in the same groups."""
    keep = runtime[runtime.is_baseline.astype(bool) | runtime.label.str.startswith("sdpa")]
    if "run_ptxas_version" in keep.columns:
        keep = keep[keep.run_ptxas_version == keep.run_ptxas_version.max()]
    return keep.pivot_table(
        index=["family", "dtype", "head_dim", "causal", "seq_len"], columns="label", values="tflops"
    )


def floor_verdicts(runtime: pd.DataFrame, ptxas_version: str | None = None) -> dict:
    """(kernel, problem label, name template) -> verdict vs the A/A floor, recomputed from raw times."""
    r = runtime
    if ptxas_version is not None and "run_ptxas_version" in r.columns:
        r = r[r.run_ptxas_version.fillna(ptxas_version) == ptxas_version]
    out = {}
    for _, g in r.groupby("group_id"):
        base = g[g.is_baseline.astype(bool)].iloc[0]
        aa = g[g.label.str.endswith("#AA")].iloc[0]
        floor = superseded.noise_floor(superseded.paired_ratio(base.times_ms, aa.times_ms))
        for _, row in g[g.name_template.notna() & ~g.is_baseline.astype(bool)].iterrows():
            iv = superseded.paired_ratio(base.times_ms, row.times_ms)
            out[(row.kernel, problem_label(row), row.name_template)] = superseded.runtime_verdict(iv, floor)
    return out


def verdict_agreement(run_a: pd.DataFrame, run_b: pd.DataFrame, ptxas_version: str) -> dict:
    """Do two independent GPU runs reach the same verdicts for the variants they share?"""
    a, b = floor_verdicts(run_a, ptxas_version), floor_verdicts(run_b, ptxas_version)
    common = sorted(set(a) & set(b))
    return {
        "shared": len(common),
        "agree": sum(a[k] == b[k] for k in common),
        "disagreements": [(k, a[k], b[k]) for k in common if a[k] != b[k]],
    }


def name_triggers(static: pd.DataFrame) -> pd.DataFrame:
    """Share of kernels each name template changes beyond noise, per arch (which spellings trigger?)."""
    r = renamed(static)
    r["changed"] = r.verdict.isin(DIFFERS)
    order = list(dict.fromkeys(static.name_template))
    t = r.pivot_table(index="name_template", columns="arch", values="changed", aggfunc="mean")
    return t.reindex([n for n in order if n in t.index])


def predicted_by_strstr(template: str, needle: str = "cutlass") -> bool:
    """What a case-sensitive substring test on the name would say (the check ptxas-scan finds)."""
    return needle in template.replace("{base}", "")


def release_segments(static: pd.DataFrame, template: str = "cutlass_{base}") -> pd.DataFrame:
    """Per kernel and arch, the ptxas releases (in order) as runs of one outcome for ``template``: where the
    name's effect appears, changes (another register delta) and disappears. Failed assemblies are their own
    outcome ("ptxas cannot build it")."""
    r = static[(static.name_template == template) & (static.repeat == 0)].copy()
    rows = []
    for (kernel, arch), g in r.groupby(["kernel", "arch"]):
        g = g.assign(_v=g.ptxas_version.map(version_key)).sort_values("_v")
        runs: list[dict] = []
        for row in g.itertuples():
            if row.status != "ok":
                outcome = "ptxas cannot build it"
            elif row.verdict in DIFFERS:
                d = (row.registers - row.baseline_registers
                     if row.registers == row.registers and row.baseline_registers == row.baseline_registers else None)
                outcome = "differs" + (f" ({int(d):+d} regs)" if d else "")
            else:
                outcome = row.verdict
            if runs and runs[-1]["outcome"] == outcome:
                runs[-1]["last"] = row.ptxas_version
                runs[-1]["releases"] += 1
            else:
                runs.append({"outcome": outcome, "first": row.ptxas_version, "last": row.ptxas_version, "releases": 1})
        rows.append({"kernel": kernel, "arch": arch, "releases": len(g),
                     "segments": "; ".join(f"{s['first']}–{s['last']}: {s['outcome']}" if s["first"] != s["last"]
                                           else f"{s['first']}: {s['outcome']}" for s in runs)})
    return pd.DataFrame(rows)
