"""``ptxprobe explain RUN_DIR``: profile a timed run's groups under ncu (GPU host), then attribute (anywhere).

Profiles go to ``RUN_DIR/explain/`` (cubins and ncu CSVs, with ``index.json``); the attribution
is ``RUN_DIR/explain.json``. ``--analyze-only`` redoes the attribution from what is there.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from ptxprobe import __version__
from ptxprobe.binary.sass import disassemble
from ptxprobe.core.cache import atomic_write, sha256_file
from ptxprobe.core.errors import SpecError
from ptxprobe.core.proc import run_tool
from ptxprobe.core.store import MANIFEST, RUNTIME_LOG
from ptxprobe.explain.attribution import group_record, parse_details_csv, parse_source_csv
from ptxprobe.explain.profile import NCU_SECTIONS, WARMUP_LAUNCHES, find_ncu, profile_group
from ptxprobe.gpu.device import gpu_info, require_gpu
from ptxprobe.runs.rundir import RunDir

EXPLAIN_DIR = "explain"
EXPLAIN_JSON = "explain.json"
INDEX = "index.json"


def runtime_groups(rows: list[dict]) -> dict[str, list[dict]]:
    """The name rows of each timed group (A/A copies, planted controls and SDPA left out)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("block", "names") == "names" and r.get("name_template"):
            out.setdefault(r["group_id"], []).append(r)
    return out


def choose_groups(rows: list[dict], filters: list[str], max_groups: int) -> list[str]:
    """Groups whose id contains every filter; without filters, the groups where a name changes the code."""
    groups = runtime_groups(rows)
    if filters:
        chosen = [g for g in groups if all(f in g for f in filters)]
        if not chosen:
            raise SpecError(f"no timed group matches {' and '.join(map(repr, filters))} (have: "
                            f"{', '.join(sorted(groups)[:8])}{', ...' if len(groups) > 8 else ''})")
    else:
        chosen = [g for g, rs in groups.items() if len({r.get("text_sha256") for r in rs}) > 1]
    return sorted(chosen)[:max_groups]


def profile_run(run_dir: Path, filters: list[str], max_groups: int = 4, timeout: float = 600.0) -> Path:
    """Profile the chosen groups' names under ncu; returns the explain directory."""
    rows = RunDir(run_dir).runtime_log  # the input first: a directory without GPU results says so anywhere
    if not rows:
        raise SpecError(f"{run_dir} has no {RUNTIME_LOG}: explain needs a timed run (rename-sweep --run)")
    require_gpu()
    ncu = find_ncu()
    groups = runtime_groups(rows)
    out = run_dir / EXPLAIN_DIR
    out.mkdir(exist_ok=True)
    index_path = out / INDEX
    index = json.loads(index_path.read_text()) if index_path.exists() else {"groups": {}}
    chosen = choose_groups(rows, filters, max_groups)
    kept = json.loads((out / MANIFEST).read_text()) if (out / MANIFEST).exists() else {"runs": []}
    kept.setdefault("runs", []).append(profile_manifest(ncu, chosen, filters))  # one record per explain call
    atomic_write(out / MANIFEST, json.dumps(kept, indent=1).encode())
    for gid in chosen:
        templates = [r["name_template"] for r in sorted(groups[gid], key=lambda r: not r.get("is_baseline"))]
        done = profile_group(run_dir, gid, templates, out, timeout=timeout, ncu=ncu)
        index["groups"][gid] = [asdict(p) for p in done]
        atomic_write(index_path, json.dumps(index, indent=1).encode())  # each group kept as soon as it is done
    return out


def profile_manifest(ncu: str, groups: list[str], filters: list[str]) -> dict:
    """What one call's profiles were made with: ncu (version, sha256, options), the GPU, ptxprobe, the command."""
    version = run_tool([ncu, "--version"], timeout=60)
    return {"ptxprobe_version": __version__, "command": sys.argv, "groups": groups, "filters": filters,
            "ncu": {"path": ncu, "sha256": sha256_file(ncu), "version": version.stdout.strip().splitlines()[-1:],
                    "sections": list(NCU_SECTIONS), "clock_control": "none", "warmup_launches": WARMUP_LAUNCHES},
            "gpu": gpu_info(0), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def analyze(run_dir: Path) -> dict:
    """explain.json from the kept profiles: one record per (group, renamed variant)."""
    rd = RunDir(run_dir)
    if not rd.has(f"{EXPLAIN_DIR}/{INDEX}"):
        raise SpecError(f"{run_dir} has no {EXPLAIN_DIR}/{INDEX}: run `ptxprobe explain {run_dir}` on a GPU host "
                        "with ncu first")
    index = rd.json(f"{EXPLAIN_DIR}/{INDEX}")
    rows = runtime_groups(rd.runtime_log)
    records = []
    for gid, profiled in index["groups"].items():
        by_template = {r["name_template"]: r for r in rows.get(gid, [])}
        base_p = profiled[0]
        base_listing, base_prof = _load(rd, base_p)
        base_row = by_template.get(base_p["template"], {})
        for p in profiled[1:]:
            listing, prof = _load(rd, p)
            row = by_template.get(p["template"])
            identical = row is not None and row.get("text_sha256") == base_row.get("text_sha256")
            records.append(group_record(base_row.get("kernel", gid), gid, base_p["name"], p["name"], identical,
                                        base_listing, listing, base_prof, prof, row))
    doc = {"groups": records}
    atomic_write(run_dir / EXPLAIN_JSON, json.dumps(doc, indent=1, default=str).encode())
    return doc


def _load(rd: RunDir, p: dict):
    """One profiled name's listing and ncu profile (its CSVs plain or gzip-compressed)."""
    listing = disassemble(rd.bytes(f"{EXPLAIN_DIR}/{p['cubin']}"))[p["name"]]
    prof = parse_source_csv(rd.text(f"{EXPLAIN_DIR}/{p['source_csv']}"))
    details = parse_details_csv(rd.text(f"{EXPLAIN_DIR}/{p['details_csv']}"))
    return listing, replace(prof, metrics=details)
