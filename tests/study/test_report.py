"""The report of the study's committed GPU runs (no GPU here: their rows are committed): the runtime table, names
not timed for identical code, the speed answer first on the terminal and in the HTML (also in a headless browser at
1400 px), and a capture directory's sweep with its program A/B. (The report of a fresh sweep: tests/test_report.py.)"""

from __future__ import annotations

import json
import re
import struct
import subprocess

import pytest

from experiments.analysis import static_runs as analysis
from ptxprobe.cli import main
from ptxprobe.reports import html as report
from ptxprobe.runs.rundir import RunDir
from tests.test_report import CHROMIUM, needs_chromium

pytestmark = pytest.mark.study


def test_report_of_a_gpu_run_has_the_runtime_table(tmp_path):
    run = analysis.results_dir("2026-12-02-h200-user-kernels")
    out = report.build_report(run, tmp_path / "rep")
    timed = out["runtime"]
    assert len(timed) == 32  # 8 groups x (3 names + the A/A control)
    sgemm = [r for r in timed if r["name"] == "cutlass_sgemm" and r["problem"] == "m=4096,n=4096,k=4096"]
    assert {r["runtime_verdict_vs_floor"] for r in sgemm} == {"faster"}
    index = (tmp_path / "rep" / "index.html").read_text()
    assert "GPU runs: NVIDIA H200" in index and 'class="r-faster"' in index and "GB/s" not in index
    assert json.loads((tmp_path / "rep" / "runtime.json").read_text()) == json.loads(json.dumps(timed, default=str))


def test_report_of_a_run_with_untimed_identical_code_names(tmp_path):
    """Rows not timed because their machine code is the baseline's render as such (they have no ratio)."""
    out = report.build_report(analysis.results_dir("2026-12-03-h200-interleaved-fast"), tmp_path / "rep")
    untimed = [r for r in out["runtime"] if r["runtime_verdict"] == "identical-code"]
    assert untimed and all(r["ratio_vs_baseline"] is None for r in untimed)
    index = (tmp_path / "rep" / "index.html").read_text()
    assert index.count("not timed: the baseline&#39;s machine code") + index.count(
        "not timed: the baseline's machine code") == len(untimed)
    assert 'class="r-identical-code"' in index


GPU_RUN = "2026-12-03-h200-defaults"  # 48 groups: cutlass_/xutlass_ vs the baseline name, A/A pairs, planted slowdowns
PAGE_WIDTH = 1400


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory):
    rd = RunDir(analysis.results_dir(GPU_RUN))
    out = tmp_path_factory.mktemp("gpu") / "report"
    report.build_report(rd.path, out, sass=False)
    renamed = rd.manifest["experiment"]["names"][1:]
    compared = [r for r in rd.runtime_rows() if r["label"] in renamed]  # one mark each, timed or identical code
    return out / "index.html", compared


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def _forest_marks(html: str) -> list[str]:
    svg = re.search(r'<svg id="forest".*?</svg>', html, re.S)
    return re.findall(r'<g class="mark f-([a-z_-]+)"', svg.group(0)) if svg else []


def test_report_of_a_gpu_run_answers_the_speed_question_first(gpu_report):
    index_path, compared = gpu_report
    html = index_path.read_text()
    assert _sections(html)[:3] == ["speed", "static", "variants-section"]
    marks = _forest_marks(html)
    assert len(compared) == 96 and len(marks) == len(compared)
    assert sorted(marks) == sorted(r["runtime_verdict"] for r in compared)
    assert html.count('class="aa-band"') == 48 and html.count('class="eq-band"') == 1  # A/A per group, ±margin once
    calibration = re.search(r'<div id="calibration">(.*?)</div>', html, re.S).group(1)
    assert "{" not in calibration and "0.0208333" not in calibration and "0.005'" not in calibration
    assert "A/A false positives 1 of 48 (2.1 %; at most 5 % allowed)" in calibration
    assert "0.5 % slower found in 16 of 16 groups (at least 95 % required)" in calibration
    assert "bitwise equal to the baseline in 48 of 48" in html  # the numerics beside the plot
    # a committed run has no cubins: said once, no empty SASS columns
    assert html.count("No SASS listings") == 1 and "<th>SASS</th>" not in html


@needs_chromium
def test_gpu_report_in_headless_chromium_at_1400px(gpu_report, tmp_path):
    index_path, compared = gpu_report
    probe = index_path.with_name("probe.html")  # the page plus a line that writes its layout width into the DOM
    probe.write_text(index_path.read_text().replace(
        "</body>", '<script>document.body.dataset.scrollWidth = document.documentElement.scrollWidth;</script></body>'))
    window = f"--window-size={PAGE_WIDTH},900"
    dom = subprocess.run([*CHROMIUM, f"--user-data-dir={tmp_path / 'p1'}", window, "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    width = int(re.search(r'data-scroll-width="(\d+)"', dom.stdout).group(1))
    assert width <= PAGE_WIDTH, f"the page is {width} px wide at {PAGE_WIDTH} px: it scrolls sideways"
    assert _sections(dom.stdout)[0] == "speed" and len(_forest_marks(dom.stdout)) == len(compared)
    shot = tmp_path / "gpu-report.png"
    subprocess.run([*CHROMIUM, f"--user-data-dir={tmp_path / 'p2'}", window, f"--screenshot={shot}",
                    index_path.as_uri()], capture_output=True, timeout=120)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert struct.unpack(">II", png[16:24]) == (PAGE_WIDTH, 900)


def test_report_of_a_capture_directory_has_its_sweep_and_the_program_ab(tmp_path, capsys, monkeypatch):
    """``capture --run`` keeps its sweep in sweep/ and the A/B in ab/: report reads both, the A/B's verdicts
    derived again from the recorded runs (the 3-round run reads as too few rounds, the 8-round one does not)."""
    monkeypatch.setenv("COLUMNS", "120")
    eight = analysis.results_dir("2026-12-03-h200-capture-tutorial-8rounds")
    assert main(["report", str(eight), "-o", str(tmp_path / "eight"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    arms = {r["arm"]: r for r in doc["program_ab"]["comparisons"]}
    assert set(arms) == {"trigger", "control", "aa"} and all(r["rounds"] == 8 for r in arms.values())
    assert not doc["program_ab"]["calibration_failed"] and doc["records"]
    index = (tmp_path / "eight" / "index.html").read_text()
    assert 'id="program-ab"' in index and f"{arms['trigger']['ratio']:.4f}" in index
    three = analysis.results_dir("2026-12-03-h200-capture-tutorial")
    assert main(["report", str(three), "-o", str(tmp_path / "three")]) == 0
    out = capsys.readouterr().out
    assert "too_few_runs" in out and "too few paired rounds to calibrate (3)" in out
    assert "Does the name" in (tmp_path / "three" / "index.html").read_text()


DEFAULTS_RUN = "2026-12-04-h200-defaults"  # calibration failed over 48 groups; cutlass_ +4.6 % at N=16384


def test_report_of_a_gpu_run_answers_speed_first_on_the_terminal_and_in_the_html(tmp_path, monkeypatch, capsys):
    """The one-screen answer of a GPU run: the calibration in words, each name's ratio, interval and verdict per
    kernel, problem and ptxas (the largest changes), then the static table. In the HTML the calibration verdict stands
    beside the first tallies, above the plot; the GPU table orders problem sizes by value."""
    monkeypatch.setenv("COLUMNS", "120")
    out = tmp_path / "rep"
    assert main(["report", str(analysis.results_dir(DEFAULTS_RUN)), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("GPU calibration FAILED over 48 groups") and len(lines) <= 50
    assert text.index("does the name change speed?") < text.index("does the name matter?")
    assert "N=16384  12.4.131  +4.64 % [+4.56, +4.75] faster" in text and "slower" in text
    assert "the 6 largest of 24 groups where a name is faster or slower" in " ".join(text.split())
    html = (out / "index.html").read_text()
    head = html.index("GPU calibration FAILED over 48 groups")
    assert html.index('id="speed"') < head < html.index('class="tallies"') < html.index('<svg id="forest"')
    table = html[html.index('<table id="runtime"'):]
    first = re.findall(r"<td>(N=\d+)</td><td>([\d.]+)</td>", table)
    kernel_sizes = [n for n, ptxas in dict.fromkeys(first) if ptxas == "12.4.131"][:3]
    assert kernel_sizes == ["N=1024", "N=4096", "N=16384"]
