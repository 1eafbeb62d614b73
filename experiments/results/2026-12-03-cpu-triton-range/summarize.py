"""check.sh's logs per Triton release -> one JSON record (summary.json): tests, first error per failure, the sweep.

A failure's cause is one of: torch absent (the test's own kernel module imports torch; these venvs have none by
design), a Gluon family refused with the Triton it needs (ptxprobe saying so cleanly), a failure the reference
release has too (not a Triton matter), or "broken". A release passes when nothing is broken and its sweep ran
(exit 0 or 1, rows, no emission errors).

    python3 summarize.py OUT_DIR REFERENCE [VERSION ...] [--command TEXT] > summary.json
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

TORCH = "No module named 'torch'"
REFUSED = re.compile(r"needs Triton >=\d+\.\d+,<\d+\.\d+")


def _test_id(case) -> str:
    return f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}"


def _failed(case):
    return case.find("failure") if case.find("failure") is not None else case.find("error")


def first_error(el) -> str:
    """The first ``E`` line pytest printed (three for a regex mismatch, whose first line says nothing)."""
    lines = [ln[4:].strip() for ln in (el.text or "").splitlines() if ln.startswith("E   ") and ln[4:].strip()]
    if not lines:
        lines = (el.get("message") or "").strip().splitlines() or [""]
    return re.sub(r"\s+", " ", " | ".join(lines[:3 if lines[0].endswith("did not match.") else 1]))[:300]


def cause(blob: str, test: str, reference_failures: set[str]) -> str:
    if TORCH in blob or TORCH.replace("'", "\\'") in blob:
        return "torch absent (the test's kernel module imports torch; not a Triton matter)"
    m = REFUSED.search(blob)
    if m:
        return f"Gluon family refused: {m.group(0)}"
    if test in reference_failures:
        return "fails on the reference release too (not a Triton matter)"
    return "broken"


def sweep_rows(d: Path) -> dict:
    res = d / "results.jsonl"
    rows = [json.loads(ln) for ln in res.read_text().splitlines() if ln.strip()] if res.exists() else []
    cut = [r for r in rows if r.get("name_template") == "cutlass_{base}"]
    ctl = [r for r in rows if r.get("name_template") == "xutlass_{base}"]
    return {
        "families": sorted({str(r.get("kernel", "")).split("/")[0] for r in rows}),
        "ptxas_by_arch": {a: sorted({r["ptxas_version"] for r in rows if r["arch"] == a})
                          for a in sorted({r["arch"] for r in rows})},
        "cutlass_name_changes_code": f"{sum(not r['same_code_as_baseline'] for r in cut)} of {len(cut)}",
        "control_name_changes_code": f"{sum(not r['same_code_as_baseline'] for r in ctl)} of {len(ctl)}",
    }


def record(d: Path, reference_failures: set[str]) -> dict:
    root = ET.parse(d / "junit.xml").getroot()
    # each failing test's section of the log: its captured stderr says what ptxprobe printed
    parts = re.split(r"^_{3,} (\S+) _{3,}$", (d / "pytest.log").read_text(), flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2], strict=False))
    failures, passed, skipped = [], 0, 0
    for c in root.iter("testcase"):
        bad = _failed(c)
        if bad is not None:
            blob = (bad.get("message") or "") + (bad.text or "") + sections.get(c.get("name"), "")
            failures.append({"test": _test_id(c), "first_error": first_error(bad),
                             "cause": cause(blob, _test_id(c), reference_failures)})
        elif c.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    rc, secs = (int(x) for x in (d / "sweep.rc").read_text().split())
    man = json.loads((d / "manifest.json").read_text()) if (d / "manifest.json").exists() else {}
    counts = man.get("counts", {})
    ptxas = {name: {"version": ver, "sha256": sha} for name, sha, ver in re.findall(
        r"^(ptxas\S*) ([0-9a-f]{64}) .*?V(\d+\.\d+\.\d+)", (d / "ptxas.txt").read_text(), re.M)}
    sweep_ok = rc in (0, 1) and counts.get("rows", 0) > 0 and not counts.get("emit_errors")
    err = [ln for ln in (d / "sweep.err").read_text().splitlines() if ln.startswith("ptxprobe:")]
    return {
        "triton": (d / "triton.txt").read_text().strip(),
        "bundled_ptxas": ptxas,
        "tests": {"passed": passed, "failed": len(failures), "skipped": skipped, "failures": failures},
        "sweep": {"exit_code": rc, "rows": counts.get("rows"), "by_status": counts.get("by_status"),
                  "emit_errors": counts.get("emit_errors"), "wall_s": secs, "manifest_triton": man.get("triton"),
                  **sweep_rows(d), "error": err[0] if err else None},
        "gluon": "refused" if any(f["cause"].startswith("Gluon") for f in failures) else "ok",
        "passed": sweep_ok and not any(f["cause"] == "broken" for f in failures),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("versions", nargs="+", help="the reference release first")
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    ref = args.versions[0]
    ref_root = ET.parse(args.out / ref / "junit.xml").getroot()
    reference_failures = {_test_id(c) for c in ref_root.iter("testcase") if _failed(c) is not None}
    versions = {v: record(args.out / v, reference_failures) for v in args.versions}
    print(json.dumps({
        "question": "Which Triton releases does ptxprobe's static path (registered Triton and Gluon kernels, a "
                    "user's Triton kernel, a real sweep) work with, without torch?",
        "command": args.command,
        "host": {"platform": platform.platform(), "node": platform.node(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d"),
        "reference": ref,
        "versions": dict(sorted(versions.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")))),
    }, indent=1))


if __name__ == "__main__":
    main()
