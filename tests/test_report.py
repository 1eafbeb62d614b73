"""The HTML report: built from a real sweep, opened in a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from ptxprobe.cli import main
from ptxprobe.reports import html as report
from ptxprobe.static.sweep import run_sweep
from tests.conftest import make_experiment

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    exp = make_experiment(name="report-test")
    run_sweep(exp, run, jobs=2, progress=False)
    assert main(["report", str(run), "--sass"]) == 0  # the SASS diff pages are built on request
    return run / "report"


def test_report_files_and_json(report_dir):
    index = (report_dir / "index.html").read_text()
    assert "cutlass_attention" in index and "xutlass_attention" in index
    recs = json.loads((report_dir / "report.json").read_text())
    by = {(r["arch"], r["name"]): r for r in recs}
    assert by["sm_100a", "cutlass_attention"]["sass_verdict"] in ("different_code", "scheduling_only")
    assert by["sm_90a", "xutlass_attention"]["sass_verdict"] == "identical"
    page = by["sm_100a", "cutlass_attention"]["page"]
    html = (report_dir / page).read_text()
    assert "Side by side" in html and 'class="changed"' in html
    assert "http://" not in index and "https://" not in html  # self-contained
    # the answer comes first: the pivot, then the verdict heatmap, then the variant table
    assert index.index("Does the name matter?") < index.index('id="heatmap"') < index.index('id="variants"')
    assert 'class="h-differs' in index  # the cutlass_ name changes code on both targets of the test sweep
    assert 'id="speed"' not in index and 'id="forest"' not in index  # a static-only run: the static answer first


CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None,
                                    reason="chromium not installed (.ci/run installs it)")


@needs_chromium
def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    recs = json.loads((report_dir / "report.json").read_text())
    page = next(r["page"] for r in recs if r.get("page"))
    for name, must in (("index.html", ["cutlass_attention", "differs"]), (page, ["Side by side", "Loops"])):
        out = subprocess.run([*CHROMIUM, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                              (report_dir / name).as_uri()], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        dom = out.stdout
        for m in must:
            assert m in dom, (name, m)
        assert "<table" in dom
    shot = tmp_path / "index.png"
    subprocess.run([*CHROMIUM, f"--user-data-dir={tmp_path / 'profile2'}", f"--screenshot={shot}",
                    "--window-size=1400,900", (report_dir / "index.html").as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000


def test_report_on_a_directory_without_results(tmp_path):
    from ptxprobe.core.errors import PtxprobeError

    with pytest.raises(PtxprobeError, match="no static results"):
        report.build_report(tmp_path)


def test_report_refuses_a_benchmark_output_and_says_what_its_manifest_holds(tmp_path, capsys):
    """A directory a benchmark wrote (a manifest, no variant log): exit 2, one line naming what it holds, up to the
    manifest's first ';', cut at a word."""
    what = "time to the first answer for a user's Triton kernel on one arch (a goal of thirty seconds on two cores)"
    (tmp_path / "manifest.json").write_text(json.dumps({"what": what + "; the record is first_answer.json"}))
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no static results" in err and "its manifest: time to the first" in err
    assert "the record is" not in err and err.endswith(" …)")


def test_report_of_a_gpu_run_has_the_runtime_table(tmp_path):
    from experiments.analysis import static_runs as analysis

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
    from experiments.analysis import static_runs as analysis

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
    from experiments.analysis import static_runs as analysis
    from ptxprobe.runs.rundir import RunDir

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
    from experiments.analysis import static_runs as analysis

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


@pytest.fixture
def user_run(tmp_path, monkeypatch):
    """A user's PTX swept into a run directory (a second or so)."""
    from tests.ptx_text import AXPY_PTX

    (tmp_path / "kern.ptx").write_text(AXPY_PTX)
    monkeypatch.chdir(tmp_path)
    assert main(["rename-sweep", "--ptx", "kern.ptx", "-s", "archs=sm_90a", "-s", "repeat=1", "-s", "max_repeat=0",
                 "-q", "-o", "run"]) in (0, 1)
    return tmp_path / "run"


def test_a_full_disk_names_the_file_and_leaves_no_part_of_a_report(user_run, monkeypatch, capsys):
    """ENOSPC half-way through index.html (simulated in the writer): exit 3, one line naming the file; a new report
    directory is not left behind, and an earlier report stays whole."""
    import errno
    from pathlib import Path

    real = Path.write_text

    def disk_full(self, data, *args, **kwargs):
        if self.name == "index.html":
            real(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    new, old = user_run.parent / "new", user_run.parent / "old"
    assert main(["report", str(user_run), "-o", str(old), "-q"]) == 0
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    monkeypatch.setattr(Path, "write_text", disk_full)
    capsys.readouterr()
    for out in (new, old):
        assert main(["report", str(user_run), "-o", str(out), "-q"]) == 3
        err = capsys.readouterr().err.strip()
        assert err.splitlines() == [f"ptxprobe: DiskFull: cannot write {out / 'index.html'}: no space left on the "
                                    "device (free some, then run again)"]
    assert not new.exists()
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before  # nothing beside it either
    assert not list(user_run.parent.glob(".new.*")) and not list(user_run.parent.glob(".old.*"))


def test_a_report_replaces_an_earlier_one_whole_or_leaves_it_whole(user_run, monkeypatch):
    """Re-running a report into its folder leaves none of the earlier report's files (a SASS diff the new one does
    not write would mislead); when moving the new one in fails, the earlier report is back, whole. A folder of the
    user's own files keeps them, the report's files beside them."""
    import os

    out = user_run.parent / "rep"
    assert main(["report", str(user_run), "-o", str(out), "-q"]) == 0
    (out / "stale-sass.html").write_text("an earlier report's file")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = os.replace

    def refuse_the_new(src, dst):
        if str(src).endswith(".part") and Path(dst) == out:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", refuse_the_new)
    assert main(["report", str(user_run), "-o", str(out), "-q"]) in (2, 3)  # said, in one line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the earlier report, whole
    monkeypatch.undo()
    assert main(["report", str(user_run), "-o", str(out), "-q"]) == 0
    assert not (out / "stale-sass.html").exists() and (out / "index.html").is_file()
    assert not [p for p in user_run.parent.iterdir() if p.name.startswith(".rep.")]
    mine = user_run.parent / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    assert main(["report", str(user_run), "-o", str(mine), "-q"]) == 0
    assert (mine / "notes.txt").read_text() == "my notes" and (mine / "index.html").is_file()


def test_ctrl_c_during_report_leaves_nothing_half_made(user_run, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "speed_answer", interrupted)
    out = user_run.parent / "rep"
    assert main(["report", str(user_run), "-o", str(out), "-q"]) == 130
    assert not out.exists() and not (user_run / "report").exists()
    assert main(["report", str(user_run), "-q"]) == 130
    assert not (user_run / "report").exists() and not list(user_run.glob(".report.*"))


def test_a_run_interrupted_before_any_assembly_is_said_to_have_no_results_yet(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the kernels are still being compiled: the run directory has its manifest and no rows. report
    says that, and how to resume it (the command that made it), not 'is this a ptxprobe run directory?'."""
    import sys

    from ptxprobe.static import sweep
    from tests.ptx_text import AXPY_PTX

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    (tmp_path / "kern.ptx").write_text(AXPY_PTX)
    monkeypatch.chdir(tmp_path)
    argv = ["rename-sweep", "--ptx", "kern.ptx", "-s", "archs=sm_90a", "-q", "-o", "run"]
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/ptxprobe", *argv])
    monkeypatch.setattr(sweep._Run, "_submit_variants", interrupted)
    assert main(argv) == 130
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["counts"]["interrupted"] is True
    capsys.readouterr()
    assert main(["report", "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is this a ptxprobe run directory" not in err
    assert "run: the run has no results yet (it was interrupted before any variant was assembled)" in err
    assert err.endswith("again (it keeps what is done): ptxprobe " + " ".join(argv))
    assert not (tmp_path / "run" / "report").exists()


DEFAULTS_RUN = "2026-12-04-h200-defaults"  # calibration failed over 48 groups; cutlass_ +4.6 % at N=16384


def test_report_of_a_gpu_run_answers_speed_first_on_the_terminal_and_in_the_html(tmp_path, monkeypatch, capsys):
    """The one-screen answer of a GPU run: the calibration in words, each name's ratio, interval and verdict per
    kernel, problem and ptxas (the largest changes), then the static table. In the HTML the calibration verdict stands
    beside the first tallies, above the plot; the GPU table orders problem sizes by value."""
    from experiments.analysis import static_runs as analysis

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


def test_the_answer_is_grouped_by_library_module_with_counts():
    """A library's kernels come in modules: the report's answer has a heading per module with how many of its
    kernels a name changes, and each row reads as people read the kernel (its whole label in the title)."""
    from ptxprobe.reports.html import answer_groups

    def row(kernel, matters):
        return {"kernel": kernel, "arch": "sm_90a", "ptxas_version": "13.0.88", "names": {}, "name_matters": matters}

    a = "x.so:x.1.sm_80.ptx:_Z7saxpy_tIfLi4EEvPT_S0_"
    b = "x.so:x.1.sm_80.ptx:_Z7saxpy_tIdLi2EEvPT_S0_"
    c = "x.so:x.2.sm_80.ptx:vadd"
    groups = answer_groups([row(a, True), row(b, False), row(c, False)])
    assert [(g["source"], g["kernels"], g["changed"]) for g in groups] == [
        ("x.so:x.1.sm_80.ptx:", 2, 1), ("x.so:x.2.sm_80.ptx:", 1, 0)]
    assert [r["shown"] for r in groups[0]["rows"]] == ["saxpy_t<float, 4>", "saxpy_t<double, 2>"]
    one = answer_groups([row("attention/fp16/d128/full/m128n64w8s3", True)])
    assert len(one) == 1 and one[0]["source"] == ""  # one place: no heading
