"""The HTML report: built from a real sweep, opened in a real headless browser. (Reports of the study's committed GPU
and capture runs: tests/study/test_report.py.)"""

from __future__ import annotations

import json
import shutil
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
    monkeypatch.setattr(sweep._SweepState, "_submit_variants", interrupted)
    assert main(argv) == 130
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["counts"]["interrupted"] is True
    capsys.readouterr()
    assert main(["report", "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is this a ptxprobe run directory" not in err
    assert "run: the run has no results yet (it was interrupted before any variant was assembled)" in err
    assert err.endswith("again (it keeps what is done): ptxprobe " + " ".join(argv))
    assert not (tmp_path / "run" / "report").exists()


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
