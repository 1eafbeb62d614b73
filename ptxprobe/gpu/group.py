"""One group: every name of one workload timed together, checked against the baseline and float64.

Registered kernels and user kernels both arrive as a ``Workload``; this is their one path.
Two blocks, each with rounds of its own: the names with two A/A copies of the baseline and the
group's plants (the comparison and its calibration, under one stopping rule), and torch SDPA (a
reference rate).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from ptxprobe.core.cache import Cache
from ptxprobe.gpu.calibrate import (
    AA_LABELS,
    judge_code_plant,
    judge_plant,
    names_compared,
    plant_key,
    planted_label,
    plants,
    size_plant,
    sleep_rate_after,
    sleep_tail,
)
from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.graphs import Unit
from ptxprobe.gpu.launchers import cubin_for
from ptxprobe.gpu.numerics import BASELINE_REPEATS, merged_numerics, numerics, own_spread, within_own_spread
from ptxprobe.gpu.plan import CODE_PLANT, PLANT_KINDS, GpuRunConfig
from ptxprobe.gpu.timing import (
    Nvml,
    Sampled,
    comparison_regime,
    effective,
    paired_estimate,
    reference_plan,
    time_block,
    unit_for,
)
from ptxprobe.gpu.workload import Case, Workload
from ptxprobe.ptx.plant import plant_in_hot_loop
from ptxprobe.ptx.rename import template_ptx
from ptxprobe.sources import Emitted
from ptxprobe.stats import paired as stats
from ptxprobe.stats import serial
from ptxprobe.stats.regime import ROW_FIELDS as REGIME_FIELDS
from ptxprobe.stats.regime import SUSTAINED
from ptxprobe.toolchain.tools import Tool

# dense tensor-core peaks of the H200 SXM datasheet at its 1980 MHz boost clock (TFLOPS)
DATASHEET_PEAK = {"NVIDIA H200": {"fp16": 989.4, "bf16": 989.4, "fp8e5": 1978.9, "fp8e4nv": 1978.9}}
DATASHEET_CLOCK_MHZ = {"NVIDIA H200": 1980}


def named_kernels(emitted: Emitted, templates: list[str], tool: Tool, cache: Cache | None, load, launched=None):
    """Each name's cubin (renamed, assembled), loaded for launch, with its facts.

    ``launched(name)``, when given, is the ``.text`` hash of the frontend's own compile under
    that name: ``aot_matches_launch`` says whether ptxprobe analysed the code that really runs.
    """
    renamed = [template_ptx(emitted.ptx, emitted.entry, t) for t in templates]
    names = [name for name, _ in renamed]
    kernels, facts = {}, {}
    for t, (name, text) in zip(templates, renamed, strict=True):
        cubin, facts[t] = cubin_for(emitted, name, tool, cache, text.ptx)
        kernels[t] = load(name, cubin)
        facts[t]["aot_matches_launch"] = None if launched is None else launched(name) == facts[t]["text_sha256"]
    return names, kernels, facts


def reference_of(samples: dict[str, Sampled], label: str, baseline: str) -> Sampled:
    """What a row's ratio is against: the baseline, unless the paired design timed this label only beside
    another (the A/A copies are paired with each other: each row's ratio is then against its partner)."""
    partners = samples[label].partners
    if label == baseline or not partners or baseline in partners:
        return samples[baseline]
    return samples[next(iter(partners))]


def comparison(base: Sampled, other: Sampled, plan, seed: int, power_limit_w: float | None = None) -> dict:
    """The paired comparison of two labels of one block: ratio (> 1: ``other`` faster), interval, p, verdict, and
    the regime its rounds ran in (``stats.regime``: clock, throttling, power against ``power_limit_w``, the
    ratio's slope on the clock)."""
    logs, iv = paired_estimate(base, other, plan, seed)
    return {"ratio_vs_baseline": iv.estimate, "ratio_ci_low": iv.low, "ratio_ci_high": iv.high,
            "ratio_of_means": stats.ratio_of_means(*base.paired_with(other)),
            "half_width": stats.half_width(iv), "p_value": stats.paired_pvalue(logs, plan.interval),
            # the serial-correlation diagnostic of the rounds (the interval already allows for it)
            "lag1": serial.lag1(logs), "long_run_ratio": serial.long_run_ratio(logs),
            # a name row's verdict is judged again with its q-value over the run (dispatch.with_q_values)
            "runtime_verdict": stats.decide(iv, plan.margin), "verdict_rule": stats.VERDICT_RULE,
            "margin": plan.margin, "rounds": len(logs), "ci_level": iv.level, "ci_method": plan.interval,
            **comparison_regime(base, other, logs, plan, power_limit_w).fields()}


def _rates(s: Sampled, work: dict, plan, seed: int, peak: float | None, info: dict, dtype: str | None) -> dict:
    out = {}
    for key, amount, scale in (("tflops", work.get("flops"), 1.0), ("gbps", work.get("bytes"), 1e3)):
        iv = stats.throughput_interval(s.times_ms, amount, n_boot=plan.n_boot, seed=seed) if amount else None
        out[key], out[f"{key}_ci_low"], out[f"{key}_ci_high"] = (
            (iv.estimate * scale, iv.low * scale, iv.high * scale) if iv else (None, None, None))
    clocks = [c for c in s.sm_clock_mhz if c]
    clock = sorted(clocks)[len(clocks) // 2] if clocks else None
    sheet = DATASHEET_PEAK.get(info.get("gpu"), {}).get(dtype or "")
    sheet_at_clock = sheet * clock / DATASHEET_CLOCK_MHZ[info["gpu"]] if sheet and clock else None
    out.update({
        "median_ms": stats.median_ms(s.times_ms), "spread": stats.spread(s.times_ms), "sm_clock_mhz": clock,
        "throttled_samples": int(sum(s.throttled)), "launches_per_sample": s.launches_per_sample,
        "peak_tflops_cublas": peak, "pct_sol_cublas": 100 * out["tflops"] / peak if peak and out["tflops"] else None,
        "peak_tflops_datasheet_at_clock": sheet_at_clock,
        "pct_sol_datasheet": 100 * out["tflops"] / sheet_at_clock if sheet_at_clock and out["tflops"] else None,
    })
    return out


def untimed_row(w: Workload, info: dict, template: str, name: str, baseline_name: str, facts: dict, nums: dict,
                tool: Tool, aa: dict) -> dict:
    """The row of a name not timed because its machine code is the baseline's: facts and numerics, no ratio."""
    return {**w.common, "arch": info["arch"], "block": "names", "label": template, "name_template": template,
            "name": name, "baseline_name": baseline_name, "is_baseline": False, "timed": False,
            "runtime_verdict": stats.IDENTICAL_CODE, "verdict_rule": stats.VERDICT_RULE, "ratio_vs_baseline": None,
            "ratio_of_means": None, "ratio_ci_low": None,
            "ratio_ci_high": None, "half_width": None, "p_value": None, "rounds": 0, "median_ms": None,
            "gpu": info.get("gpu"),
            "driver": info.get("driver"), "run_ptxas_version": tool.version, "run_ptxas_sha256": tool.sha256,
            "aa_ratio": aa["ratio_vs_baseline"], "aa_ci_low": aa["ratio_ci_low"], "aa_ci_high": aa["ratio_ci_high"],
            "aa_verdict": aa["runtime_verdict"], **dict.fromkeys(REGIME_FIELDS), **facts, **nums}


def draw_numerics(w: Workload, kernels: dict, templates: list[str], gen, draws: int) -> dict[str, dict]:
    """Every name on ``draws`` fresh input draws at the timed size (bitwise/ULP vs the baseline name) and
    at the small size (also vs float64); the worst over all draws is kept. The baseline name runs
    ``BASELINE_REPEATS`` times on each draw's inputs: where it differs from itself (a nondeterministic kernel) the
    other names are judged against that spread (``within_baseline_spread``), not bitwise."""
    torch = require_gpu()
    per: dict[str, list[dict]] = {t: [] for t in templates}
    self_recs: list[dict] = []
    for d in range(draws):
        for size, make in (("timed", w.timed), ("small", w.small)):
            case: Case = make(gen)
            ref = w.reference(case) if size == "small" else {}
            base_outs = None
            for t in templates:
                for repeat in range(BASELINE_REPEATS if t == templates[0] else 1):
                    fresh = {k: v.clone() for k, v in case.tensors.items()}
                    kernels[t][case.grid](*case.args(fresh))
                    torch.cuda.synchronize()
                    outs = {o: fresh[o] for o in w.outputs}
                    if repeat:  # the baseline again, on the same inputs: against its first run
                        self_recs.append(merged_numerics({o: numerics(outs[o], base_outs[o], None) for o in outs}))
                        continue
                    base_outs = base_outs or outs
                    rec = merged_numerics({o: numerics(outs[o], base_outs[o], ref.get(o)) for o in outs})
                    per[t].append({**rec, "draw": d, "size": size})
            del case
    spread = own_spread(self_recs)
    out = {}
    for t, recs in per.items():
        rels = [r["rel_err_vs_reference"] for r in recs if r["rel_err_vs_reference"] is not None]
        out[t] = {
            "nan_count": max(r["nan_count"] for r in recs), "inf_count": max(r["inf_count"] for r in recs),
            "fully_written": all(r["fully_written"] for r in recs),
            "bitwise_equal_to_baseline": all(r["bitwise_equal_to_baseline"] for r in recs),
            "n_diff_vs_baseline": max(r["n_diff_vs_baseline"] for r in recs),
            "max_ulp_vs_baseline": max(r["max_ulp_vs_baseline"] for r in recs),
            "rel_err_vs_reference": max(rels) if rels else None,
            "numerics_draws": draws,
            "passes_tolerance": None if w.tolerance is None or not rels else max(rels) <= w.tolerance,
            **spread,
        }
        out[t]["within_baseline_spread"] = within_own_spread(out[t], spread)
    return out


def identical_code(facts: dict[str, dict], templates: list[str]) -> list[str]:
    """The names whose machine code (``KernelFacts.machine_code_sha256``: code, records, constant banks, relocations,
    sizes, callees) is the baseline's: the GPU runs the same code under them, so timing them is an A/A run."""
    base = facts[templates[0]].get("machine_code_sha256")
    return [t for t in templates[1:] if base and facts[t].get("machine_code_sha256") == base]


def sleep_plant_units(base: Unit, fractions: list[float]) -> tuple[dict[str, Unit], dict]:
    """The sleep plants' units (the baseline's unit, then a sleep adding ``fraction`` of its measured time) and
    what sized them."""
    sample_ms, rate = sleep_rate_after(base)  # the unit's time and a sleep's cost right after it, measured
    chosen = plants(sample_ms, rate, fractions)
    units = {planted_label(p.fraction): Unit(base.fn, base.k, sample_ms * (1 + p.fraction),
                                             tail=sleep_tail(p.cycles)) for p in chosen}
    return units, {"sample_ms": sample_ms, "ms_per_sleep_cycle": rate.ms_per_cycle,
                   "sleep_overhead_ms": rate.overhead_ms, "unit_launches": base.k,
                   "cycles": {plant_key(p.fraction): p.cycles for p in chosen},
                   "sizing": {plant_key(p.fraction): size_plant(base, p.cycles) for p in chosen}}


def code_plant_unit(w: Workload, name: str, base_facts: dict, base: Unit, args: list, grid, plan, tool: Tool,
                    cache: Cache | None) -> tuple[Unit | None, dict]:
    """The code plant: the baseline's PTX with a dependent chain in its hot loop (``ptx.plant``), assembled by the
    group's ptxas under the baseline's name and loaded like a name. None and why when it cannot be planted: no hot
    loop, ptxas refused it or kept the machine code, or it does not launch."""
    planted = plant_in_hot_loop(w.emitted.ptx, w.emitted.entry)
    if planted is None:
        return None, {"skipped": "no hot loop in the PTX"}
    try:
        cubin, facts = cubin_for(replace(w.emitted, ptx=planted.ptx), name, tool, cache)
    except RuntimeError as exc:
        return None, {"skipped": f"ptxas refused the planted PTX: {str(exc)[-200:]}"}
    if facts["machine_code_sha256"] == base_facts.get("machine_code_sha256"):
        return None, {"skipped": "ptxas left the machine code unchanged"}
    meta = {"machine_code_sha256": facts["machine_code_sha256"], "registers": facts["registers"],
            "loop_label": planted.loop.label, "loop_hot_instructions": planted.loop.own_hot}
    try:
        kernel = w.load(name, cubin)
        unit = unit_for(lambda: kernel[grid](*args), plan, k=base.k)
    except Exception as exc:  # a launch the planted shared word pushed over a limit: the group goes on without it
        return None, {**meta, "skipped": f"the planted kernel did not launch: {str(exc)[-200:]}"}
    return unit, meta


def run_group(w: Workload, templates: list[str], cfg: GpuRunConfig, info: dict, tool: Tool, cache: Cache | None = None,
              plants: tuple = PLANT_KINDS, peak: float | None = None,
              seed: int = 0, order_seed: int | None = None) -> tuple[list[dict], dict]:
    """Time and check every name of one workload; one record per label, and the group's calibration.

    A name whose machine code is the baseline's is not timed unless ``cfg.time_identical_code``: its row says
    ``identical-code`` and carries no ratio (the group's A/A pair measures what timing it would). The group's
    ``plants`` (sleep fractions and/or ``CODE_PLANT``) are labels of the names block, each paired with the
    baseline, stopped by the same rule as the names; their samples go to the group record, not to rows.
    ``order_seed`` (the group's own, from its id) draws the run orders; ``seed`` the inputs and bootstraps.
    """
    order_seed = seed if order_seed is None else order_seed
    torch = require_gpu()
    plan = effective(cfg.timing)  # a sustained plan: the pairs design, its fixed rounds (units sized for it)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    timed = w.timed(gen)
    names, kernels, facts = named_kernels(w.emitted, templates, tool, cache, w.load, w.launched)
    same = [] if cfg.time_identical_code else identical_code(facts, templates)
    args = timed.args(timed.tensors)
    fns = {t: (lambda k=kernels[t]: k[timed.grid](*args)) for t in templates if t not in same}
    for aa in AA_LABELS:  # the baseline's cubin loaded again, twice: two independent A/A copies
        fns[aa] = lambda k=w.load(names[0], kernels[templates[0]].kernel): k[timed.grid](*args)
    base = unit_for(fns[templates[0]], plan)  # every label of the names block gets the baseline's k
    t_setup = time.perf_counter()
    fractions = [float(p) for p in plants if p != CODE_PLANT]
    planted_units, calib_meta = sleep_plant_units(base, fractions) if fractions else ({}, {})
    if CODE_PLANT in plants:
        unit, code_meta = code_plant_unit(w, names[0], facts[templates[0]], base, args, timed.grid, plan, tool, cache)
        if unit is not None:
            planted_units[planted_label(CODE_PLANT)] = unit
        calib_meta["code_plant"] = code_meta
    setup_seconds = time.perf_counter() - t_setup
    kinds = tuple(p for p in plants if planted_label(p) in planted_units)
    compare = names_compared(templates, same, kinds)
    if compare == [AA_LABELS]:  # every name is identical code and nothing planted: the block is the A/A pair alone
        del fns[templates[0]]
    units = {label: base if label == templates[0] else unit_for(fn, plan, k=base.k) for label, fn in fns.items()}
    units.update(planted_units)
    nvml = Nvml()
    limit = nvml.power_limit_w()
    samples, seconds = time_block(units, plan, compare, order_seed, nvml)
    planted_samples = {label: samples.pop(label) for label in planted_units}
    calib = _calibration(plants, kinds, samples[templates[0]], planted_samples, calib_meta, plan, seed,
                         setup_seconds) if plants else None
    extra_fns = w.extras(timed)
    extra_samples: dict[str, Sampled] = {}
    ref_plan = reference_plan(plan)
    if extra_fns:  # torch SDPA: a block of its own, beside the baseline (a reference rate: whole samples)
        block = {templates[0]: base.fn, **extra_fns}
        eu = {label: unit_for(fn, plan, interleaved=False) for label, fn in block.items()}
        extra_samples, more = time_block(eu, ref_plan, [], order_seed + 2, nvml)
        seconds += more
    nums = draw_numerics(w, kernels, templates, gen, cfg.numerics_draws)
    aa = comparison(samples[AA_LABELS[0]], samples[AA_LABELS[1]], plan, seed, limit)
    rows = [untimed_row(w, info, t, names[templates.index(t)], names[0], facts[t], nums[t], tool, aa) for t in same]
    if templates[0] not in samples:  # only the A/A pair was timed: the baseline's rates are its first copy's
        samples = {templates[0]: samples[AA_LABELS[0]], **samples}
    timing = _Timing(w, info, tool, plan, seed, peak, limit)
    rows += [_names_row(timing, label, s, samples, templates, names, facts, nums, aa) for label, s in samples.items()]
    rows += [_sdpa_row(replace(timing, plan=ref_plan), label, s, extra_samples[templates[0]], names[0])
             for label, s in extra_samples.items() if label != templates[0]]
    record = {"aa": aa, "calibration": calib, "identical_code": same, "order_seed": order_seed,
              "compared": [list(p) for p in compare],  # the names block's pairs, in the order its orders were drawn
              "timing_plan": asdict(plan),  # as resolved (defaults included): a replay of the block needs it
              "gpu_seconds": seconds + setup_seconds}
    if planted_samples:
        record["calibration_samples"] = {label: s.to_json() for label, s in planted_samples.items()}
    return rows, record


def _calibration(plants: tuple, kinds: tuple, base: Sampled, planted_samples: dict[str, Sampled], calib_meta: dict,
                 plan, seed: int, setup_seconds: float) -> dict:
    """The group's calibration record: each plant delivered into the names block judged against the baseline."""
    calib = {"in_names_block": True, "gpu_seconds": setup_seconds,
             **{k: v for k, v in calib_meta.items() if k not in ("cycles", "code_plant", "sizing")}, "planted": {}}
    for p in kinds:
        label = planted_label(p)
        logs, iv = paired_estimate(base, planted_samples[label], plan, seed)
        judged = (judge_code_plant(iv, plan.margin) if p == CODE_PLANT
                  else judge_plant(iv, float(p), plan.margin, calib_meta["sizing"][plant_key(p)],
                                   sustained=plan.regime == SUSTAINED))
        extra = calib_meta.get("code_plant", {}) if p == CODE_PLANT else {"cycles": calib_meta["cycles"][plant_key(p)]}
        calib["planted"][plant_key(p)] = {"label": label, **extra, **judged, "rounds": len(logs),
                                         "ci_method": plan.interval}
    if CODE_PLANT in plants and CODE_PLANT not in kinds:
        calib["code_plant_skipped"] = calib_meta["code_plant"].get("skipped", "not planted")
    return calib


@dataclass(frozen=True)
class _Timing:
    """What every timed row of one group is computed with."""

    w: Workload
    info: dict
    tool: Tool
    plan: object
    seed: int
    peak: float | None
    limit: float | None

    def measured(self, s: Sampled, reference: Sampled) -> dict:
        """A label's rates and its comparison with ``reference``, and its samples."""
        t = self
        return {**_rates(s, t.w.work, t.plan, t.seed, t.peak, t.info, t.w.dtype),
                **comparison(reference, s, t.plan, t.seed, t.limit), "samples": s.to_json()}


def _names_row(t: _Timing, label: str, s: Sampled, samples: dict[str, Sampled], templates: list[str],
               names: list[str], facts: dict, nums: dict, aa: dict) -> dict:
    """One label of the names block (a name, or an A/A copy) against its reference, with its facts and numerics."""
    template = label if label in templates else None
    row = {**t.w.common, "arch": t.info["arch"], "block": "names", "label": label, "name_template": template,
           "name": names[templates.index(label)] if template else label, "baseline_name": names[0],
           "is_baseline": label == templates[0], **t.measured(s, reference_of(samples, label, templates[0])),
           "gpu": t.info.get("gpu"), "driver": t.info.get("driver"), "run_ptxas_version": t.tool.version,
           "run_ptxas_sha256": t.tool.sha256, "aa_ratio": aa["ratio_vs_baseline"], "aa_ci_low": aa["ratio_ci_low"],
           "aa_ci_high": aa["ratio_ci_high"], "aa_verdict": aa["runtime_verdict"]}
    if template:
        row.update(facts[template])
        row.update(nums[template])
    return row


def _sdpa_row(t: _Timing, label: str, s: Sampled, baseline: Sampled, baseline_name: str) -> dict:
    """A reference of the SDPA block (torch's attention) against the baseline timed beside it."""
    return {**t.w.common, "arch": t.info["arch"], "block": "sdpa", "label": label, "name_template": None,
            "name": label, "baseline_name": baseline_name, "is_baseline": False, **t.measured(s, baseline),
            "gpu": t.info.get("gpu"), "run_ptxas_version": t.tool.version}
