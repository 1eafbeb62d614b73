"""Findings on other people's kernels (CuTe DSL, Triton's tutorial, the other ptxas literals) and on the Gluon
Hopper attention with its name study. Imported by render.py; every number comes from a committed result."""

from __future__ import annotations

import json

import pandas as pd

from experiments.analysis import external_runs as analysis_external
from experiments.analysis import gpu_runs as analysis_gpu
from experiments.analysis import static_runs as analysis
from experiments.findings.common import calibration_line, pct
from ptxprobe.api import version_key

SOTA = "2026-12-03-h200-attention-sota"
NAMES = "2026-12-04-h200-gluon-hopper"  # every group, today's defaults
NAMES_EARLIER = "2026-12-03-h200-gluon-hopper"  # 13 of 16 groups, the earlier calibration block
HOPPER_STATIC = "2026-12-03-cpu-gluon-hopper-static"
CUTE = ("2026-12-03-cpu-cute-sm90a", "2026-12-03-cpu-cute-sm100a")
GLUON_TUTORIAL = "2026-12-03-cpu-gluon-tutorial-sm100a"
TUTORIAL = "2026-12-03-cpu-tutorial-sm90a"
TRIGGERS = "2026-12-03-cpu-triggers-external"
TRIGGERS_CUTE = "2026-12-03-cpu-triggers-cute"
AOT = "2026-12-03-h200-cute-dsl-aot"
PROGRAM_AB = "2026-12-03-h200-capture-tutorial"
FA4 = "2026-12-04-h200-fa4-hopper"
FA4_STATIC = "2026-12-04-cpu-fa4-sm90a"
FA4_RELEASES = ("12.9.86", "13.0.88")


def _d(name: str):
    return analysis.results_dir(name)


def sota_section() -> list[str]:
    d = _d(SOTA)
    t = analysis_external.sota_table([d / "sota.json", d / "sota-fp8.json"])
    env = json.loads((d / "sota.json").read_text())["environment"]
    c = analysis_external.checks_summary([d / "sota.json", d / "sota-checks.json"])
    worst = ", ".join(f"{k} {v:.1e}" for k, v in sorted(c["worst"].items()))
    failed = sorted({f"{f['label'].removeprefix('gluon_hopper/')} {'causal' if f['causal'] else 'full'}"
                     for f in c["failed"]})
    out = [f"**A Hopper attention in Gluon** (`attention_gluon_hopper`; `{SOTA}`, {env['gpu']}, torch "
           f"{env['torch']}, cuDNN {env['cudnn']}, Triton {env['triton']}): a TMA producer warp and two consumer "
           "warpgroups (wgmma, online softmax in registers, the next S = QK^T issued before the softmax of the "
           "current block), a K/V shared-memory ring, persistent over tiles. TFLOPS at batch × N = 16k, 32 heads, "
           "D128, every label timed in the same random-order rounds (CUDA-graph samples of >= 10 ms; medians):", "",
           "| dtype | mask | N | Gluon Hopper (best variant) | its persistent / classic grid | cuDNN SDPA | "
           "flash SDPA | Triton (ours) |", "|---|---|---|---|---|---|---|---|"]
    for r in t.itertuples():
        sdpa = (f"{r.cudnn:.0f} | {r.flash:.0f}" if r.cudnn == r.cudnn else "– | –")
        out.append(f"| {r.dtype} | {'causal' if r.causal else 'full'} | {r.seq_len // 1024}k | **{r.best:.0f}** "
                   f"(`{r.best_label}`) | {r.persistent:.0f} / {r.classic:.0f} | {sdpa} | {r.triton:.0f} |")
    out += ["", f"Correctness first, against float64 (inputs rounded to the dtype, output poisoned with NaN, three "
            f"grids: persistent, a 5-program grid that makes every program loop over many tiles, one program per "
            f"tile): {c['ok']} of {c['checks']} checks within tolerance, worst relative error {worst}"
            + (f"; the failures are {', '.join(failed)} (BLOCK_N > BLOCK_M with a causal mask: the consumers "
               "counted K/V blocks rounding down, the producer rounding up, which also hung the short grid; "
               "fixed, and that variant is not used with a causal mask)" if failed else "") + ".", "",
            "The Gluon Hopper attention's goals, measured in the same run as cuDNN:", ""]
    out += [f"- {goal}: **{'met' if met else 'not met'}** ({why})" for goal, met, why in
            analysis_external.sota_goals(t)]
    return [*out, ""]


def hopper_static_section() -> list[str]:
    s = analysis.load_static(_d(HOPPER_STATIC))
    r = analysis.renamed(s)
    r0 = r[r.repeat == 0]
    cut, ctl = r0[r0.name_template == "cutlass_{base}"], r0[r0.name_template == "xutlass_{base}"]
    base = s[(s.name_template == "{base}") & (s.repeat == 0)].set_index(["kernel", "ptxas_version"]).n_instructions
    delta = cut.set_index(["kernel", "ptxas_version"]).n_instructions - base
    by_ver = delta.groupby(level="ptxas_version").agg(["min", "max"])
    n_kernels = delta.index.get_level_values("kernel").nunique()
    vers = sorted(by_ver.index, key=version_key)
    spans = "; ".join(f"{v}: {int(by_ver.loc[v, 'min']):+d}…{int(by_ver.loc[v, 'max']):+d}" for v in vers)
    return [f"**Its name, statically** (`{HOPPER_STATIC}`: fp16/bf16/fp8, D64/D128, causal and not, one release per "
            f"minor version {vers[0]} … {vers[-1]}): `cutlass_` changes the code in "
            f"{int(cut.verdict.isin(analysis.DIFFERS).sum())} of {len(cut)} cells, the control `xutlass_` in "
            f"{int(ctl.verdict.isin(analysis.DIFFERS).sum())} of {len(ctl)}. Registers cannot show it: a "
            f"warp-specialised kernel is launched at its cap ({int(s.registers.max())}) and `setmaxnreg` moves the "
            f"registers between warpgroups; the SASS instruction count under `cutlass_` minus the baseline's, per "
            f"release (range over the {n_kernels} kernels): {spans}.", ""]


def hopper_runtime_section() -> list[str]:
    d = _d(NAMES)
    gpu = json.loads((d / "gpu.json").read_text())
    eff = analysis_gpu.name_effects(analysis_gpu.load(d))
    c = analysis_gpu.calibration(d)
    e = analysis.load_manifest(d)["experiment"]
    planned = (len(e["dtypes"]) * len(e["head_dims"]) * len(e["causal"]) * len(e["ptxas"])
               * len(e["run"]["seq_lens"]) * len(e["kernels"]))
    ran = (f"all {planned} planned groups" if c["groups"] == planned
           else f"{c['groups']} of the {planned} planned groups ran before the device-time limit stopped the run")
    out = [f"**Its name on the H200** (`{NAMES}`, {gpu['gpu']}, the calibrated paired design with every default; "
           f"{ran}): " + calibration_line(NAMES) + ". `cutlass_` and the control against the baseline name:", "",
           "| dtype | mask | N | ptxas | `cutlass_` | verdict | control `xutlass_` | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    e = hopper_effects(eff)
    for (dt, causal, n, ver), g in e.groupby(["dtype", "causal", "seq_len", "run_ptxas_version"]):
        cells = []
        for t in ("cutlass_{base}", "xutlass_{base}"):
            row = g[g.name_template == t]
            if row.empty:
                cells += ["–", "–"]
                continue
            row = row.iloc[0]
            cells += [f"{pct(row.ratio_vs_baseline, 2)} [{pct(row.ratio_ci_low, 2)}, {pct(row.ratio_ci_high, 2)}]",
                      row.runtime_verdict]
        out.append(f"| {dt} | {'causal' if causal else 'full'} | {n // 1024}k | {ver} | " + " | ".join(cells) + " |")
    n = analysis_gpu.numerics_summary(eff)
    out += ["", f"Numbers: {n['bitwise_equal']} of {n['rows']} renamed rows bitwise equal to the baseline name over "
            f"{n['draws']} input draws. " + _against_earlier(e), ""]
    return out


def _against_earlier(now: pd.DataFrame) -> str:
    """The re-run beside the earlier run of the same study: how far the shared cells moved, which verdicts changed,
    and what the groups the earlier run never reached show."""
    keys = ["dtype", "causal", "seq_len", "run_ptxas_version", "name_template"]
    before = hopper_effects(analysis_gpu.name_effects(analysis_gpu.load(_d(NAMES_EARLIER))))
    both = now.merge(before, on=keys, suffixes=("", "_before"))
    gap = (both.ratio_vs_baseline - both.ratio_vs_baseline_before).abs().max()
    changed = both[both.runtime_verdict != both.runtime_verdict_before]
    new = now.merge(before[keys], on=keys, how="left", indicator=True)
    new = new[(new._merge == "left_only") & (new.name_template == "cutlass_{base}")]
    moved = "; ".join(f"{r.dtype} {'causal' if r.causal else 'full'} {r.seq_len // 1024}k {r.run_ptxas_version} "
                      f"{r.name_template.split('{')[0]} {r.runtime_verdict_before} → {r.runtime_verdict}"
                      for r in changed.itertuples())
    return (f"Against the earlier run of this study (`{NAMES_EARLIER}`, {len(both)} cells in both): ratios within "
            f"{gap * 100:.1f} percentage points; verdicts that changed: {moved or 'none'}. The groups only this run "
            "reached: "
            + "; ".join(f"{r.dtype} {'causal' if r.causal else 'full'} {r.seq_len // 1024}k {r.run_ptxas_version} "
                        f"`cutlass_` {pct(r.ratio_vs_baseline, 1)}" for r in new.itertuples()) + ".")


def hopper_effects(eff: pd.DataFrame | None = None) -> pd.DataFrame:
    """The Gluon Hopper attention's `cutlass_` and control names against its baseline name on the H200."""
    if eff is None:
        eff = analysis_gpu.name_effects(analysis_gpu.load(_d(NAMES)))
    return analysis_external.with_spec_columns(eff[eff.name_template.isin(["cutlass_{base}", "xutlass_{base}"])])


def cute_aot() -> pd.DataFrame:
    """CuTe DSL on the H200: the DSL's own name and the control against the trigger-free name, per kernel."""
    return analysis_external.aot_comparisons(_d(AOT) / "cute_aot.json")


def figure() -> str:
    """The figure for this question: the CuTe DSL kernels' and the Gluon Hopper attention's name ratios."""
    from experiments.findings import figures
    from ptxprobe.api import EQUIVALENCE_MARGIN

    cute = cute_aot().assign(label=lambda t: t.case.str.replace("_", " ") + " · " + t.role.map(
        {"trigger": "cutlass", "control": "zutlass"}))
    h = hopper_effects()
    h = h.sort_values(["dtype", "causal", "run_ptxas_version", "seq_len", "name_template"],
                      key=lambda c: c.map(version_key) if c.name == "run_ptxas_version" else c)
    hopper = pd.DataFrame({
        "label": [f"{r.dtype} {'causal' if r.causal else 'full'} N={r.seq_len // 1024}k · ptxas {r.run_ptxas_version}"
                  f" · {r.name_template.split('{')[0]}" for r in h.itertuples()],
        "role": ["trigger" if t == "cutlass_{base}" else "control" for t in h.name_template],
        "ratio": h.ratio_vs_baseline.to_numpy(), "low": h.ratio_ci_low.to_numpy(), "high": h.ratio_ci_high.to_numpy()})
    aa = analysis_gpu.calibration(_d(NAMES))["aa_halfwidth_median"]
    return figures.other_kernels(cute, hopper, EQUIVALENCE_MARGIN, aa, (AOT, NAMES))


def _segments(names: tuple[str, ...], template: str) -> pd.DataFrame:
    frames = [analysis.load_static(_d(n)) for n in names if _d(n).is_dir()]
    static = pd.concat(frames, ignore_index=True)
    return analysis.release_segments(static, template), static


def external_section() -> list[str]:
    out = ["**Kernels nobody here wrote.** Fetched at run time (`experiments/external/sources.toml`: repository, "
           "commit, path, sha256; never committed), compiled without a GPU where the frontend allows it.", ""]
    seg, static = _segments(CUTE, "{base}")
    ctl = analysis.renamed(static)
    ctl = ctl[(ctl.name_template == "{base_control}") & (ctl.status == "ok")]
    out += ["*CuTe DSL* (CUTLASS's examples, `nvidia-cutlass-dsl` "
            f"{_dsl_version(CUTE[0])}, `cute.compile` on fake tensors with the target pinned; `{'`, `'.join(CUTE)}`). "
            "Every CuTe DSL symbol holds `cutlass`, so the baseline is the name with it spelled `xutlass` and the "
            f"control `zutlass`; the control differed in {int(ctl.verdict.isin(analysis.DIFFERS).sum())} of "
            f"{len(ctl)} cells. The name as the DSL gives it, by release:", "",
            "| kernel | arch | releases | the DSL's own (`cutlass`) name by release |", "|---|---|---|---|"]
    out += [f"| {_short(r.kernel)} | {r.arch} | {r.releases} | {r.segments} |" for r in seg.itertuples()]
    aot = cute_aot()
    out += ["", f"*CuTe DSL on the H200* (`{AOT}`: compiled ahead of time on a CPU, exported with `export_to_c`, "
            "run through a generated shim that loads ptxprobe's cubin under each name; one ptxas, "
            f"{json.loads((_d(AOT) / 'cute_aot.json').read_text())['manifest']['ptxas']['version']}, for all three "
            "names; 30 rounds in random order, CUDA-graph samples):", "",
            "| kernel | name | ratio vs the trigger-free name | 95 % interval | verdict | bitwise equal |",
            "|---|---|---|---|---|---|"]
    label = {"trigger": "`cutlass` (the DSL's own)", "control": "`zutlass` (control)"}
    out += [f"| {r.case} | {label[r.role]} | {r.ratio:.4f} | [{r.low:.4f}, {r.high:.4f}] | {r.verdict} | "
            f"{'yes' if r.bitwise else 'no'} |" for r in aot.itertuples()]
    gseg, gstatic = _segments((GLUON_TUTORIAL,), "{base}")
    cap = gstatic[(gstatic.repeat == 0) & (gstatic.status == "ok")].pivot_table(
        index="ptxas_version", columns="name_template", values="capmerc_bytes")
    ratios = (cap["{base}"] / cap["{base_untriggered}"]).dropna()
    out += ["", f"*Triton's Gluon attention example* (Blackwell; its fp8 kernel is named `cutlass_gluon_attention` "
            f"by the example's own `repr`; `{GLUON_TUTORIAL}`, imported and compiled for sm_100a on a machine "
            "without a GPU through `--triton` with a spec that writes its descriptors without layouts): against the "
            "trigger-free spelling " + "; ".join(f"{r.segments}" for r in gseg.itertuples())
            + f". `.nv.capmerc` grows {ratios.min():.2f}–{ratios.max():.2f}× under the name.", ""]
    tseg, _ = _segments((TUTORIAL,), "cutlass_{base}")
    ab = analysis_external.program_ab(_d(PROGRAM_AB) / "ab" / "ab.json")
    out += [f"*Triton's fused-attention tutorial* (captured on the H200 by `ptxprobe capture`; `{TUTORIAL}`): "
            + "; ".join(f"{_short(r.kernel)}: {r.segments}" for r in tseg.itertuples()) + ". "
            f"The whole program A/B (`{PROGRAM_AB}`) ran {int(ab.rounds.max())} rounds, fewer than a verdict needs: "
            + ", ".join(f"{r.arm} {r.verdict}" for r in ab.itertuples()) + ".", ""]
    return [*out, *fa4_section(), *_triggers()]


def fa4_comparisons() -> pd.DataFrame:
    """FlashAttention-4 on the H200: its own (cutlass) name and the control against the trigger-free spelling, per
    kernel and ptxas release, recomputed from the raw times with the rule ``ptxprobe.api.compare`` applies."""
    from ptxprobe.api import VERDICT_RULE

    return pd.concat([analysis_external.aot_comparisons(_d(FA4) / f"cute_aot-{r}.json", rule=VERDICT_RULE,
                                                        prepared=_d(FA4) / f"prepared-{r}.json").assign(ptxas=r)
                      for r in FA4_RELEASES], ignore_index=True)


def fa4_static() -> pd.DataFrame:
    """FA4's kernels by release (the static sweep of its captured PTX), each named by the case whose PTX it is."""
    seg, static = _segments((FA4_STATIC,), "{base}")
    prepared = json.loads((_d(FA4) / f"prepared-{FA4_RELEASES[0]}.json").read_text())["cases"]
    case = {c["ptx_sha256"]: name for name, c in prepared.items()}
    sha = static.drop_duplicates("kernel").set_index("kernel").source_ptx_sha256
    return seg.assign(case=[case.get(sha[k], k) for k in seg.kernel]).sort_values("case")


def fa4_section() -> list[str]:
    t = fa4_comparisons()
    man = json.loads((_d(FA4) / "manifest.json").read_text())
    pkg = json.loads((_d(FA4) / f"prepared-{FA4_RELEASES[0]}.json").read_text())["packages"]
    seg = fa4_static()
    out = [f"*FlashAttention-4* (`flash-attn-4` {pkg['flash-attn-4']}, its Hopper forward compiled for sm_90a "
           f"without a GPU, captured by `ptxprobe capture` and swept over every installed release; `{FA4_STATIC}`): "
           "its own name (`cutlass`) against the trigger-free spelling, by release:", "",
           "| kernel | releases | its own name by release |", "|---|---|---|"]
    out += [f"| {r.case.removeprefix('fa4_hopper_fwd_').replace('_', ' ')} | {r.releases} | {r.segments} |"
            for r in seg.itertuples()]
    out += ["", f"*FlashAttention-4 on the H200* (`{FA4}`: `flash-attn-4` {pkg['flash-attn-4']} from PyPI, its Hopper "
           f"forward `FlashAttentionForwardSm90` with FA4's own configuration, {man['shape'].split(', (')[0]}; "
           "compiled ahead of time on a CPU, one ptxas per run for all three names, "
           f"{int(t.rounds.min())} rounds in random order, CUDA-graph samples, verdicts by the rule "
           "`ptxprobe.api.compare` applies):", "",
           "| kernel | ptxas | TFLOPS | name | same machine code | ratio vs the trigger-free name | 95 % interval | "
           "verdict | bitwise equal |", "|---|---|---|---|---|---|---|---|---|"]
    label = {"trigger": "`cutlass` (its own)", "control": "`zutlass` (control)"}
    out += [f"| {r.case.removeprefix('fa4_hopper_fwd_').replace('_', ' ')} | {r.ptxas} | {r.tflops:.0f} | "
            f"{label[r.role]} | {'yes' if r.same_code else 'no'} | {r.ratio:.4f} | [{r.low:.4f}, {r.high:.4f}] | "
            f"{r.verdict} | {'yes' if r.bitwise else 'no'} |" for r in t.itertuples()]
    changed = t[(t.role == "trigger") & ~t.same_code]
    same = t[t.same_code]
    out += ["", f"The name changes FA4's machine code in the causal kernels only ({len(changed)} of "
            f"{int((t.role == 'trigger').sum())} kernel × release cells); where it does, the `cutlass` name's "
            "throughput against the trigger-free spelling is "
            + "; ".join(f"{r.case.removeprefix('fa4_hopper_fwd_').replace('_', ' ')} under {r.ptxas}: "
                        f"{pct(r.ratio, 2)} ({r.verdict})" for r in changed.itertuples())
            + f". Names with the same machine code as the baseline measured {pct(same.ratio.min(), 2)} to "
            f"{pct(same.ratio.max(), 2)}: effects this small sit at the edge of what these runs resolve, and none "
            "comes near the ±0.5 % that would matter.", ""]
    return out


def _triggers() -> list[str]:
    """The other literals as prefixes: of the tutorial's kernels' own names, and of CuTe DSL kernels' trigger-free
    names (prefixing a name that already holds ``cutlass`` would test nothing)."""
    frames = []
    for run, keep in ((TRIGGERS, lambda k: ~k.str.startswith("cute-")), (TRIGGERS_CUTE, lambda k: k == k)):
        d = _d(run)
        r = analysis.renamed(analysis.load_static(d))
        frames.append(r[keep(r.kernel) & (r.status == "ok")])
    r = pd.concat(frames, ignore_index=True).assign(changed=lambda x: x.verdict.isin(analysis.DIFFERS))
    r = r.assign(prefix=r.name_template.str.split("{").str[0].replace("", "(the DSL's own cutlass name)"))
    rows = [f"`{t}` {int(g.changed.sum())} of {len(g)}" for t, g in r.groupby("prefix")]
    return [f"*The other `strstr` literals* as name prefixes on these kernels (`{TRIGGERS}` for the tutorial's, "
            f"`{TRIGGERS_CUTE}` for CuTe DSL's, prefixed to their trigger-free names; sm_90a, releases 12.8 … 13.5): "
            "cells where the code changes: " + "; ".join(rows) + ".", ""]


def _dsl_version(name: str) -> str:
    cap = _d(name) / "captured.json"
    if not cap.exists():
        return "?"
    return json.loads(cap.read_text()).get("cutlass_dsl") or "?"


def _short(kernel: str) -> str:
    return kernel.split("-")[1] if kernel.startswith("cute-") else kernel.split("/")[-1]


def gluon_hopper() -> list[str]:
    """The Gluon Hopper attention: its speed beside cuDNN, and what its name does, statically and on the H200."""
    return [*sota_section(), *hopper_static_section(), *hopper_runtime_section()]
