"""Why a name changes speed: ncu's per-instruction warp-stall samples joined to ptxprobe's SASS and diff.

Input: for each name of a group, the cubin that ran and ncu's source page (one row per SASS
instruction: samples by stall reason, instructions executed) and details page (duration,
cycles per issued instruction), as ``ptxprobe.explain.profile`` keeps them. Output: per group and
renamed variant, the stall samples by reason (baseline -> variant), per matched loop, the
instructions whose samples changed most, ncu's duration beside the calibrated timing, and
the checks that keep it honest: every sample joined to an instruction, the opcode ncu shows
at each offset equal to ptxprobe's, the duration's sign agreeing with the timing, and how
many instruction changes exceed Poisson sampling noise (3 sigma), which on identical code
should be about none.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field

from ptxprobe.binary.diff import align, match_loops
from ptxprobe.binary.sass import Listing, loops
from ptxprobe.core.errors import SpecError
from ptxprobe.stats.paired import BEYOND_MARGIN

TOTAL_COLUMN = "Warp Stall Sampling (All Samples)"
UNLISTED = "unlisted"  # samples ncu counts at an instruction but gives no reason column for (seen at HGMMA)
CYCLES = "Elapsed Cycles"
EXECUTED_COLUMN = "Instructions Executed"
NOISE_SIGMAS = 3.0
_UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3,
            "s": 1e3}


@dataclass(frozen=True)
class InstructionSamples:
    offset: int  # from the kernel's first instruction
    source: str  # the SASS text ncu shows
    samples: int  # all warp-stall samples at this instruction
    by_reason: dict  # stall reason -> samples
    executed: int | None


@dataclass(frozen=True)
class KernelProfile:
    instructions: tuple[InstructionSamples, ...]
    reasons: tuple[str, ...]
    metrics: dict = field(default_factory=dict)  # details page: metric name -> (value, unit)

    @property
    def duration_ms(self) -> float | None:
        got = self.metrics.get("Duration")
        if not got:
            return None
        value, unit = got
        return value * _UNIT_MS.get(unit, float("nan"))

    @property
    def total_samples(self) -> int:
        return sum(i.samples for i in self.instructions)


def _number(text: str) -> float | None:
    t = (text or "").replace(",", "").strip()
    if not t or t in ("-", "n/a"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _csv_rows(text: str, first_header: str) -> list[dict]:
    """The CSV table of an ``ncu --csv`` export, skipping ncu's own lines before its header."""
    lines = text.splitlines()
    start = next((k for k, ln in enumerate(lines) if ln.startswith(f'"{first_header}"')), None)
    if start is None:
        raise SpecError(f"not an ncu CSV export: no {first_header!r} header")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def reason_columns(header: list[str]) -> list[str]:
    """Stall-reason columns of the source page: ``stall_*``, without ncu's "(Not Issued)" subsets of them."""
    return [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]


def parse_source_csv(text: str) -> KernelProfile:
    """ncu ``--page source --csv --print-source sass``: one record per SASS instruction, offsets from the first."""
    rows = _csv_rows(text, "Address")
    if not rows:
        raise SpecError("the ncu source page has no instructions")
    reasons = reason_columns(list(rows[0]))
    addrs = [int(r["Address"], 16) for r in rows]
    base = min(addrs)
    out = []
    unlisted = False
    for r, a in zip(rows, addrs, strict=True):
        by_reason = {k: int(_number(r.get(k)) or 0) for k in reasons}
        listed = sum(by_reason.values())
        total = _number(r.get(TOTAL_COLUMN))
        total = int(total) if total is not None else listed
        if total > listed:  # every sample is attributed somewhere, and said to be without a reason column
            by_reason[UNLISTED] = total - listed
            unlisted = True
        out.append(InstructionSamples(a - base, (r.get("Source") or "").strip(), total, by_reason,
                                      int(v) if (v := _number(r.get(EXECUTED_COLUMN))) is not None else None))
    return KernelProfile(tuple(sorted(out, key=lambda i: i.offset)), tuple(reasons) + ((UNLISTED,) if unlisted
                                                                                      else ()))


def parse_details_csv(text: str) -> dict:
    """ncu ``--page details --csv``: metric name -> (value, unit) for the profiled launch."""
    out = {}
    for r in _csv_rows(text, "ID"):
        v = _number(r.get("Metric Value"))
        if v is not None and r.get("Metric Name"):
            out.setdefault(r["Metric Name"], (v, r.get("Metric Unit") or ""))
    return out


def _mnemonic(text: str) -> str:
    t = re.sub(r"^\{?\s*@!?U?P\w+\s+", "", text.strip())
    return t.split(" ")[0].split(".")[0].rstrip(";")


@dataclass(frozen=True)
class Joined:
    """Samples per instruction index of a listing, and what did not join."""

    per_index: tuple[InstructionSamples | None, ...]
    unjoined_samples: int
    opcode_mismatches: int
    joined_samples: int


def join(listing: Listing, profile: KernelProfile) -> Joined:
    by_offset = {i.offset: i for i in profile.instructions}
    per = []
    mism = joined = 0
    for ins in listing.instructions:
        s = by_offset.pop(ins.offset, None)
        per.append(s)
        if s is not None:
            joined += s.samples
            if s.source and _mnemonic(s.source) != ins.base:
                mism += 1
    return Joined(tuple(per), sum(s.samples for s in by_offset.values()), mism, joined)


def _sum_reasons(items, reasons) -> dict:
    out = dict.fromkeys(reasons, 0)
    for s in items:
        if s is not None:
            for k, v in s.by_reason.items():
                out[k] = out.get(k, 0) + v
    return out


def _beyond_noise(a: int, b: int) -> bool:
    return abs(b - a) > NOISE_SIGMAS * math.sqrt(max(a + b, 1))


def compare(base: Listing, var: Listing, pa: KernelProfile, pb: KernelProfile, top: int = 15) -> dict:
    """The attribution for one baseline/variant pair (no timing: see ``group_record``)."""
    ja, jb = join(base, pa), join(var, pb)
    reasons = tuple(dict.fromkeys([*pa.reasons, *pb.reasons]))
    ra, rb = _sum_reasons(ja.per_index, reasons), _sum_reasons(jb.per_index, reasons)
    rows = align(base, var)
    changes = []
    flagged = 0
    for r in rows:
        sa = ja.per_index[r.a] if r.a is not None else None
        sb = jb.per_index[r.b] if r.b is not None else None
        a, b = (sa.samples if sa else 0), (sb.samples if sb else 0)
        if _beyond_noise(a, b):
            flagged += 1
        if a or b:
            deltas = {k: (sb.by_reason.get(k, 0) if sb else 0) - (sa.by_reason.get(k, 0) if sa else 0)
                      for k in reasons}
            main = max(deltas, key=lambda k: abs(deltas[k])) if deltas else None
            changes.append({"kind": r.kind, "offset_baseline": base.instructions[r.a].offset if r.a is not None
                            else None, "offset_variant": var.instructions[r.b].offset if r.b is not None else None,
                            "text_baseline": base.instructions[r.a].text if r.a is not None else None,
                            "text_variant": var.instructions[r.b].text if r.b is not None else None,
                            "samples_baseline": a, "samples_variant": b, "delta": b - a,
                            "main_reason": main, "main_reason_delta": deltas.get(main) if main else None})
    changes.sort(key=lambda c: -abs(c["delta"]))
    la, lb = loops(base), loops(var)
    loop_recs = []
    for i, j in match_loops(base, var, rows):
        x = la[i] if i is not None else None
        y = lb[j] if j is not None else None
        sa = _sum_reasons([ja.per_index[k] for k in x.body] if x else [], reasons)
        sb = _sum_reasons([jb.per_index[k] for k in y.body] if y else [], reasons)
        sa = {k: v for k, v in sa.items() if v or sb.get(k)}
        sb = {k: sb.get(k, 0) for k in sa}
        loop_recs.append({
            "baseline_head_offset": base.instructions[x.head].offset if x else None,
            "variant_head_offset": var.instructions[y.head].offset if y else None,
            "instructions": {"baseline": len(x.body) if x else 0, "variant": len(y.body) if y else 0},
            "depth": (x or y).depth,
            "samples": {"baseline": sum(sa.values()), "variant": sum(sb.values())},
            "by_reason": {"baseline": sa, "variant": sb},
            "stall_delta": {k: sb[k] - sa[k] for k in sa if sb[k] - sa[k]},
        })
    return {
        "samples": {"baseline": pa.total_samples, "variant": pb.total_samples},
        "by_reason": {"baseline": ra, "variant": rb},
        "stall_delta": {k: rb[k] - ra[k] for k in reasons if rb[k] - ra[k]},
        "loops": loop_recs,
        "top_instructions": changes[:top],
        "checks": {
            "joined_all_samples": ja.unjoined_samples == 0 and jb.unjoined_samples == 0,
            "joined_samples": {"baseline": ja.joined_samples, "variant": jb.joined_samples},
            "unlisted_samples": {"baseline": ra.get(UNLISTED, 0), "variant": rb.get(UNLISTED, 0)},
            "unjoined_samples": {"baseline": ja.unjoined_samples, "variant": jb.unjoined_samples},
            "opcode_mismatches": {"baseline": ja.opcode_mismatches, "variant": jb.opcode_mismatches},
            "instructions_beyond_noise": flagged,
            "aligned_rows": len(rows),
            "noise_rule": f"|B-A| > {NOISE_SIGMAS:g}*sqrt(A+B) samples at one aligned instruction",
        },
    }


def group_record(kernel: str, group_id: str, baseline: str, variant: str, identical_code: bool, base: Listing,
                 var: Listing, pa: KernelProfile, pb: KernelProfile, timing: dict | None) -> dict:
    """One explain.json group entry: the comparison plus ncu's duration and the calibrated timing side by side."""
    rec = compare(base, var, pa, pb)
    da, db = pa.duration_ms, pb.duration_ms
    ca, cb = pa.metrics.get(CYCLES, (None,))[0], pb.metrics.get(CYCLES, (None,))[0]
    # > 1: the variant is faster, like the timing's ratio; from elapsed cycles (ncu prints Duration to 3 digits)
    ncu_ratio = ca / cb if ca and cb else (da / db if da and db else None)
    timed = (timing or {}).get("ratio_vs_baseline")
    cpi = "Warp Cycles Per Issued Instruction"
    verdict = (timing or {}).get("runtime_verdict")
    # only a timing shown beyond the margin has a sign worth agreeing with (equivalent/inconclusive have none)
    rec["checks"]["duration_sign_agrees"] = (None if ncu_ratio is None or timed is None
                                            or verdict not in BEYOND_MARGIN else (ncu_ratio > 1) == (timed > 1))
    return {
        "kernel": kernel, "group_id": group_id, "baseline": baseline, "variant": variant,
        "identical_code": identical_code,
        "duration_ms": {"baseline": da, "variant": db},
        "elapsed_cycles": {"baseline": ca, "variant": cb},
        "sm_frequency_ghz": {"baseline": pa.metrics.get("SM Frequency", (None,))[0],
                             "variant": pb.metrics.get("SM Frequency", (None,))[0]},
        "ncu_ratio_vs_baseline": ncu_ratio,
        "cycles_per_issued_instruction": {"baseline": pa.metrics.get(cpi, (None,))[0],
                                          "variant": pb.metrics.get(cpi, (None,))[0]},
        "timing": {k: (timing or {}).get(k) for k in ("ratio_vs_baseline", "ratio_ci_low", "ratio_ci_high",
                                                      "runtime_verdict", "q_value")},
        **rec,
    }
