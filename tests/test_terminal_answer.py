"""The one-screen answer (``rename-sweep`` and ``report`` print it): it fits 80, 100 and 120 columns with the
verdict visible, it carries its legend, says it is static and what to do next, and a name that was not compared
never reads "no"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ptxprobe.cli import TOOL_FAILED, USAGE, main
from ptxprobe.cli.render import STATIC, legend_for, show_answer
from ptxprobe.core.display import short_names
from ptxprobe.reports.html import SASS_NOT_BUILT
from ptxprobe.runs.rundir import RunDir
from ptxprobe.static.verdicts import NO, NOT_COMPARED, ONLY_ONE_NAME, PARTLY, YES, pivot, summarize
from tests.ptx_text import AXPY_PTX

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "experiments" / "results" / "2026-12-02-cpu-default"
TEMPLATES = ["{base}", "cutlass_{base}", "xutlass_{base}"]
WIDTHS = (80, 100, 120)


def _committed_answer() -> list[dict]:
    return pivot(summarize(RunDir(COMMITTED).static_rows()), TEMPLATES)


def _rendered(answer: list[dict], templates: list[str], width: int) -> list[str]:
    con = Console(width=width, record=True, color_system=None)
    show_answer("does the name matter? 'default' -> runs/default", answer, templates, "--details", console=con)
    return con.export_text().splitlines()


def _legend_words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_answer_fits_the_terminal_with_its_verdict_and_legend(width):
    answer = _committed_answer()
    lines = _rendered(answer, TEMPLATES, width)
    too_wide = [ln for ln in lines if len(ln) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[0]!r}"
    header = next(ln for ln in lines if "kernel" in ln)
    assert "matters?" in header and "cutlass_" in header and "xutlass_" in header
    rule = next(i for i, ln in enumerate(lines) if "───" in ln)
    end = next(i for i in range(rule + 1, len(lines)) if not lines[i].strip())
    body = lines[rule + 1: end]
    rows = [ln for ln in body if ln[1:2].strip()]  # a row's first line starts with its kernel
    assert len(rows) == len(answer)  # one line per row starts with its kernel: none lost
    assert all(ln.rstrip().endswith((f" {YES}", f" {NO}")) for ln in rows)  # the verdict, never cut
    text = _legend_words(lines)
    assert legend_for(width) in [ln.strip() for ln in lines] and STATIC in text and "next: --details" in text


def test_kernel_names_are_shortened_the_same_way_and_stay_apart():
    labels = sorted({p["kernel"] for p in _committed_answer()})
    for width in (20, 24, 30):
        short = short_names(labels, width)
        assert all(len(s) <= width for s in short.values())
        assert len(set(short.values())) == len(labels), short  # two kernels never share a short name
    assert short_names(labels, 200) == {k: k for k in labels}


def _summary(name: str, template: str, statuses: dict, verdict: str, baseline: bool = False) -> dict:
    return {"kernel": "k.ptx", "arch": "sm_90a", "ptxas_version": "12.8.93", "ptxas_flags": "-lineinfo",
            "name": name, "name_template": template, "is_baseline": baseline, "statuses": statuses,
            "registers": [40], "baseline_registers": 40, "capmerc_bytes": [], "baseline_capmerc_bytes": None,
            "verdict": verdict, "verdict_confidence": None}


@pytest.mark.parametrize(("cells", "answer", "why"), [
    ([("failed", {"failed": 2}), ("failed", {"failed": 2})], NOT_COMPARED, "ptxas failed"),
    ([("failed", {"timeout": 2}), ("failed", {"timeout": 2})], NOT_COMPARED, "ptxas timed out"),
    ([("identical", {"ok": 2}), ("failed", {"crashed": 2})], PARTLY, "ptxas crashed"),
    ([("option_unsupported", {"unsupported_option": 2})] * 2, NOT_COMPARED, "option not supported"),
    ([("identical", {"ok": 2}), ("differs_within_noise", {"ok": 2})], NO, None),
    ([("differs", {"ok": 2}), ("failed", {"failed": 2})], YES, None),
])
def test_a_name_not_compared_says_why_and_never_reads_no(cells, answer, why):
    summary = [_summary("k", "{base}", {"ok": 2}, "baseline", baseline=True)]
    summary += [_summary(t.replace("{base}", "k"), t, st, v) for t, (v, st) in zip(TEMPLATES[1:], cells, strict=True)]
    (p,) = pivot(summary, TEMPLATES)
    assert (p["answer"], p["not_compared"]) == (answer, why)
    row = next(ln for ln in _rendered([p], TEMPLATES, 80) if ln.startswith(" k.ptx"))
    if why:
        assert "not compared" in row and not row.rstrip().endswith(f" {NO}")


def test_a_failed_baseline_leaves_its_names_not_compared():
    summary = [_summary("k", "{base}", {"failed": 2}, "failed", baseline=True),
               _summary("cutlass_k", "cutlass_{base}", {"ok": 2}, "")]
    (p,) = pivot(summary, TEMPLATES[:2])
    assert p["answer"] == NOT_COMPARED and p["names"]["cutlass_{base}"]["not_compared"] == "baseline: ptxas failed"


def test_one_template_alone_is_not_an_answer():
    (p,) = pivot([_summary("k", "{base}", {"ok": 2}, "baseline", baseline=True)], ["{base}"])
    assert (p["answer"], p["not_compared"]) == (NOT_COMPARED, ONLY_ONE_NAME)
    assert any(f"{NOT_COMPARED}: {ONLY_ONE_NAME}" in ln for ln in _rendered([p], ["{base}"], 80))


def test_a_sweep_stopped_before_any_renamed_row_says_so_not_only_one_name():
    """Ctrl-C early leaves the baseline's rows alone: that is an interruption, not a sweep of one name."""
    from ptxprobe.static.verdicts import INTERRUPTED_EARLY

    base = [_summary("k", "{base}", {"ok": 2}, "baseline", baseline=True)]
    (p,) = pivot(base, TEMPLATES, interrupted=True)
    assert (p["answer"], p["not_compared"]) == (NOT_COMPARED, INTERRUPTED_EARLY)
    (q,) = pivot(base, TEMPLATES)  # finished, yet no renamed row: the templates gave one name
    assert q["not_compared"] == ONLY_ONE_NAME


@pytest.fixture
def axpy(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXPROBE_CACHE", str(tmp_path / "cache"))
    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY_PTX)
    return ptx


@pytest.mark.parametrize("names", ["{base}", "cutlass_{base}"])
def test_a_sweep_of_one_name_is_refused_as_bad_input(axpy, tmp_path, capsys, names):
    rc = main(["rename-sweep", "--no-run", "--ptx", str(axpy), "-s", f"names={names}", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == USAGE and "nothing to compare it with" in err and f"{names} alone" in err


def test_a_sweep_whose_every_assembly_timed_out_answers_not_compared(axpy, tmp_path, capsys, monkeypatch,
                                                                    fake_ptxas):
    monkeypatch.setenv("COLUMNS", "80")
    hangs = fake_ptxas("hang")  # a real ptxas may beat a tiny timeout on a loaded machine: this one never answers
    rc = main(["rename-sweep", "--no-run", "--no-cache", "--ptx", str(axpy), "-s", "archs=sm_90a", "-s", "repeat=1",
               "-s", f"ptxas={hangs}", "--timeout", "1", "-o", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == TOOL_FAILED
    row = next(ln for ln in out.splitlines() if ln.startswith(" axpy.ptx"))
    assert "not compared:" in row and row.rstrip().endswith(NOT_COMPARED)
    assert out.count("ptxas timed out") == 2  # each renamed name says why
    assert max(len(ln) for ln in out.splitlines()) <= 80


@pytest.mark.parametrize("width", WIDTHS)
def test_report_prints_its_path_and_the_same_answer(tmp_path, capsys, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["report", str(COMMITTED), "-o", str(tmp_path / "rep")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(ln) for ln in lines) <= width
    assert (tmp_path / "rep" / "index.html").is_file()
    assert f"report:{tmp_path / 'rep' / 'index.html'}" in "".join(lines).replace(" ", "")  # wrapped or not
    text = _legend_words(lines)
    assert "matters?" in text and legend_for(width) in [ln.strip() for ln in lines] and STATIC in text
    rule = next(i for i, ln in enumerate(lines) if "───" in ln)
    end = next(i for i in range(rule + 1, len(lines)) if not lines[i].strip())
    answer = _committed_answer()
    assert sum(1 for ln in lines[rule + 1: end] if ln[1:2].strip()) == len(answer)  # a row per answer
    assert end - rule - 1 <= 2 * len(answer)  # each in one or two lines: not every variant
    recs = json.loads((tmp_path / "rep" / "report.json").read_text())
    differing = [r for r in recs if r["verdict"] == "differs"]
    assert differing and all(r.get("note") == SASS_NOT_BUILT for r in differing)  # no nvdisasm without --sass


def _synthetic_pivot(n: int) -> list[dict]:
    """n instantiations of one template on one target: every third changes by 3k registers, one not compared."""
    out = []
    for k in range(n):
        sym = f"_ZN6marlin6MarlinILi{128 * (1 + k % 2)}ELi{k}ELb{k % 2}EEEvPKi"
        changed = k % 3 == 0
        names = {"cutlass_{base}": {"verdict": "differs" if changed else "identical", "delta_registers":
                                    3 * k if changed else 0, "capmerc_ratio": None, "not_compared": None},
                 "xutlass_{base}": {"verdict": "identical", "delta_registers": 0, "capmerc_ratio": None,
                                    "not_compared": None}}
        answer = NOT_COMPARED if k == n - 1 else (YES if changed else NO)
        out.append({"kernel": f"lib.so:m.7.sm_90.ptx:{sym}", "arch": "sm_90", "ptxas_version": "13.0.88",
                    "ptxas_flags": "-lineinfo", "names": names, "name_matters": changed, "answer": answer,
                    "not_compared": "ptxas timed out" if answer == NOT_COMPARED else None})
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_many_kernels_are_summarised_first_and_told_apart_by_their_arguments(width):
    from ptxprobe.cli.render import show_summary
    from ptxprobe.static.verdicts import summarize_targets

    answer = _synthetic_pivot(30)
    (s,) = summarize_targets(answer)
    assert (s.kernels, s.changed, s.unchanged, s.not_compared) == (30, 10, 19, 1)
    assert s.largest_register_change == 81 and s.largest_register_kernel.endswith("Li27ELb1EEEvPKi")
    con = Console(width=width, record=True, color_system=None)
    show_summary("does the name matter?", answer, TEMPLATES, "--details", console=con)
    lines = con.export_text().splitlines()
    assert not [ln for ln in lines if len(ln) > width]
    text = "\n".join(lines)
    assert "(10 of 10)" in text and "+81r" in text
    import re

    shown = [m.group(1) for ln in lines if (m := re.match(r"\s*(?:\S*:)?(Marlin<[^>]*>)\s+sm_90", ln))]
    assert len(shown) == len(set(shown)) == 10, shown  # ten distinct instantiations, not ten equal shortened names


@pytest.mark.parametrize(("sizes", "kind", "shown"), [
    ({"registers": [45]}, "registers", "DIFFERS +5r"),
    ({"spill_bytes": [64]}, "spills", "DIFFERS spills"),
    ({"instructions": [120]}, "instructions", "DIFFERS instr count"),
    ({}, "schedule", "DIFFERS sched"),
])
def test_a_differs_says_what_kind_of_difference(sizes, kind, shown):
    from ptxprobe.cli.render import verdict_cell

    base = {**_summary("k", "{base}", {"ok": 2}, "baseline", baseline=True), "spill_bytes": [0],
            "instructions": [100]}
    renamed = {**_summary("cutlass_k", "cutlass_{base}", {"ok": 2}, "differs"), "spill_bytes": [0],
               "instructions": [100], **sizes}
    (p,) = pivot([base, renamed], TEMPLATES[:2])
    cell = p["names"]["cutlass_{base}"]
    assert cell["kind"] == kind and verdict_cell(cell) == shown
    quiet = {**renamed, "verdict": "differs_within_noise"}  # within ptxas's spread: no kind, not a difference
    assert pivot([base, quiet], TEMPLATES[:2])[0]["names"]["cutlass_{base}"]["kind"] is None


def test_the_speed_line_counts_a_difference_across_the_margin_apart():
    """faster/slower mean beyond the margin; a significant interval across it is neither and is not counted among
    the groups within it."""
    from rich.console import Console

    from ptxprobe.cli.render import show_speed
    from ptxprobe.reports.gpu_section import group_rows
    from ptxprobe.stats import paired as stats

    def row(kernel, ratio, low, high):
        return {"kernel": kernel, "seq_len": 1024, "run_ptxas_version": "12.8.93", "group_id": kernel,
                "label": "cutlass_{base}", "ratio_vs_baseline": ratio, "ratio_ci_low": low, "ratio_ci_high": high,
                "runtime_verdict": stats.decide(stats.Interval(ratio, low, high))}

    rows = [row("a", 1.02, 1.01, 1.03), row("b", 1.006, 1.003, 1.009), row("c", 1.0, 0.999, 1.001)]
    assert [r["runtime_verdict"] for r in rows] == [stats.FASTER, stats.STRADDLES_MARGIN, stats.EQUIVALENT]
    con = Console(record=True, width=200)
    show_speed("t", {"calibration": None, "table": group_rows(rows, ["{base}", "cutlass_{base}"]), "margin": "0.5 %",
                     "tallies": []}, ["{base}", "cutlass_{base}"], console=con)
    text = " ".join(con.export_text().split())
    assert "the 1 largest of 1 groups where a name is faster or slower (beyond ±0.5 %)" in text
    assert "in 1 a significant difference straddles the margin" in text and "1 of 3 groups within it" in text
