"""One group: every name of one workload timed together, checked against the baseline and float64.

Registered kernels and user kernels both arrive as a ``Workload``; this is their one path.
"""

from __future__ import annotations

from .. import stats
from ..cache import Cache
from ..rename import apply_template
from ..sources import Emitted
from ..toolchain import Tool
from .device import require_gpu
from .launchers import cubin_for
from .numerics import merged_numerics, numerics
from .plan import RunConfig
from .timing import _slowed, time_interleaved
from .workload import Workload

AA_LABEL = "{base}#AA"
SLOW_LABEL = "{base}#slowed"


def named_kernels(emitted: Emitted, templates: list[str], tool: Tool, cache: Cache | None, load, launched=None):
    """Each name's cubin (renamed, assembled), loaded for launch, with its facts.

    ``launched(name)``, when given, is the ``.text`` hash of the frontend's own compile under
    that name: ``aot_matches_launch`` says whether ptxprobe analysed the code that really runs.
    """
    names = [apply_template(t, emitted.entry) for t in templates]
    kernels, facts = {}, {}
    for t, name in zip(templates, names, strict=True):
        cubin, facts[t] = cubin_for(emitted, name, tool, cache)
        kernels[t] = load(name, cubin)
        facts[t]["aot_matches_launch"] = None if launched is None else launched(name) == facts[t]["text_sha256"]
    return names, kernels, facts


def timed_functions(kernels: dict, templates: list[str], names: list[str], grid, args: list, load) -> dict:
    """One callable per name, plus the A/A control: the baseline's cubin loaded a second time."""
    fns = {t: (lambda k=kernels[t]: k[grid](*args)) for t in templates}
    fns[AA_LABEL] = lambda k=load(names[0], kernels[templates[0]].kernel): k[grid](*args)
    return fns


def measurement_rows(
    meas: dict[str, stats.Measurement],
    templates: list[str],
    names: list[str],
    work: dict,
    cfg: RunConfig,
    seed: int,
    peak: float | None,
    info: dict,
    tool: Tool,
    common: dict,
    facts: dict,
    nums: dict,
) -> list[dict]:
    """One record per timed label: throughput and ratio vs the baseline with intervals, facts, numerics.

    ``work`` has the group's ``flops`` and ``bytes`` (either may be None).
    """
    base_m = meas[templates[0]]
    aa = stats.paired_ratio(base_m, meas[AA_LABEL], n_boot=cfg.timing.n_boot, seed=seed)
    floor = stats.noise_floor(aa)
    rows = []
    for label, m in meas.items():
        rate = {}
        for key, amount, scale in (("tflops", work.get("flops"), 1.0), ("gbps", work.get("bytes"), 1e3)):
            iv = stats.throughput_interval(m, amount, n_boot=cfg.timing.n_boot, seed=seed) if amount else None
            rate[key], rate[f"{key}_ci_low"], rate[f"{key}_ci_high"] = (
                (iv.estimate * scale, iv.low * scale, iv.high * scale) if iv else (None, None, None)
            )
        ratio = stats.paired_ratio(base_m, m, n_boot=cfg.timing.n_boot, seed=seed)
        template = label if label in templates else None
        row = {
            **common,
            "arch": info["arch"],
            "label": label,
            "name_template": template,
            "name": names[templates.index(label)] if template else label,
            "baseline_name": names[0],
            "is_baseline": label == templates[0],
            **rate,
            "median_ms": m.median_ms,
            "spread": m.spread,
            "times_ms": list(m.times_ms),
            "ratio_vs_baseline": ratio.estimate,
            "ratio_ci_low": ratio.low,
            "ratio_ci_high": ratio.high,
            "runtime_verdict": stats.runtime_verdict(ratio),
            "runtime_verdict_vs_floor": stats.runtime_verdict_vs_floor(ratio, floor),
            "noise_floor": floor,
            "aa_ratio": aa.estimate,
            "aa_ci_low": aa.low,
            "aa_ci_high": aa.high,
            "peak_tflops": peak,
            "pct_sol": (100 * rate["tflops"] / peak) if peak and rate["tflops"] else None,
            "gpu": info.get("gpu"),
            "driver": info.get("driver"),
            "sm_clock_mhz": info.get("sm_clock_mhz"),
            "rounds": m.n,
            "run_ptxas_version": tool.version,
            "run_ptxas_sha256": tool.sha256,
            "reps": cfg.timing.reps,
        }
        if label == SLOW_LABEL:  # its extra memset is not the kernel's work
            for key in ("tflops", "gbps"):
                row[key] = row[f"{key}_ci_low"] = row[f"{key}_ci_high"] = None
            row["pct_sol"] = None
        if template:
            row.update(facts[template])
            row.update(nums[template])
        rows.append(row)
    return rows


def run_group(
    w: Workload,
    templates: list[str],
    cfg: RunConfig,
    info: dict,
    tool: Tool,
    cache: Cache | None = None,
    slow_control: bool = False,
    peak: float | None = None,
    seed: int = 0,
) -> list[dict]:
    """Time and check every name of one workload; returns one record per timed variant."""
    torch = require_gpu()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    timed = w.timed(gen)
    names, kernels, facts = named_kernels(w.emitted, templates, tool, cache, w.load, w.launched)
    fns = timed_functions(kernels, templates, names, timed.grid, timed.args(timed.tensors), w.load)
    if slow_control:
        fns[SLOW_LABEL] = _slowed(fns[templates[0]], cfg.slow_fraction)
    fns.update(w.extras(timed))
    meas = time_interleaved(fns, cfg.timing)
    # numerics: each name from the same fresh inputs, outputs compared with the baseline and float64
    small = w.small(gen)
    ref = w.reference(small)
    nums: dict = {}
    base_outs: dict = {}
    for t in templates:
        fresh = {k: v.clone() for k, v in small.tensors.items()}
        kernels[t][small.grid](*small.args(fresh))
        torch.cuda.synchronize()
        outs = {o: fresh[o] for o in w.outputs}
        base_outs = base_outs or outs
        nums[t] = merged_numerics({o: numerics(outs[o], base_outs[o], ref.get(o)) for o in outs})
        rel = nums[t]["rel_err_vs_reference"]
        nums[t]["passes_tolerance"] = None if w.tolerance is None or rel is None else rel <= w.tolerance
    return measurement_rows(meas, templates, names, w.work, cfg, seed, peak, info, tool, w.common, facts, nums)
