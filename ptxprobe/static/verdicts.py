"""Static verdicts: does a name change the code beyond ptxas's own run-to-run spread?

Everything here is pure: raw rows in, derived rows or summary records out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from ptxprobe.ptx.rename import module_wide
from ptxprobe.toolchain.tools import arch_order

# differences that survive ptxas's own spread ("differs"; committed results before it said
# "differs_deterministic" or "differs_beyond_noise"), or that were seen once on a side
DIFFERS = ("differs", "differs_deterministic", "differs_beyond_noise", "differs_unrepeated")
NOT_APPLICABLE = "option_unsupported"
SAME_CODE = "machine_code_sha256"  # the row column every "same machine code" decision reads (binary.cubin defines it)
SAME_CODE_V1 = "machine_code_v1_sha256"  # rows of version 2 on keep the version-1 hash, to meet rows recorded under it
CODE_VERSION = "machine_code_version"  # absent: version 1 (runs recorded before the shared alignment was hashed)


def comparable_code(rows: list[dict]) -> list[dict]:
    """Rows under one definition of "the same machine code": where rows recorded under version 1 sit beside newer
    ones (a sweep resumed across an upgrade), the newer rows are compared on their version-1 hash; else as given."""
    old = any(SAME_CODE in r and CODE_VERSION not in r for r in rows if r.get("status") == "ok")
    if not old:
        return rows
    return [{**r, SAME_CODE: r[SAME_CODE_V1]} if r.get(CODE_VERSION) and r.get(SAME_CODE_V1) else r for r in rows]
FAILED_STATUSES = ("failed", "crashed", "timeout", "unsupported_ptx", "bad_cubin", "tool_mismatch", "worker_lost")


def static_verdict(base: Counter, var: Counter) -> tuple[str, float | None]:
    """Compare the multisets of outputs (code hashes) of baseline and variant runs.

    The confidence of a difference is 1 - u**n: u is the Good-Turing estimate (add-one) of
    how much of the baseline's output distribution the baseline runs have not yet shown, n
    the variant's run count: the chance that n draws from the baseline's own distribution
    would all have missed everything the baseline showed.

    The verdict's name does not flip with the number of runs once there are two per side: disjoint
    output sets are ``differs`` whether or not ptxas varied (``baseline_distinct_outputs`` and
    ``distinct_outputs`` say whether it did), and ``verdict_confidence`` says how sure;
    ``differs_unrepeated`` means one run on a side, so nothing is known of ptxas's spread.
    """
    if not base or not var:
        return "", None
    b, v = set(base), set(var)
    n_b, n_v = sum(base.values()), sum(var.values())
    if b == v:
        return ("identical" if len(b) == 1 else "differs_within_noise"), None
    if b & v:
        return "differs_within_noise", None
    singletons = sum(1 for c in base.values() if c == 1)
    unseen = (singletons + 1) / (n_b + 1)
    confidence = 1.0 - unseen**n_v
    if min(n_b, n_v) < 2:
        return "differs_unrepeated", confidence  # one run on a side: nothing is known about ptxas's own spread
    return "differs", confidence


def group_key(r: dict) -> tuple:
    return (r["kernel"], r["arch"], r["ptxas_sha256"], r["ptxas_flags"])


def variant_of(r: dict) -> str:
    """Which variant of its group a row is: its name, or its name template where a module-wide template gives the
    entry the baseline's own name (the rest of the module respelled: another text, compared with the baseline)."""
    if r["name"] == r["baseline_name"] and module_wide(r.get("name_template") or ""):
        return r["name_template"]
    return r["name"]


def variant_label(r: dict) -> str:
    """The row's entry name as people read which variant it is: a module-wide one says so."""
    return r["name"] + (" (whole module respelled)" if variant_of(r) != r["name"] else "")


def derive(rows: list[dict]) -> list[dict]:
    """Add baseline comparisons and verdicts to raw rows (pure: rows in, new rows out)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[group_key(r)].append(r)
    out = []
    for members in groups.values():
        by_name: dict[str, list[dict]] = defaultdict(list)
        for r in members:
            by_name[variant_of(r)].append(r)
        baseline = members[0]["baseline_name"]
        base_rows = [r for r in by_name.get(baseline, []) if r["status"] == "ok"]
        base_code = Counter(r[SAME_CODE] for r in base_rows)
        base_text = {r["text_sha256"] for r in base_rows}
        base_regs = sorted({r["registers"] for r in base_rows if r["registers"] is not None})
        base_cap = sorted({r["capmerc_bytes"] for r in base_rows if r["capmerc_bytes"] is not None})
        for name, rs in by_name.items():
            ok = [r for r in rs if r["status"] == "ok"]
            code = Counter(r[SAME_CODE] for r in ok)
            verdict, conf = ("baseline", None) if name == baseline else static_verdict(base_code, code)
            if not ok:  # an option this ptxas lacks is not applicable there, not a failure
                verdict = NOT_APPLICABLE if all(r["status"] == "unsupported_option" for r in rs) else "failed"
            for r in rs:
                d = dict(r)
                d["is_baseline"] = name == baseline
                d["n_runs"] = len(ok)
                d["distinct_outputs"] = len(code)
                d["baseline_distinct_outputs"] = len(base_code)
                usable = r["status"] == "ok"
                d["same_text_as_baseline"] = (r["text_sha256"] in base_text) if usable and base_text else None
                d["same_code_as_baseline"] = (r[SAME_CODE] in base_code) if usable and base_code else None
                d["verdict"] = verdict
                d["verdict_confidence"] = conf
                d["baseline_registers"] = base_regs[0] if len(base_regs) == 1 else None
                d["baseline_capmerc_bytes"] = base_cap[0] if len(base_cap) == 1 else None
                out.append(d)
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """One record per (kernel, arch, ptxas, flags, name): the verdict and its key deltas; baseline first."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["kernel"], r["arch"], r["ptxas_version"], r["ptxas_flags"], variant_of(r))].append(r)
    out = []
    for (kernel, arch, ver, flags, _), rs in groups.items():
        name = rs[0]["name"]
        ok = [r for r in rs if r["status"] == "ok"]
        regs = sorted({r["registers"] for r in ok if r["registers"] is not None})
        caps = sorted({r["capmerc_bytes"] for r in ok if r["capmerc_bytes"] is not None})
        spills = sorted({(r["spill_store_bytes"] or 0) + (r["spill_load_bytes"] or 0) for r in ok})
        instructions = sorted({r["n_instructions"] for r in ok if r.get("n_instructions") is not None})
        errors = [r.get("error") for r in rs if r["status"] != "ok" and r.get("error")]
        out.append(
            {
                "kernel": kernel, "arch": arch, "ptxas_version": ver, "ptxas_flags": flags, "name": name,
                "name_template": rs[0].get("name_template"),
                "is_baseline": bool(rs[0].get("is_baseline")), "runs": len(rs), "ok": len(ok),
                "statuses": dict(Counter(r["status"] for r in rs)),
                "distinct_outputs": len({r[SAME_CODE] for r in ok}),
                "registers": regs, "baseline_registers": rs[0].get("baseline_registers"),
                "capmerc_bytes": caps, "baseline_capmerc_bytes": rs[0].get("baseline_capmerc_bytes"),
                "spill_bytes": spills, "instructions": instructions, "verdict": rs[0].get("verdict", ""),
                "verdict_confidence": rs[0].get("verdict_confidence"),
                "error": errors[0] if errors else None,
            }
        )
    out.sort(key=lambda s: (s["kernel"], s["arch"], s["ptxas_version"], s["ptxas_flags"], not s["is_baseline"],
                            s["name"]))
    return out


def failures(rows: list[dict]) -> list[dict]:
    """Rows whose assembly did not give a usable cubin."""
    return [r for r in rows if r["status"] in FAILED_STATUSES]


def _one(values: list) -> object:
    return values[0] if len(values) == 1 else None


def pivot(summary: list[dict], templates: list[str], interrupted: bool = False) -> list[dict]:
    """The answer first: one record per (kernel, arch, ptxas, flags) with each renamed template's verdict,
    its register delta and capmerc ratio against the baseline, whether it was compared (and if not, why), and
    the row's ``answer`` (``ANSWERS``)."""
    cells: dict[tuple, dict] = {}
    for s in summary:
        key = (s["kernel"], s["arch"], s["ptxas_version"], s["ptxas_flags"])
        rec = cells.setdefault(key, {"kernel": s["kernel"], "arch": s["arch"], "ptxas_version": s["ptxas_version"],
                                     "ptxas_flags": s["ptxas_flags"], "names": {}})
        if s["is_baseline"]:
            rec["baseline_name"] = s["name"]
            rec["baseline_statuses"] = s["statuses"]
            rec["baseline_sizes"] = (_one(s.get("spill_bytes", [])), _one(s.get("instructions", [])))
            continue
        regs, base_regs = _one(s["registers"]), s["baseline_registers"]
        cap, base_cap = _one(s["capmerc_bytes"]), s["baseline_capmerc_bytes"]
        rec["names"][s["name_template"] or s["name"]] = {
            "name": s["name"],
            "verdict": s["verdict"],
            "confidence": s["verdict_confidence"],
            "delta_registers": (regs - base_regs) if regs is not None and base_regs is not None else None,
            "capmerc_ratio": (cap / base_cap) if cap and base_cap else None,
            "statuses": s["statuses"],
            "sizes": (_one(s.get("spill_bytes", [])), _one(s.get("instructions", []))),
        }
    out = list(cells.values())
    for rec in out:
        base_sizes = rec.pop("baseline_sizes", (None, None))
        for cell in rec["names"].values():
            cell["not_compared"] = why_not_compared(cell.pop("statuses"), cell["verdict"],
                                                    rec.get("baseline_statuses", {}))
            cell["kind"] = difference_kind(cell, cell.pop("sizes"), base_sizes)
        rec.pop("baseline_statuses", None)
        rec["name_matters"] = any(v["verdict"] in DIFFERS for v in rec["names"].values())
        rec["answer"], rec["not_compared"] = row_answer(rec, len(templates), interrupted)
    return sorted(out, key=lambda r: (r["kernel"], arch_order(r["arch"]), r["ptxas_version"], r["ptxas_flags"]))


# a row's answer to "does the name matter?": a row (or cell) that was not compared never reads "no"
YES, NO, NOT_COMPARED, PARTLY = "YES", "no", "not compared", "partly compared"
ANSWERS = (YES, NO, NOT_COMPARED, PARTLY)
ONLY_ONE_NAME = "only one name"
INTERRUPTED_EARLY = "interrupted before a renamed variant was assembled"


def _status_words(statuses: dict) -> str:
    bad = [s for s in statuses if s != "ok"]
    if "timeout" in bad:
        return "ptxas timed out"
    if bad == ["unsupported_option"]:
        return "option not supported"
    return "ptxas failed" if bad == ["failed"] or not bad else f"ptxas {bad[0].replace('_', ' ')}"


def why_not_compared(statuses: dict, verdict: str, baseline_statuses: dict) -> str | None:
    """Why a renamed name was not compared with the baseline (None when it was): its own assembly, the
    baseline's, or an option this ptxas lacks."""
    if verdict == NOT_APPLICABLE:
        return "option not supported"
    if verdict == "failed":
        return _status_words(statuses)
    if not baseline_statuses.get("ok"):
        return "baseline: " + _status_words(baseline_statuses) if baseline_statuses else "no baseline"
    if not verdict:
        return "not assembled"
    return None


def difference_kind(cell: dict, sizes: tuple, base_sizes: tuple) -> str | None:
    """What a DIFFERS is, in a word (None for any other verdict): ``registers``, ``spills``, ``instructions`` (a
    count that moved), ``capmerc``, or ``schedule`` (the same sizes and count, other code: order, registers
    assigned, control codes). ``diff`` shows which instructions."""
    if cell["verdict"] not in DIFFERS:
        return None
    (spill, count), (base_spill, base_count) = sizes, base_sizes
    if cell.get("delta_registers"):
        return "registers"
    if spill is not None and base_spill is not None and spill != base_spill:
        return "spills"
    if count is not None and base_count is not None and count != base_count:
        return "instructions"
    if cell.get("capmerc_ratio") and abs(cell["capmerc_ratio"] - 1) > 0.005:
        return "capmerc"
    return "schedule"


def row_answer(rec: dict, n_templates: int, interrupted: bool = False) -> tuple[str, str | None]:
    """(answer, why not compared): YES when a name changes the code beyond ptxas's spread, "no" only when every
    renamed name was compared and none does."""
    cells = list(rec["names"].values())
    if rec["name_matters"]:
        return YES, None
    if not cells and n_templates >= 2 and interrupted:  # stopped before any renamed name's row, not one name
        return NOT_COMPARED, INTERRUPTED_EARLY
    if n_templates < 2 or not cells:
        return NOT_COMPARED, ONLY_ONE_NAME
    missing = [c["not_compared"] for c in cells if c["not_compared"]]
    if not missing:
        return NO, None
    return (NOT_COMPARED if len(missing) == len(cells) else PARTLY), missing[0]


MANY_KERNELS = 20  # past this many kernels the answer is summarised first (the whole table on request)


@dataclass(frozen=True)
class TargetSummary:
    """One target's answer over many kernels: how many the name changes, leaves alone or could not compare, and
    the largest changes with the kernels they are in."""

    arch: str
    ptxas_version: str
    ptxas_flags: str
    kernels: int
    changed: int
    unchanged: int
    not_compared: int
    largest_register_change: int | None
    largest_register_kernel: str | None
    largest_capmerc_ratio: float | None
    largest_capmerc_kernel: str | None


def summarize_targets(answer: list[dict]) -> list[TargetSummary]:
    """Per (arch, ptxas, flags) of a pivot (``pivot``): the counts and the largest changes."""
    groups: dict[tuple, list[dict]] = {}
    for p in answer:
        groups.setdefault((p["arch"], p["ptxas_version"], p["ptxas_flags"]), []).append(p)
    out = []
    for (arch, ptxas, flags), rows in groups.items():
        regs = [(v["delta_registers"], p["kernel"]) for p in rows for v in p["names"].values()
                if v.get("delta_registers") and v["verdict"] in DIFFERS]
        caps = [(v["capmerc_ratio"], p["kernel"]) for p in rows for v in p["names"].values()
                if v.get("capmerc_ratio") and v["verdict"] in DIFFERS]
        reg = max(regs, key=lambda t: abs(t[0]), default=(None, None))
        cap = max(caps, key=lambda t: abs(t[0] - 1), default=(None, None))
        out.append(TargetSummary(arch, ptxas, flags, len(rows), sum(p["answer"] == YES for p in rows),
                                 sum(p["answer"] == NO for p in rows),
                                 sum(p["answer"] not in (YES, NO) for p in rows), reg[0], reg[1], cap[0], cap[1]))
    return out
