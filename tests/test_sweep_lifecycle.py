"""A sweep's life as a user lives it: Ctrl-C, two sweeps at once, inputs edited in place, directories that
do not mix, retries of hangs, a damaged log, and the installed wheel run from anywhere."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptxprobe.core.processes import alive, descendants, proc_argv
from ptxprobe.toolchain.tools import triton_ptxas
from tests.conftest import write_script
from tests.test_rename import NVCC_STYLE

pytestmark = pytest.mark.e2e

MARK = "61.4321"  # the fake ptxas' sleep: how the test tells its hung ptxas from the sweep's other processes


def _cli(*argv, cwd, env=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "ptxprobe.cli", *argv], cwd=cwd, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _hanging_ptxas(tmp_path: Path) -> Path:
    """Answers --version and ptxprobe's capability probe at once, then hangs on every real assembly."""
    return write_script(tmp_path / "ptxas-hang", f"""
case "$1" in --version) echo "Cuda compilation tools, release 12.8, V12.8.93"; exit 0;; esac
case "$*" in *probe.ptx*) echo "ptxas fatal : Unsupported .version 99.9; current version is '8.7'" >&2; exit 1;; esac
exec sleep {MARK}
""")


def _sleepers(root: int) -> set[tuple[int, str]]:
    """The hung fake ptxas processes (pid, start time) below ``root``: this test's own tree only."""
    return {(pid, start) for pid, start in descendants({root}) if proc_argv(pid)[:2] == ["sleep", MARK]}


def test_ctrl_c_stops_within_a_second_kills_every_ptxas_and_keeps_what_finished(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    fake = _hanging_ptxas(tmp_path)
    env = {"PTXPROBE_CACHE": str(tmp_path / "cache")}
    p = _cli("rename-sweep", "-q", "--no-run", "--ptx", str(ptx), "-s", f"ptxas=triton,{fake}", "-s", "repeat=2",
             "-j", "2", "-o", str(tmp_path / "out"), cwd=tmp_path, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_sleepers(p.pid)) < 2 and time.monotonic() < deadline:  # both workers are inside a hung ptxas
        time.sleep(0.1)
    assert len(_sleepers(p.pid)) >= 2, "the fake ptxas never started"
    time.sleep(1.0)  # the real ptxas variants finish meanwhile
    hung = _sleepers(p.pid)  # found through the sweep's process tree: once it is gone, by pid and start time
    t = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t
    assert p.returncode == 130, err
    assert took < 5, f"took {took:.1f}s to stop"
    said = " ".join(err.split())  # a note: on stderr, stdout holds the answer alone
    assert "run again to resume" not in out
    done = re.search(r"interrupted: (\d+) of (\d+) done.*; run again to resume", said)
    assert done and 0 < int(done[1]) < int(done[2]), out  # what finished, of how much, and what to do
    named = re.findall(r"(/\S+/(?:results\.parquet|variants\.jsonl|manifest\.json))", said)
    assert all(Path(f).exists() for f in named), named  # only files that exist are named
    end = time.monotonic() + 2
    while alive(hung) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(hung), "a ptxas process survived the interrupt"
    assert "Traceback" not in err
    rows = [json.loads(x) for x in (tmp_path / "out" / "variants.jsonl").read_text().splitlines()]
    triton_version = triton_ptxas("sm_90a").version  # the real ptxas beside the fake: Triton's own
    assert rows and all(r["ptxas_version"] == triton_version and r["status"] == "ok" for r in rows)
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["counts"]["interrupted"] is True
    # resume with the real ptxas only: what finished is not redone, the rest is
    r = subprocess.run([sys.executable, "-m", "ptxprobe.cli", "rename-sweep", "-q", "--no-run", "--json", "--ptx",
                        str(ptx), "-s", "repeat=2", "-o", str(tmp_path / "out")], cwd=tmp_path, capture_output=True,
                       text=True, env={**os.environ, **env}, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    after = [json.loads(x) for x in (tmp_path / "out" / "variants.jsonl").read_text().splitlines()]
    redone = {x["variant_id"] for x in after[len(rows):]} & {x["variant_id"] for x in rows}
    assert not redone
    assert len(json.loads(r.stdout)["summary"]) == 3  # every name of the plan is there


def test_a_second_sweep_into_a_directory_in_use_is_refused(tmp_path):
    from ptxprobe.cli import main
    from ptxprobe.core.store import lock_dir

    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    out = tmp_path / "out"
    out.mkdir()
    with lock_dir(out):
        r = subprocess.run([sys.executable, "-m", "ptxprobe.cli", "rename-sweep", "-q", "--no-run", "--ptx", str(ptx),
                            "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "in use by another ptxprobe run" in r.stderr
    assert main(["rename-sweep", "-q", "--no-run", "--ptx", str(ptx), "-o", str(out), "-s", "repeat=1"]) in (0, 1)


def test_two_sweeps_sharing_one_cache_both_end_correct(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    env = {"PTXPROBE_CACHE": str(tmp_path / "shared-cache")}
    argv = ["rename-sweep", "-q", "--no-run", "--json", "--ptx", str(ptx), "-s", "archs=sm_80,sm_90a,sm_100a,sm_120a",
            "-s", "repeat=3", "-s", "max_repeat=0", "-j", "1"]
    procs = [_cli(*argv, "-o", str(tmp_path / f"out{i}"), cwd=tmp_path, env=env) for i in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode in (0, 1), err
    rows = [{r["variant_id"]: (r["status"], r["code_sha256"]) for r in
             (json.loads(x) for x in (tmp_path / f"out{i}" / "results.jsonl").read_text().splitlines())}
            for i in range(2)]
    assert rows[0] == rows[1] and len(rows[0]) == 4 * 3 * 3
    assert {s for s, _ in rows[0].values()} == {"ok"}


def test_an_input_edited_in_place_is_redone_and_an_unchanged_one_reused(tmp_path):
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep

    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    exp = experiment_from_dict({"name": "edit", "kernels": [], "ptx_files": [str(ptx)], "repeat": 2,
                                "names": ["{base}", "cutlass_{base}"]})
    first = run_sweep(exp, tmp_path / "out", jobs=2, progress=False)
    assert first.ran == 4
    again = run_sweep(exp, tmp_path / "out", jobs=2, progress=False)
    assert again.ran == 0 and again.skipped == 4
    ptx.write_text(NVCC_STYLE.replace("shl.b32 \t%r2, %r1, 2;", "shl.b32 \t%r2, %r1, 3;"))  # edited in place
    edited = run_sweep(exp, tmp_path / "out", jobs=2, progress=False)
    assert edited.ran == 4 and edited.skipped == 0
    assert len(edited.rows) == 4  # the old PTX's rows are not mixed into the verdicts
    new_sha = edited.rows[0]["source_ptx_sha256"]
    assert {r["source_ptx_sha256"] for r in edited.rows} == {new_sha} != {first.rows[0]["source_ptx_sha256"]}


def test_two_files_of_one_name_do_not_merge(tmp_path):
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep

    for d, shift in (("a", 2), ("b", 3)):
        (tmp_path / d).mkdir()
        text = NVCC_STYLE.replace("shl.b32 \t%r2, %r1, 2;", f"shl.b32 \t%r2, %r1, {shift};")
        (tmp_path / d / "k.ptx").write_text(text)
    exp = experiment_from_dict({"name": "two", "kernels": [], "repeat": 1, "names": ["{base}", "cutlass_{base}"],
                                "ptx_files": [str(tmp_path / "a" / "k.ptx"), str(tmp_path / "b" / "k.ptx")]})
    out = run_sweep(exp, tmp_path / "out", jobs=2, progress=False)
    assert {r["kernel"] for r in out.rows} == {str(tmp_path / "a" / "k.ptx"), str(tmp_path / "b" / "k.ptx")}
    assert len({r["source_ptx_sha256"] for r in out.rows}) == 2


def test_directories_do_not_mix_experiments(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    base = [sys.executable, "-m", "ptxprobe.cli", "rename-sweep", "-q", "--no-run", "-s", "repeat=1"]
    r = subprocess.run([*base, "--ptx", str(ptx)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "runs" / "user-k" / "results.jsonl").exists()  # named after its source, not runs/default
    other = tmp_path / "other.ptx"
    other.write_text(NVCC_STYLE.replace("my_kernel", "other_kernel").replace("_Z9other", "_Z12other"))
    r = subprocess.run([*base, "--ptx", str(other), "-o", str(tmp_path / "runs" / "user-k")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "holds experiment" in r.stderr and "--fresh" in r.stderr


def test_a_hang_is_retried_on_resume_and_a_damaged_log_is_refused(tmp_path):
    from ptxprobe.core.errors import PtxprobeError
    from ptxprobe.core.store import LOG
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep

    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    slow = write_script(tmp_path / "ptxas-slow", f"""
case "$1" in --version) echo "Cuda compilation tools, release 12.8, V12.8.93"; exit 0;; esac
case "$*" in *probe.ptx*) echo "current version is '8.7'" >&2; exit 1;; esac
exec sleep {MARK}
""")
    exp = experiment_from_dict({"name": "hang", "kernels": [], "ptx_files": [str(ptx)], "repeat": 1,
                                "names": ["{base}"], "ptxas": [str(slow)]})
    first = run_sweep(exp, tmp_path / "out", jobs=1, progress=False, timeout=1.0)
    assert [r["status"] for r in first.rows] == ["timeout"] and "timed out" in first.rows[0]["error"]
    second = run_sweep(exp, tmp_path / "out", jobs=1, progress=False, timeout=1.0)
    assert second.ran == 1 and second.skipped == 0  # a hang may be the machine's fault: tried again
    log = tmp_path / "out" / LOG
    lines = log.read_text().splitlines()
    log.write_text("\n".join(["{not json", *lines]) + "\n")  # damage in the middle, not a torn tail
    with pytest.raises(PtxprobeError, match="damaged"):
        run_sweep(exp, tmp_path / "out", jobs=1, progress=False, timeout=1.0)


def _dependency_closure(requires: list[str]) -> list:
    """The installed distributions a wheel's ``Requires-Dist`` (extras left out) pulls in, transitively."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = list(requires)
    while todo:
        req = Requirement(todo.pop())
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        dist = metadata.distribution(req.name)  # not installed here: PackageNotFoundError, a loud failure
        assert dist.version in req.specifier, f"{req.name} {dist.version} installed, the wheel needs {req}"
        seen[key] = dist
        todo += dist.requires or []
    return list(seen.values())


def _site_of(dists: list, into: Path) -> Path:
    """A directory holding (as links) just the files of ``dists``: what a fresh install of them would hold."""
    into.mkdir()
    for dist in dists:
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            src = Path(dist.locate_file(top))
            if src.exists() and not (into / top).exists():
                (into / top).symlink_to(src)
    return into


def test_the_wheel_installs_without_torch_and_sweeps_from_anywhere(tmp_path, built_wheel):
    """The built wheel, installed into a fresh venv beside only the packages its metadata names (and theirs, taken
    from this machine's installs instead of the index: nothing is downloaded), runs the default command from a
    directory outside the checkout; torch is not among them."""
    import email
    import zipfile

    wheel = built_wheel
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(n.startswith("kernels/") for n in names) and any(n.startswith("ptxprobe_kernels/") for n in names)
    assert "ptxprobe/experiments/default.toml" in names
    meta = email.message_from_bytes(zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))))
    deps = _dependency_closure(meta.get_all("Requires-Dist") or [])
    assert "torch" not in {d.metadata["Name"].lower() for d in deps}  # torch is not a dependency of the static tool

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=600)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies.pth").write_text(f"{_site_of(deps, tmp_path / 'deps')}\n")  # a path line: no .pth run
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import importlib.util as u, ptxprobe, ptxprobe_kernels; "
            "print(u.find_spec('torch'), ptxprobe.__file__, ptxprobe_kernels.__file__)")
    probe = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    spec, *files = probe.stdout.split()
    assert spec == "None", probe.stderr  # torch is not importable there
    assert all(f.startswith(str(venv)) for f in files), files  # the wheel's code, not this checkout's
    work = tmp_path / "anywhere"
    work.mkdir()
    r = subprocess.run([str(venv / "bin" / "ptxprobe"), "rename-sweep", "-q", "-s", "kernels=attention",
                        "-s", "dtypes=fp16", "-s", "causal=false", "-s", "archs=sm_90a"], cwd=work, capture_output=True,
                       text=True, timeout=900, env={**env, "PTXPROBE_CACHE": str(tmp_path / "cache")})
    assert r.returncode in (0, 1), r.stderr
    assert "does the name matter?" in r.stdout
    assert (work / "runs" / "default" / "results.parquet").exists()


def test_a_narrower_rerun_into_a_run_directory_is_refused_and_a_wider_one_grows_it(tmp_path):
    """Results and manifest describe the sweep that ran; a re-run that drops values would describe fewer variants
    than the run's log holds, so it is refused (and changes nothing); more values resume and grow it."""
    from ptxprobe.cli import main
    from tests.ptx_text import AXPY_PTX

    ptx, out = tmp_path / "axpy.ptx", tmp_path / "run"
    ptx.write_text(AXPY_PTX)
    sweep = ["rename-sweep", "-q", "--no-run", "--ptx", str(ptx), "-s", "repeat=1", "-o", str(out)]
    assert main([*sweep, "-s", "archs=sm_90a,sm_100a"]) in (0, 1)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main([*sweep, "-s", "archs=sm_90a"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert main([*sweep, "-s", "archs=sm_90a,sm_100a,sm_120a"]) in (0, 1)


def test_a_runs_files_share_one_mode(tmp_path):
    """manifest.json and results.jsonl were 0600 (mkstemp's mode), the others 0644: one mode, the umask's."""
    import stat

    from ptxprobe.cli import main
    from tests.ptx_text import AXPY_PTX

    (tmp_path / "k.ptx").write_text(AXPY_PTX)
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        assert main(["rename-sweep", "-q", "--no-run", "--ptx", str(tmp_path / "k.ptx"), "-s",
                     "names={base},cutlass_{base}", "-o", str(out)]) in (0, 1)
    finally:
        os.umask(old)
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in out.iterdir() if f.is_file()}
    assert {"manifest.json", "results.jsonl"} <= set(modes) and set(modes.values()) == {0o644}, modes


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sweep_without_the_cache_leaves_nothing_in_the_temporary_folder(tmp_path, jobs):
    """--no-cache still needs each cubin as a file (cuobjdump reads it): they go to one scratch folder per process,
    removed at its exit, pool workers included (seen leaking one folder per cubin, 1389 after one test run)."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    p = _cli("rename-sweep", "-q", "--no-run", "--no-cache", "--ptx", str(ptx), "-s", "repeat=1", "-s", "archs=sm_90a",
             "-j", jobs, "-o", str(tmp_path / "out"), cwd=tmp_path,
             env={"TMPDIR": str(scratch), "PTXPROBE_CACHE": str(tmp_path / "cache")})
    out, err = p.communicate(timeout=240)
    assert p.returncode in (0, 1), err
    rows = [json.loads(ln) for ln in (tmp_path / "out" / "variants.jsonl").read_text().splitlines()]
    assert len(rows) >= 3 and all(r["status"] == "ok" for r in rows)  # cubins were made and read
    remembered = {"tool-identity", "ptxas-capabilities", "ptxas-options", "registry-index"}  # as --help says
    assert {p.name for p in (tmp_path / "cache").iterdir()} <= remembered
    assert sorted(os.listdir(scratch)) == []
