"""Sentences every findings section shares (imported by render.py, measurement.py and external_kernels.py)."""

from __future__ import annotations

from experiments.analysis import gpu_runs as analysis_gpu
from experiments.analysis import static_runs as analysis


def pct(x: float, digits: int = 1) -> str:
    return f"{(x - 1) * 100:+.{digits}f} %"


def calibration_line(run: str) -> str:
    c = analysis_gpu.calibration(analysis.results_dir(run))
    def by_size(d: dict) -> list:
        return sorted(d.items(), key=lambda x: float(x[0]))

    n = c.get("planted_in_groups", {})
    power = ", ".join(f"{float(f) * 100:g} %: {p:.0%}" + (f" of {n[f]}" if f in n else "")
                      for f, p in by_size(c["power"]))
    sizes = by_size(c["planted_measured_fraction_median"])
    measured = ", ".join(f"{float(f) * 100:g} % → {m * 100:.2f} %" for f, m in sizes)
    verdict = "**passed**" if c["passed"] else "**failed** (" + "; ".join(c["failures"]) + ")"
    return (f"calibration over {c['groups']} groups {verdict}: A/A false positives {c['aa_false_positive_rate']:.1%}, "
            f"A/A 95 % half-width median {c['aa_halfwidth_median'] * 100:.2f} % "
            f"(max {c['aa_halfwidth_max'] * 100:.2f} %), "
            f"planted slowdowns detected {power}; measured sizes (median) {measured}; {c['gpu_seconds']:.0f} GPU s")


JUDGED_NOW = ("Speed verdicts in every table are judged again from each comparison's stored interval and q-value "
              "under the rule ptxprobe judges by (`margin+bh`, `ptxprobe.stats.paired.decide`): faster or slower "
              "only when the whole interval lies beyond ±0.5 %, `straddles ±0.5 %` when significant across that "
              "margin, `negligible` when significant inside it; the runs recorded their own rule's verdicts "
              "(`recorded_verdict`), which called every significant effect outside ±0.5 % faster or slower.")
