"""Tables over the results on kernels nobody here wrote and the Hopper attention: the Hopper attention benchmark,
CuTe DSL kernels timed ahead of time, and whole programs A/B. Pure functions of committed files; every interval is
recomputed from the raw times."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ptxprobe.api import ProgramRun as Run
from ptxprobe.api import compare_program_runs as compare
from ptxprobe.api import stats


def _bench_rows(paths: list[Path]) -> pd.DataFrame:
    rows = []
    for p in paths:
        rec = json.loads(Path(p).read_text())
        for r in rec["bench"]:
            if "tflops" in r:
                rows.append({k: r[k] for k in ("dtype", "head_dim", "causal", "seq_len", "label", "tflops")}
                            | {"file": Path(p).name})
    return pd.DataFrame(rows)


def sota_table(paths: list[Path]) -> pd.DataFrame:
    """Per dtype x D x mask x N: the best Gluon Hopper variant (persistent and classic grid apart) against cuDNN and
    flash SDPA and the better of the two Triton kernels, all timed in the same rounds."""
    b = _bench_rows(paths)
    out = []
    for key, g in b.groupby(["dtype", "head_dim", "causal", "seq_len"]):
        gl = g[g.label.str.startswith("gluon_hopper")]
        best = gl.loc[gl.tflops.idxmax()]
        pers = gl[gl.label.str.endswith("/persistent")].tflops.max()
        cls = gl[gl.label.str.endswith("/classic")].tflops.max()
        get = dict(zip(g.label, g.tflops, strict=True))
        tri = max(get.get("triton/attention", np.nan), get.get("triton/attention_persistent", np.nan))
        out.append(dict(zip(("dtype", "head_dim", "causal", "seq_len"), key, strict=True))
                   | {"best": best.tflops, "best_label": best.label.removeprefix("gluon_hopper/"),
                      "persistent": pers, "classic": cls, "cudnn": get.get("sdpa_cudnn", np.nan),
                      "flash": get.get("sdpa_flash", np.nan), "triton": tri})
    return pd.DataFrame(out)


def sota_goals(t: pd.DataFrame) -> list[tuple[str, bool, str]]:
    """The Hopper attention study's goals, each (goal, met, the numbers that decide it)."""
    def rows(**kw):
        m = np.ones(len(t), bool)
        for k, v in kw.items():
            m &= t[k].isin(v) if isinstance(v, (list, tuple)) else t[k] == v
        return t[m]

    f16 = rows(dtype="fp16", head_dim=128)
    nc = rows(dtype="fp16", head_dim=128, causal=False, seq_len=[4096, 16384])
    ca = f16[f16.causal]
    f8 = rows(dtype="fp8e4nv", head_dim=128, causal=False, seq_len=16384)
    small = f16[f16.seq_len <= 2048]

    def vs(r, other):
        return f"N={r.seq_len // 1024}k {r.best:.0f} vs {getattr(r, other):.0f}"

    return [
        ("fp16 D128 non-causal at or above cuDNN at N = 4k and 16k", bool((nc.best >= nc.cudnn).all()),
         "; ".join(vs(r, "cudnn") for r in nc.itertuples())),
        ("fp16 D128 causal at or above cuDNN", bool((ca.best >= ca.cudnn).all()),
         "; ".join(vs(r, "cudnn") for r in ca.itertuples())),
        ("fp8 at least 1.0 PFLOPS at N = 16k", bool((f8.best >= 1000).all()),
         "; ".join(f"{r.best:.0f} TFLOPS ({'causal' if r.causal else 'non-causal'})"
                   for r in rows(dtype="fp8e4nv", head_dim=128, seq_len=16384).itertuples())),
        ("persistent at or above the classic grid at N <= 2k", bool((small.persistent >= small.classic).all()),
         "; ".join(f"N={r.seq_len // 1024}k {'causal' if r.causal else 'full'} {r.persistent:.0f} vs {r.classic:.0f}"
                   for r in small.itertuples())),
    ]


def with_spec_columns(eff: pd.DataFrame) -> pd.DataFrame:
    """Name effects of registered attention kernels with their dtype, mask and N as columns (from the kernel key
    ``family/dtype/dHEAD/mask/config`` and the problem ``N=...``)."""
    parts = eff.kernel.str.split("/")
    return eff.assign(dtype=parts.str[1], causal=parts.str[3] == "causal",
                      seq_len=eff.problem.str.removeprefix("N=").astype(int))


def checks_summary(paths: list[Path]) -> dict:
    """Correctness against float64: how many checks, how many within tolerance, the worst error per dtype."""
    rows = [c for p in paths for c in json.loads(Path(p).read_text())["checks"]]
    ok = [c for c in rows if c.get("ok")]
    worst = {}
    for c in ok:
        worst[c["dtype"]] = max(worst.get(c["dtype"], 0.0), c["rel_error"])
    return {"checks": len(rows), "ok": len(ok), "failed": [c for c in rows if not c.get("ok")], "worst": worst}


def aot_comparisons(path: Path, seed: int = 0, method: str = "signed-rank", rule: str = "interval",
                    prepared: Path | None = None) -> pd.DataFrame:
    """CuTe DSL ahead-of-time runs: each name against the trigger-free baseline, recomputed from the per-round
    times (paired log ratios, Hodges-Lehmann with its signed-rank interval, the ±0.5 % TOST decision);
    ``method="bca"`` recomputes what runs before the signed-rank default stored. ``rule``: ``"interval"`` (what
    the runs of 2026-12-03 recorded) or ``stats.VERDICT_RULE`` (what ``ptxprobe.api.compare`` says now: the
    signed-rank p-value, Benjamini-Hochberg over a case's two comparisons). ``prepared``: the prepare step's
    manifest, whose per-name machine-code hashes say whether the name changed the code (``same_code``)."""
    rec = json.loads(Path(path).read_text())
    facts = json.loads(Path(prepared).read_text())["cases"] if prepared else None
    out = []
    for case, c in rec["cases"].items():
        t = c["times_ms"]
        logs = {role: stats.log_ratios(t["baseline"], t[role]) for role in ("trigger", "control")}
        q = dict(zip(logs, stats.bh_qvalues([stats.signed_rank_pvalue(x) for x in logs.values()]), strict=True))
        for role, x in logs.items():
            iv = stats.paired_interval(x, seed=seed, method=method)
            verdict = stats.decide(iv, q_value=q[role]) if rule == stats.VERDICT_RULE else stats.decide_by_interval(iv)
            row = {"case": case, "role": role, "rounds": len(x), "ratio": iv.estimate, "low": iv.low,
                   "high": iv.high, "verdict": verdict, "baseline_ms": float(np.median(t["baseline"])),
                   "bitwise": c["bitwise_equal_to_baseline"][role], "rel_error": max(c["rel_error"].values()),
                   "name": rec["manifest"]["cases"][case]["variants"][role]["name"]}
            if facts is not None:
                v = facts[case]["variants"]
                row["same_code"] = v[role]["machine_code_sha256"] == v["baseline"]["machine_code_sha256"]
                row["tflops"] = c["tflops"]["baseline"]
            out.append(row)
    return pd.DataFrame(out)


def program_ab(path: Path) -> pd.DataFrame:
    """A capture --run A/B recomputed from its runs with compare()'s rules (minimum rounds included) and the
    interval its record names (the records before ``ci_method`` used the signed-rank interval)."""
    rec = json.loads(Path(path).read_text())
    runs = [Run(**r) for r in rec["runs"]]
    return pd.DataFrame(compare(runs, method=stats.recorded_method(rec.get("comparisons", []), "signed-rank")))
