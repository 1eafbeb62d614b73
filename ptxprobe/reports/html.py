"""Reports over a sweep's run directory: a self-contained HTML report (jinja2, inline CSS/JS,
no network), the same data as JSON, and records for a terminal summary.

With ``sass=True``, for every renamed variant whose machine code is not the baseline's, the repeat-0 cubins of
variant and baseline are disassembled and diffed (one nvdisasm per cubin: the slow part of a report); cubins come
from the content-addressed cache by their sha256.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from textwrap import shorten

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.binary.diff import SAME, Diff, diff_files
from ptxprobe.binary.sass import Listing, disassemble
from ptxprobe.core.cache import Cache
from ptxprobe.core.display import problem_label
from ptxprobe.core.errors import PtxprobeError
from ptxprobe.explain.run import EXPLAIN_JSON
from ptxprobe.ptx.labels import readable_labels, source_of, without_source
from ptxprobe.reports.gpu_section import group_order, regime_text, speed_answer
from ptxprobe.reports.publish import ReportFiles
from ptxprobe.runs.rundir import RunDir
from ptxprobe.static.verdicts import SAME_CODE, arch_order, pivot, summarize, variant_label, variant_of
from ptxprobe.stats.regime import Regime

FOLD_AT = 8  # runs of identical instructions longer than this are folded


def breakable(label: str) -> Markup:
    """A kernel label that may wrap after each ``/`` (its parts never split)."""
    return Markup("/<wbr>").join(escape(part) for part in str(label).split("/"))


def _env() -> Environment:
    loader = PackageLoader("ptxprobe.reports", "templates")
    env = Environment(loader=loader, autoescape=select_autoescape(["html", "j2"]))
    env.filters["breakable"] = breakable
    return env


def cubin_path(cache: Cache, sha: str | None) -> Path | None:
    if not sha:
        return None
    p = cache.root / "cubin" / sha[:2] / sha / "kernel.cubin"
    return p if p.exists() else None


def load_rows(run_dir: Path | RunDir) -> list[dict]:
    """The static rows with their verdicts (derived from the variant log, whatever the run's age)."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    rows = rd.static_rows()
    if not rows:
        raise PtxprobeError(no_results(rd))
    return rows


def no_results(rd: RunDir) -> str:
    """Why a directory has no rows to report, in one line: a run not finished (interrupted before any assembly: how
    to resume it), a benchmark's output (what its manifest says it holds), or no run at all."""
    manifest = rd.manifest
    if isinstance(manifest.get("experiment"), dict):  # a run's own manifest: rename-sweep, capture or repro wrote it
        counts = manifest.get("counts") or {}
        why = ("it was interrupted before any variant was assembled" if counts.get("interrupted") else
               f"no variant was assembled; {len(counts['emit_errors'])} kernel builds failed"
               if counts.get("emit_errors") else "no variant was assembled")
        command = manifest.get("command")
        words = command if isinstance(command, list) and command else ["ptxprobe", "rename-sweep", "-o", str(rd.path)]
        if Path(str(words[0])).name == "ptxprobe":
            words = ["ptxprobe", *words[1:]]
        return (f"{rd.path}: the run has no results yet ({why}); resume it by running the command that made it "
                f"again (it keeps what is done): {shlex.join(str(w) for w in words)}")
    what = str(manifest.get("what") or "").split(";")[0]  # a benchmark's output says what it holds
    if what:
        return (f"{rd.path}: no static results (no variant log); report reads what rename-sweep, capture or repro "
                f"wrote (its manifest: {shorten(what, 100, placeholder=' …')})")
    return f"{rd.path}: no static results (no variant log); is this a ptxprobe run directory?"


def _disassemble_all(paths) -> dict:
    """path -> (CubinFacts, {kernel: Listing}); nvdisasm runs in parallel threads."""
    from concurrent.futures import ThreadPoolExecutor

    todo = sorted({str(p) for p in paths if p is not None})

    def one(path: str):
        return path, (read_cubin(Path(path).read_bytes()), disassemble(path))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(pool.map(one, todo))


def side_by_side(d: Diff, la: Listing, lb: Listing) -> list[dict]:
    """Rows for the listing, identical runs folded into chunks."""
    chunks: list[dict] = []
    run: list[dict] = []

    def cell(listing, i):
        if i is None:
            return "", ""
        ins = listing.instructions[i]
        return f"/*{ins.offset:04x}*/ {ins.text}", ins.control.compact()

    def flush():
        if run:
            chunks.append({"folded": len(run) > FOLD_AT, "rows": list(run)})
            run.clear()

    for r in d.rows:
        a, ca = cell(la, r.a)
        b, cb = cell(lb, r.b)
        row = {"kind": r.kind, "a": a, "ca": ca, "b": b, "cb": cb}
        if r.kind == SAME:
            run.append(row)
        else:
            flush()
            chunks.append({"folded": False, "rows": [row]})
    flush()
    return chunks


SASS_NOT_BUILT = "SASS not compared (report --sass)"
CUBINS_MISSING = "cubin not in cache (re-run the sweep to rebuild)"


def sass_absent(differing: int, cubins_cached: int, sass: bool) -> str | None:
    """Why the report holds no SASS listing (said once above the variants table), or None when it has them or
    nothing differs from its baseline (nothing to disassemble)."""
    if not differing or (sass and cubins_cached):
        return None
    if not cubins_cached:
        return (f"No SASS listings: the cubins of the {differing} variants whose machine code differs are not in this "
                "machine's cache (a committed run keeps their hashes, not the cubins); re-run its sweep to rebuild "
                "them, then report with --sass.")
    return (f"No SASS listings: this report was built without --sass (ptxprobe report RUN --sass disassembles the "
            f"{differing} variants whose machine code differs).")


RECORD_FIELDS = ("kernel", "arch", "ptxas_version", "name", "baseline_name", "verdict", "verdict_confidence",
                 "distinct_outputs", "baseline_distinct_outputs", "registers", "baseline_registers", "capmerc_bytes",
                 "baseline_capmerc_bytes")  # a variant's report.json record: these fields of its row, then its SASS


def first_rows(rows: list[dict]) -> dict[tuple, dict]:
    """The repeat-0 row of each (kernel, arch, ptxas, flags, name): the variant the report shows."""
    return {(r["kernel"], r["arch"], r["ptxas_sha256"], r["ptxas_flags"], variant_of(r)): r
            for r in rows if r["repeat"] == 0}


def baseline_of(first: dict[tuple, dict], key: tuple) -> dict | None:
    return first.get(key[:4] + (first[key]["baseline_name"],))


def differing(first: dict[tuple, dict]) -> set[tuple]:
    """The variants whose machine code is not the baseline's: the only ones a SASS diff can show anything for."""
    return {key for key, r in first.items() if not r.get("is_baseline") and r["status"] == "ok"
            and r.get(SAME_CODE) != (baseline_of(first, key) or {}).get(SAME_CODE)}


def variant_record(key: tuple, first: dict[tuple, dict], cache: Cache, to_diff: set[tuple], listings: dict,
                   page: str) -> tuple[dict, tuple[str, dict] | None]:
    """One variant's record, and its SASS diff page's (name, what the template draws) where its code differs and
    both cubins are at hand; the record says why there is none otherwise."""
    r, base = first[key], baseline_of(first, key)
    rec = {k: r.get(k) for k in RECORD_FIELDS} | {"name": variant_label(r)}
    pa = cubin_path(cache, base and base.get("cubin_sha256"))
    pb = cubin_path(cache, r.get("cubin_sha256"))
    if r["status"] != "ok" or not base or base["status"] != "ok":
        return rec | {"note": f"ptxas {r['status']}"}, None
    if r.get(SAME_CODE) and r.get(SAME_CODE) == base.get(SAME_CODE):
        return rec | {"sass_verdict": "identical"}, None  # the baseline's machine code: nothing to disassemble
    if key not in to_diff:
        return rec | {"note": SASS_NOT_BUILT}, None
    if pa is None or pb is None:
        return rec | {"note": CUBINS_MISSING}, None
    d = diff_files(pa, pb, r["baseline_name"], r["name"], listings)
    rec |= {"sass_verdict": d.verdict, "counts": d.counts, "diff": d.to_json(),
            "main_loop": max(d.loop_deltas, key=lambda x: x["instructions"][0] or 0, default=None)}
    if d.verdict == "identical":
        return rec, None
    la, lb = listings[str(pa)][1][r["baseline_name"]], listings[str(pb)][1][r["name"]]
    return rec | {"page": page}, (page, {"title": f"{r['name']} vs {r['baseline_name']}", "d": d.to_json(),
                                         "meta": r, "chunks": side_by_side(d, la, lb)})


def build_report(
    run_dir: str | Path, out_dir: str | Path | None = None, cache: Cache | None = None,
    notebook_html: str | None = None, sass: bool = True,
) -> dict:
    """Write index.html, report.json and (``sass``) one SASS diff page per variant whose machine code differs;
    return the records, the answer (``static.verdicts.pivot``) and its name templates."""
    run = Path(run_dir)
    out = Path(out_dir) if out_dir else run / "report"
    with ReportFiles(out) as files:  # written beside out, moved in at the end: never a part of a report
        cache = cache or Cache()
        whole = RunDir(run)
        rd = whole.static_part()  # a capture directory's sweep is in sweep/
        ab = whole.program_ab()
        rows = load_rows(rd)
        manifest = rd.manifest
        env = _env()
        first = first_rows(rows)
        differs = differing(first)  # same machine code as the baseline is identical SASS: never disassembled
        cached = sum(1 for k in differs if cubin_path(cache, first[k].get("cubin_sha256")))
        to_diff = differs if sass else set()
        listings = _disassemble_all([cubin_path(cache, first[k].get("cubin_sha256")) for k in to_diff] +
                                    [cubin_path(cache, (baseline_of(first, k) or {}).get("cubin_sha256"))
                                     for k in to_diff])
        records = []
        for key in sorted(k for k, r in first.items() if not r.get("is_baseline")):
            rec, page = variant_record(key, first, cache, to_diff, listings, f"diff-{len(records):03d}.html")
            if page:
                files.write(page[0], env.get_template("diff.html.j2").render(**page[1]))
            records.append(rec)
        timed = runtime_records(rd.runtime_log)
        templates = list(manifest.get("experiment", {}).get("names") or ["{base}", "cutlass_{base}"])
        answer = pivot(summarize(rows), templates)
        speed = speed_answer(rd, templates)
        index = env.get_template("index.html.j2").render(
            answer=answer, groups=answer_groups(answer), templates=templates,
            heat=heatmap(answer, templates[1] if len(templates) > 1 else None), speed=speed,
            sass_absent=sass_absent(len(differs), cached, sass),
            title=manifest.get("experiment", {}).get("name", run.name),
            rows=records, runtime=timed, gpu=rd.gpu or {}, manifest=manifest,
            generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), notebook=notebook_html,
            explain=explain_view(rd), program_ab=ab,
        )
        files.write("index.html", index)
        files.write("report.json", json.dumps(records, indent=1, default=str))
        if timed:
            files.write("runtime.json", json.dumps(timed, indent=1, default=str))
    return {"out_dir": str(out), "records": records, "runtime": timed, "answer": answer, "templates": templates,
            "program_ab": ab, "speed": speed}


def explain_view(run: Path | RunDir, reasons_shown: int = 6, loops_shown: int = 3) -> list[dict]:
    """explain.json as the report draws it: per group, the stall reasons (and those of its busiest loops) as
    baseline/variant bar pairs scaled to the largest, and the instructions whose samples changed most."""
    doc = (run if isinstance(run, RunDir) else RunDir(run)).json(EXPLAIN_JSON, optional=True)
    if not doc:
        return []

    def bars(by_reason: dict) -> list[dict]:
        a, b = by_reason["baseline"], by_reason["variant"]
        keys = sorted(set(a) | set(b), key=lambda k: -max(a.get(k, 0), b.get(k, 0)))[:reasons_shown]
        top = max([a.get(k, 0) for k in keys] + [b.get(k, 0) for k in keys] + [1])
        return [{"reason": k.removeprefix("stall_"), "a": a.get(k, 0), "b": b.get(k, 0),
                 "wa": 100 * a.get(k, 0) / top, "wb": 100 * b.get(k, 0) / top} for k in keys]

    out = []
    for g in doc["groups"]:
        busiest = sorted(g["loops"], key=lambda lp: -max(lp["samples"].values()))[:loops_shown]
        out.append({**{k: g[k] for k in ("group_id", "baseline", "variant", "identical_code", "duration_ms",
                                          "ncu_ratio_vs_baseline", "timing", "checks", "samples",
                                          "top_instructions")},
                    "bars": bars(g["by_reason"]),
                    "loops": [{**lp, "bars": bars(lp["by_reason"])} for lp in busiest]})
    return out


def answer_groups(answer: list[dict]) -> list[dict]:
    """The answer's rows by where their kernels come from (a library's module, a PTX or .cu file), each group with
    how many kernels the name changes; each row's kernel read as people read it (``shown``), its whole label kept
    for the title. One group without a heading where all come from one place or from the registry."""
    read = readable_labels([p["kernel"] for p in answer])
    groups: dict[str, dict] = {}
    for p in answer:
        source = source_of(p["kernel"])
        g = groups.setdefault(source, {"source": source, "rows": [], "kernels": set(), "changed": set()})
        g["rows"].append({**p, "shown": without_source(p["kernel"], read[p["kernel"]])})
        g["kernels"].add(p["kernel"])
        if p.get("name_matters"):
            g["changed"].add(p["kernel"])
    out = [{**g, "kernels": len(g["kernels"]), "changed": len(g["changed"])} for g in groups.values()]
    if len(out) == 1:
        out[0]["source"] = ""
    return out


def heatmap(answer: list[dict], template: str | None) -> dict:
    """The verdict of one renamed template as a kernel × (arch, ptxas) grid (rendered as an SVG)."""
    cols = sorted({(p["arch"], p["ptxas_version"]) for p in answer}, key=lambda c: (arch_order(c[0]), c[1]))
    kernels = sorted({p["kernel"] for p in answer})
    cells = {(p["kernel"], (p["arch"], p["ptxas_version"])): (p["names"].get(template) or {}).get("verdict", "")
             for p in answer}
    grid = [[cells.get((k, c), "") for c in cols] for k in kernels]
    return {"template": template, "cols": [f"{a} {v}" for a, v in cols], "rows": kernels, "grid": grid}


RUNTIME_FIELDS = (
    "kernel",
    "run_ptxas_version",
    "label",
    "name",
    "is_baseline",
    "tflops",
    "tflops_ci_low",
    "tflops_ci_high",
    "gbps",
    "gbps_ci_low",
    "gbps_ci_high",
    "ratio_vs_baseline",
    "ratio_ci_low",
    "ratio_ci_high",
    "runtime_verdict_vs_floor",
    "runtime_verdict",
    "q_value",
    "block",
    "noise_floor",
    "registers",
    "bitwise_equal_to_baseline",
    "max_ulp_vs_baseline",
    "rel_err_vs_reference",
    "passes_tolerance",
    "aot_matches_launch",
    "regime_text",
)


def runtime_records(rows: list[dict]) -> list[dict]:
    """One record per timed label of a GPU run (names, A/A, controls, SDPA), grouped as measured."""
    out = []
    for r in sorted(rows, key=lambda r: (*group_order(r), r["group_id"], not r.get("is_baseline"), r["label"])):
        rec = {k: r.get(k) for k in RUNTIME_FIELDS}
        rec["group_id"], rec["problem"] = r["group_id"], problem_label(r)
        rec["regime_text"] = "" if r.get("is_baseline") else regime_text(Regime.from_fields(r))
        out.append(rec)
    return out
