"""README findings of round 4 (issues 15 and 16): the interleaved timing design on the H200, and the program
A/B runs. Imported by readme_findings.py; every number comes from a committed result."""

from __future__ import annotations

import json

import pandas as pd
from findings_common import calibration_line

from ptxprobe import analysis, analysis_external, analysis_gpu

PROBE = "2026-12-03-h200-interleave-probe"
INTERLEAVED, INTERLEAVED_USER = "2026-12-03-h200-interleaved", "2026-12-03-h200-interleaved-user"
FAST = "2026-12-03-h200-interleaved-fast"
PAIRS = "2026-12-02-h200-design-pairs"
TUTORIAL_AB = "2026-12-03-h200-capture-tutorial-8rounds"
INDUCTOR = "2026-12-03-h200-capture-inductor"


def _d(name: str):
    return analysis.results_dir(name)


def probe_section() -> list[str]:
    rec = json.loads((_d(PROBE) / "designs.json").read_text())
    out = [f"**Interleaving inside the sample** (issue 15; `{PROBE}`, `benchmarks/interleave_probe.py`): one A/A "
           "pair (the baseline's cubin loaded twice) timed 20 rounds by each design through the sweep's own "
           "`time_block`; SD of the per-round log ratios and the 95 % half-width:", "",
           "| group | launch | back-to-back 10 ms samples | interleaved A B B A, 1 ms units | 0.25 ms units |",
           "|---|---|---|---|---|"]
    for gid, g in rec.items():
        d = g["designs"]
        cells = [f"SD {d[k]['sd_log_ratio'] * 100:.3f} %, ± {d[k]['half_width'] * 100:.3f} %"
                 for k in ("pairs_10ms", "interleaved_1ms", "interleaved_0.25ms")]
        out.append(f"| {gid} | {g['launch_ms']:.2f} ms | " + " | ".join(cells) + " |")
    t = analysis_gpu.trace_design_spread(pd.read_parquet(_d(PROBE) / "trace.parquet"))
    out += ["", "From the launch-by-launch trace of the same pairs (identical code, so every difference is the "
            "card's), the SD of A/A log ratios a design would see: "
            + "; ".join(f"{gid}: " + ", ".join(f"{r.design} {r.sd_log_ratio * 100:.3f} %" for r in g.itertuples())
                        for gid, g in t.groupby("group", sort=False)) + ".", ""]
    return out


def _figures(run: str) -> dict:
    c = analysis_gpu.calibration(_d(run))
    return {**c, "per48": c["gpu_seconds"] / c["groups"] * 48}


def design_section() -> list[str]:
    rows = [("paired (10 ms samples back to back)", PAIRS), ("interleaved, Triton attention", INTERLEAVED),
            ("interleaved, CUDA C++ attention and sgemm", INTERLEAVED_USER)]
    if (analysis.RESULTS / FAST).is_dir():
        rows.append(("interleaved, Triton attention, today's defaults (identical code not timed, one plant per "
                     "group)", FAST))
    out = ["**The interleaved design against issue 15's goals** (each compared pair one CUDA graph of A B B A "
           "units of ≥ 1 ms, timing events recorded inside the graph, ≥ 10 ms per label per sample; warm back to "
           "back L2; the first three runs every name and all three plants in every group with 0.2 s warm-up per "
           "label, the last the defaults: 0.1 s per label and 1 s for the card once, SDPA 10 rounds):", "",
           "| run | groups | A/A half-width median (goal ≤ 0.1 %) | max (≤ 0.25 %) | A/A false positives (≤ 5 %) | "
           "planted 0.5 % found (≥ 95 %) | 1 % (all) | GPU s per 48 groups (≤ 180) |",
           "|---|---|---|---|---|---|---|---|"]
    for title, run in rows:
        f = _figures(run)
        out.append(f"| {title} (`{run}`) | {f['groups']} | {f['aa_halfwidth_median'] * 100:.3f} % | "
                   f"{f['aa_halfwidth_max'] * 100:.3f} % | {f['aa_false_positive_rate']:.1%} | "
                   f"{f['power']['0.005']:.0%} | {f['power']['0.01']:.0%} | {f['per48']:.0f} |")
    for run in [r for _, r in rows[1:]]:
        out += ["", f"`{run}`: {calibration_line(run)}."]
    if (analysis.RESULTS / FAST).is_dir():
        fast = analysis_gpu.name_effects(analysis_gpu.load(_d(FAST)))
        same = fast[fast.runtime_verdict == "identical-code"]
        out += ["", f"`{FAST}`: {len(same)} of {len(fast)} name comparisons had the baseline's machine code and "
                "were not timed (the group's A/A pair measures what timing them would)."]
    eff = analysis_gpu.name_effects(analysis_gpu.load(_d(INTERLEAVED)))
    out += ["", f"`cutlass_` against the baseline name in `{INTERLEAVED}` (significant = q ≤ 0.05, BH over the "
            "sweep):", "", "| kernel | dtype | causal | ptxas | groups | significant | faster | slower | ratio range |",
            "|---|---|---|---|---|---|---|---|---|"]
    cut = eff[eff.name_template == "cutlass_{base}"].copy()
    cut["dtype"] = cut.kernel.str.split("/").str[1]
    for (fam, dtype, causal, pt), g in cut.groupby([cut.kernel.str.split("/").str[0], "dtype",
                                                    cut.kernel.str.contains("/causal/"), "run_ptxas_version"]):
        sig = g[g.q_value <= 0.05]
        out.append(f"| {fam} | {dtype} | {'yes' if causal else 'no'} | {pt} | {len(g)} | {len(sig)} | "
                   f"{int((sig.runtime_verdict == 'faster').sum())} | {int((sig.runtime_verdict == 'slower').sum())} | "
                   f"{(g.ratio_vs_baseline.min() - 1) * 100:+.2f} … {(g.ratio_vs_baseline.max() - 1) * 100:+.2f} % |")
    return [*out, ""]


def programs_section() -> list[str]:
    ab = analysis_external.program_ab(_d(TUTORIAL_AB) / "ab" / "ab.json")
    cap = json.loads((_d(INDUCTOR) / "captured.json").read_text())
    static = analysis.renamed(analysis.load_static(_d(INDUCTOR) / "sweep"))
    changed = f" ({int(static.verdict.isin(analysis.DIFFERS).sum())} of {len(static)} renamed cells differ)"
    import re

    done = re.findall(r"round (\d+)/(\d+):", (_d(INDUCTOR) / "run.log").read_text())
    return [f"*Triton's fused-attention tutorial, whole program A/B with {int(ab.rounds.max())} rounds* "
            f"(`{TUTORIAL_AB}`; its kernels' "
            "code is identical under the names with Triton's ptxas): "
            + ", ".join(f"{r.arm} {r.ratio:.4f} [{r.low:.4f}, {r.high:.4f}] {r.verdict}" for r in ab.itertuples())
            + ".", "",
            f"*A torch.compile'd transformer block* (`{INDUCTOR}`, `experiments/external/inductor_model.py`): "
            f"{len(cap['kernels'])} Inductor kernels captured on the H200 and swept with Triton's ptxas{changed}; "
            f"the whole-program A/B was cut by the device call's time limit after {done[-1][0]} of {done[-1][1]} "
            "rounds (each run recompiles the model), so it has no verdict.", ""]


def round4() -> list[str]:
    return [*probe_section(), *design_section(), *programs_section()]
