"""A user's own mistakes, said in the words of whatever rejected them (issue 28, item 1): beyond the 52 cases of
tests/test_cli_errors.py, each case here asserts the exit code (2 bad input, 3 tool or environment), exactly one line
on stderr (no traceback), the rejecting tool's reason where there is one (Triton's "power of 2", nvcc's
``expected a ";"``), and that nothing was lost: every rename-sweep case re-runs into an existing run directory whose
files must be byte for byte the same afterwards. Under ``--json`` the one line is also one JSON document on stdout.

The cases run in this process (``main([...])``): the code paths are the command's own, and the table takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from ptxprobe.cli import main
from tests.ptx_text import AXPY_PTX

pytestmark = pytest.mark.integration

USAGE, TOOL = 2, 3

KERNEL = """import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = offs < {bound}
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def not_jitted(x_ptr):
    pass
"""
SIGNATURE = 'signature = {x_ptr = "*fp32", y_ptr = "*fp32", n = "i32", BLOCK_N = "constexpr"}\n'
DT_SIGNATURE = SIGNATURE.replace('"constexpr"}', '"constexpr", OUT = "constexpr"}')
GOOD_SPEC = SIGNATURE + "constexprs = {BLOCK_N = 256}\n"
SPECS = {  # spec file -> its text (each a mistake but the first)
    "good": GOOD_SPEC,
    "block1000": SIGNATURE + "constexprs = {BLOCK_N = 1000}\n",
    "warps_word": GOOD_SPEC + 'num_warps = "four"\n',
    "warps3": GOOD_SPEC + "num_warps = 3\n",
    "stages": GOOD_SPEC + "num_stages = -1\n",
    "maxnreg": GOOD_SPEC + "maxnreg = 7\n",
    "sig_list": 'signature = ["*fp32", "*fp32", "i32", "constexpr"]\nconstexprs = {BLOCK_N = 256}\n',
    "int32": SIGNATURE.replace('"i32"', '"int32"') + "constexprs = {BLOCK_N = 256}\n",
    "sig_number": SIGNATURE.replace('"i32"', "32") + "constexprs = {BLOCK_N = 256}\n",
    "constexpr_list": SIGNATURE + "constexprs = [256]\n",
    "no_constexpr": SIGNATURE,
    "div_string": GOOD_SPEC + 'divisible_by_16 = "x_ptr"\n',
    "div_unknown": GOOD_SPEC + 'divisible_by_16 = ["z_ptr"]\n',
    "name_number": GOOD_SPEC + "name = 5\n",
    "unknown_key": GOOD_SPEC + "num_warp = 4\n",
    "wrong_names": SIGNATURE.replace("y_ptr", "out_ptr") + "constexprs = {BLOCK_N = 256}\n",
    "bad_toml": "signature = {x_ptr = \n",
    "block_str": SIGNATURE + 'constexprs = {BLOCK_N = "256"}\n',
    "block_float": SIGNATURE + "constexprs = {BLOCK_N = 256.0}\n",
    "block_bool": SIGNATURE + "constexprs = {BLOCK_N = true}\n",
    "block_dtype": SIGNATURE + 'constexprs = {BLOCK_N = {dtype = "fp16"}}\n',
    "dt_word": DT_SIGNATURE + 'constexprs = {BLOCK_N = 256, OUT = "float17"}\n',
    "dt_number": DT_SIGNATURE + "constexprs = {BLOCK_N = 256, OUT = 16}\n",
}
SPECS_JSON = {  # the same mistakes in a JSON spec
    "block_list": {"signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK_N": "constexpr"},
                   "constexprs": {"BLOCK_N": [64]}},
}
EXPERIMENTS = {
    "sweeps": '[experiment]\nname = "x"\n[sweeps]\nkernels = ["attention"]\n',
    "run_typo": '[experiment]\nname = "x"\n[sweep]\nkernels = ["attention"]\n[run]\nseq_len = [1024]\n',
    "timing_typo": '[experiment]\nname = "x"\n[sweep]\nkernels = ["attention"]\n[run.timing]\nround = 3\n',
    "sweep_scalar": 'sweep = 3\n[experiment]\nname = "x"\n',
    "meta_typo": '[experiment]\nnmae = "x"\n[sweep]\nkernels = ["attention"]\n',
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "k1000.py").write_text(KERNEL.format(bound="n"))
    (d / "undef.py").write_text(KERNEL.format(bound="nope"))
    (d / "dt.py").write_text(KERNEL.format(bound="n").replace("BLOCK_N: tl.constexpr", "BLOCK_N: tl.constexpr, "
                             "OUT: tl.constexpr").replace("mask=m), mask=m)", "mask=m).to(OUT), mask=m)"))
    (d / "raises.py").write_text("raise RuntimeError('this module needs a GPU at import')\n")
    for name, text in SPECS.items():
        (d / f"{name}.toml").write_text(text)
    for name, doc in SPECS_JSON.items():
        (d / f"{name}.json").write_text(json.dumps(doc))
    for name, text in EXPERIMENTS.items():
        (d / f"{name}.toml").write_text(text)
    (d / "syn.cu").write_text('__global__ void k(float* x) {\n  x[0] = 1\n}\n')
    (d / "inc.cu").write_text('#include "nothere.h"\n__global__ void k(float* x) { x[0] = 1; }\n')
    (d / "eof.cu").write_text("__global__ void k(float* x) { x[0] = 1;\n")  # a brace never closed
    (d / "pperr.cu").write_text('#error "needs CUDA 14"\n__global__ void k(float* x) { x[0] = 1; }\n')
    (d / "host.cu").write_text("int twice(int x) { return 2 * x; }\n")
    (d / "ok.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (d / "k.ptx").write_text(AXPY_PTX)
    (d / "bom.ptx").write_bytes(b"\xef\xbb\xbf" + AXPY_PTX.encode())
    (d / "empty.ptx").write_text("")
    (d / "binary.ptx").write_bytes(bytes(range(256)) * 8)
    (d / "a_dir").mkdir()
    (d / "a_file").write_text("x")
    (d / "notrun").mkdir()
    good = d / "good"
    assert main(["rename-sweep", "-q", "--no-run", "--ptx", str(d / "k.ptx"), "-o", str(good)]) in (0, 1)
    # the user's own kernels, swept once as written, then edited into ones that do not compile: the re-run into
    # the same run directory is refused with the compiler's words and must leave that directory as it was
    (d / "edited.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (d / "edited.py").write_text(KERNEL.format(bound="n"))
    for argv in (["--cu", str(d / "edited.cu"), "-o", str(d / "cu_run")],
                 ["--triton", f"{d / 'edited.py'}:copy_kernel", "--spec", str(d / "good.toml"), "-o",
                  str(d / "triton_run")]):
        assert main(["rename-sweep", "-q", "--no-run", "-s", "archs=sm_90a", *argv]) in (0, 1)
    (d / "edited.cu").write_text('__global__ void k(float* x) {\n  x[0] = 1\n}\n')
    (d / "edited.py").write_text(KERNEL.format(bound="n").replace("tl.arange(0, BLOCK_N)", "tl.arange(0, 1000)"))
    trunc = d / "trunc"
    trunc.mkdir()
    for f in good.iterdir():
        if f.is_file():
            (trunc / f.name).write_bytes(f.read_bytes())
    (trunc / "manifest.json").write_bytes((good / "manifest.json").read_bytes()[:100])
    return d


def _cases(d: Path) -> list[tuple[list[str], int, str]]:
    """(argv, exit code, words the one line must contain)."""
    good = str(d / "good")
    sweep = ["rename-sweep", "-q", "--no-run", "-o", good]  # refused before the run directory is touched
    new = ["rename-sweep", "-q", "--no-run", "-o", str(d / "new")]  # refused once built: no directory is left
    one_arch = ["rename-sweep", "-q", "--no-run", "-s", "archs=sm_90a"]

    def triton(module: str, spec: str, fn: str = "copy_kernel") -> list[str]:
        return [*sweep, "--triton", f"{d / module}:{fn}", "--spec", str(d / f"{spec}.toml")]

    k = str(d / "k.ptx")
    return [
        # a user's Triton kernel that does not compile: Triton's reason and the source line
        (triton("k1000.py", "block1000"), USAGE, "arange's range must be a power of 2"),
        # Triton builds sm_90a for compute capability 9.0: sm_90 is refused with the target it does build
        ([*triton("k1000.py", "good"), "-s", "archs=sm_90"], USAGE, "ask for -s archs=sm_90a"),
        (triton("k1000.py", "block1000"), USAGE, "k1000.py:7: offs = tl.program_id(0) * BLOCK_N"),
        (triton("undef.py", "good"), USAGE, "undef.py:8: m = offs < nope"),
        (triton("undef.py", "good"), USAGE, "nope is not defined"),
        # the spec: the key, the value, what is expected
        (triton("k1000.py", "warps_word"), USAGE, "num_warps = 'four': expected a power of 2"),
        (triton("k1000.py", "warps3"), USAGE, "num_warps = 3: expected a power of 2"),
        (triton("k1000.py", "stages"), USAGE, "num_stages = -1: expected an integer"),
        (triton("k1000.py", "maxnreg"), USAGE, "maxnreg = 7: expected an integer from 24"),
        (triton("k1000.py", "sig_list"), USAGE, "signature = ['*fp32'"),
        (triton("k1000.py", "int32"), USAGE, "signature n = 'int32': expected a Triton type"),
        (triton("k1000.py", "sig_number"), USAGE, "signature n = 32"),
        (triton("k1000.py", "constexpr_list"), USAGE, "constexprs = [256]: expected a table"),
        (triton("k1000.py", "no_constexpr"), USAGE, "no value for constexpr parameter(s) ['BLOCK_N']"),
        (triton("k1000.py", "div_string"), USAGE, "divisible_by_16 = 'x_ptr': expected a list"),
        (triton("k1000.py", "div_unknown"), USAGE, "divisible_by_16 names unknown parameters ['z_ptr']"),
        (triton("k1000.py", "name_number"), USAGE, "name = 5: expected a string"),
        (triton("k1000.py", "unknown_key"), USAGE, "unknown keys ['num_warp']"),
        (triton("k1000.py", "wrong_names"), USAGE, "do not match copy_kernel's parameters"),
        # constexpr values Triton would take and then fail on deep inside, blaming the kernel's line
        (triton("k1000.py", "block_str"), USAGE,
         "constexprs BLOCK_N = '256': expected an integer, written without quotes (BLOCK_N = 256)"),
        (triton("k1000.py", "block_float"), USAGE, "constexprs BLOCK_N = 256.0: expected an integer"),
        (triton("k1000.py", "block_bool"), USAGE, "constexprs BLOCK_N = True: expected an integer"),
        (triton("k1000.py", "block_dtype"), USAGE, "constexprs BLOCK_N = {'dtype': 'fp16'}: expected an integer"),
        ([*sweep, "--triton", f"{d / 'k1000.py'}:copy_kernel", "--spec", str(d / "block_list.json")], USAGE,
         "constexprs BLOCK_N = [64]: expected an integer (tl.arange(0, BLOCK_N) uses it)"),
        (triton("dt.py", "dt_word"), USAGE, "constexprs OUT = 'float17': expected a Triton dtype"),
        (triton("dt.py", "dt_number"), USAGE, "constexprs OUT = 16: expected a Triton dtype"),
        (triton("k1000.py", "bad_toml"), USAGE, "not valid TOML"),
        (triton("k1000.py", "missing_spec"), USAGE, "spec file not found"),
        ([*sweep, "--triton", f"{d / 'k1000.py'}:copy_kernel", "--spec", str(d / "a_dir")], USAGE, "is a directory"),
        (triton("k1000.py", "good", fn="nothing_here"), USAGE, "no triton.jit function named 'nothing_here'"),
        (triton("k1000.py", "good", fn="not_jitted"), USAGE, "no triton.jit function named 'not_jitted'"),
        (triton("raises.py", "good"), USAGE, "needs a GPU at import"),
        ([*sweep, "--triton", str(d / "k1000.py"), "--spec", str(d / "good.toml")], USAGE, "file.py:function"),
        (triton("missing.py", "good"), USAGE, "no such file"),
        # CUDA C++ that does not compile: nvcc's own first error line, with file(line)
        ([*new, "--cu", str(d / "syn.cu")], USAGE, 'syn.cu(3): error: expected a ";"'),
        ([*new, "--cu", str(d / "inc.cu")], USAGE, "nothere.h: No such file or directory"),
        ([*new, "--cu", str(d / "eof.cu")], USAGE, 'At end of source: error: expected a "}"'),
        ([*one_arch, "--ptx", k, "-o", str(d)], USAGE, "not a ptxprobe run directory and not empty"),  # its files
        ([*new, "--cu", str(d / "pperr.cu")], USAGE, 'pperr.cu:1:2: error: #error "needs CUDA 14"'),
        ([*new, "--cu", str(d / "host.cu")], USAGE, "is there a __global__ function?"),
        ([*new, "--cu", str(d / "ok.cu"), "--entry", "nope"], USAGE, "no kernel 'nope'"),
        # a kernel edited after a good run, re-run into that run: the compiler's words, the run kept as it was
        ([*one_arch, "--cu", str(d / "edited.cu"), "-o", str(d / "cu_run")], USAGE,
         'edited.cu(3): error: expected a ";"'),
        ([*one_arch, "--triton", f"{d / 'edited.py'}:copy_kernel", "--spec",
          str(d / "good.toml"), "-o", str(d / "triton_run")], USAGE, "edited.py:7: offs = tl.program_id(0)"),
        # PTX that is not PTX
        ([*sweep, "--ptx", str(d / "bom.ptx")], USAGE, "byte order mark"),
        ([*sweep, "--ptx", str(d / "empty.ptx")], USAGE, "the file is empty"),
        ([*sweep, "--ptx", str(d / "binary.ptx")], USAGE, "cannot read PTX"),
        ([*sweep, "--ptx", str(d / "a_dir")], USAGE, "a_dir"),
        # experiments and axes
        ([*sweep, "-e", str(d / "sweeps.toml")], USAGE, "unknown table(s) [sweeps]"),
        ([*sweep, "-e", str(d / "sweep_scalar.toml")], USAGE, "sweep = 3: expected a table"),
        ([*sweep, "-e", str(d / "meta_typo.toml")], USAGE, "[experiment] has unknown keys nmae"),
        (["rename-sweep", "-q", "--run", "-o", good, "-e", str(d / "run_typo.toml")], USAGE,
         "[run]: unknown key(s) seq_len"),
        (["rename-sweep", "-q", "--run", "-o", good, "-e", str(d / "timing_typo.toml")], USAGE,
         "[run.timing]: unknown key(s) round"),
        ([*sweep, "--ptx", k, "-s", "repeat=5", "-s", "max_repeat=2"], USAGE, "max_repeat: 2 is below repeat (5)"),
        ([*sweep, "--ptx", k, "-s", "archs=sm_90a,sm_90a"], USAGE, "archs: sm_90a given twice"),
        ([*sweep, "--ptx", k, "-s", "repeat=-3"], USAGE, "must be an integer >= 1"),
        ([*sweep, "-s", "kernels=nope"], USAGE, "nope"),
        ([*sweep, "-s", "archs=sm_90A"], USAGE, "sm_90A"),
        ([*sweep, "--ptx", k, "-s", "names={base},9lives"], USAGE, "not a valid PTX identifier"),
        ([*sweep, "--ptx", k, "-s", "names"], USAGE, "axis=value"),
        # two templates that give a kernel one name: it would be compared with itself (exit 3, nothing said)
        ([*sweep, "--ptx", k, "-s", "names={base},axpy"], USAGE,
         "names: {base} and axpy give k.ptx the same name, axpy"),
        ([*sweep, "--ptx", k, "-s", "names={base_untriggered},{base},{base_control}"], USAGE,
         "{base_untriggered} and {base} give k.ptx the same name"),
        ([*triton("k1000.py", "good"), "-s", "archs=sm_90a", "-s", "names={base},copy_kernel"], USAGE,
         "{base} and copy_kernel give"),
        # an axis set twice kept the last, an axis set to nothing was dropped: both silently
        ([*sweep, "--ptx", k, "-s", "archs=sm_90a", "-s", "archs=sm_100a"], USAGE,
         "archs: set twice (-s archs=sm_90a and -s archs=sm_100a)"),
        ([*sweep, "--ptx", k, "-s", "archs="], USAGE, "archs: -s archs= sets it to nothing"),
        ([*sweep, "--ptx", k, "-s", "ptxas=", "-s", "repeat=1"], USAGE, "ptxas: -s ptxas= sets it to nothing"),
        ([*sweep, "--ptx", k, "-s", "ptx_files=" + k], USAGE, "ptx_files: set twice"),
        # options: each refused in one line with the value and the bound
        ([*sweep, "--ptx", k, "--timeout", "0"], USAGE, "--timeout: must be more than 0 seconds, got 0"),
        ([*sweep, "--ptx", k, "--timeout", "soon"], USAGE, "expected a number of seconds"),
        ([*sweep, "--ptx", k, "-j", "0"], USAGE, "--jobs/-j: must be at least 1, got 0"),
        (["assemble", k, "--timeout", "-1"], USAGE, "must be more than 0 seconds"),
        (["diff", "--ptx", k, "--repeat", "-1"], USAGE, "--repeat: must be at least 0, got -1"),
        (["diff", k, k, "--ptx", k], USAGE, "two cubins (A B) or --ptx FILE, not both"),
        (["diff", "--ptx", k, "--kernel-b", "x"], USAGE, "--kernel-a picks the entry"),
        (["diff", "--ptx", k, "--kernel-a", "nope"], USAGE, "no entry 'nope'"),
        (["ptxas-scan", "--functions", "strstr", str(d / "no-such-ptxas")], USAGE, "no such ptxas binary"),
        (["bisect", "--repeat", "0"], USAGE, "--repeat: must be at least 1"),
        (["explain", str(d / "a_dir"), "--max-groups", "0"], USAGE, "--max-groups: must be at least 1"),
        (["capture", "--rounds", "0", "--", "true"], USAGE, "--rounds: must be at least 1"),
        # run directories and outputs
        (["report", str(d / "notrun")], USAGE, "notrun: no static results (no variant log)"),
        (["report", good, "-o", str(d / "a_file")], USAGE, "exists and is not a directory"),
        (["report", str(d / "trunc")], USAGE, "manifest.json: not valid JSON"),
        (["repro", str(d / "trunc")], USAGE, "manifest.json: not valid JSON"),
        (["emit", "-o", str(d / "a_dir")], USAGE, "a_dir"),
        # sizes: a launch shape or head dimension of nothing or less is refused, not compiled
        (["emit", "--seq-len", "-5"], USAGE, "--seq-len: must be at least 1, got -5"),
        (["emit", "--head-dim", "0"], USAGE, "--head-dim: must be at least 1, got 0"),
    ]


def _digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}


def _problems(code: int, want_code: int, err: str, words: str) -> list[str]:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    problems = []
    if code != want_code:
        problems.append(f"exit {code}, expected {want_code}")
    if "Traceback" in err or "internal error" in err:
        problems.append("not said as the user's mistake")
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    if words not in " ".join(err.split()):
        problems.append(f"lacks {words!r}")
    return problems


RUNS = ("good", "cu_run", "triton_run", "trunc")  # run directories the bad re-runs aim at


def test_every_bad_input_is_said_in_one_line_in_the_rejecting_tools_words_and_nothing_is_lost(inputs, capsys):
    before = {run: _digest(inputs / run) for run in RUNS}
    failures = []
    for argv, want, words in _cases(inputs):
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
        problems = _problems(code, want, err, words)
        if problems:
            failures.append(f"{argv[:1] + argv[5:]}: {problems}\n    {err.strip()[-300:]}")
    assert not failures, f"{len(failures)} of {len(_cases(inputs))} cases:\n" + "\n".join(failures)
    assert {run: _digest(inputs / run) for run in RUNS} == before, "a bad re-run changed an existing run directory"
    assert not (inputs / "new").exists(), "a refused sweep left a run directory behind"
    assert not (inputs / ".lock").exists() and not (inputs / "manifest.json").exists()  # nothing among its files
    assert not (inputs / "notrun" / "report").exists(), "report on a non-run directory left a report/ behind"


def test_under_json_every_error_is_one_json_document_on_stdout(inputs, capsys):
    """Item 7: the same one line, as {"error", "exit_code", "kind"}, and nothing else on stdout."""
    d = inputs
    for argv, want, words in [
        (["rename-sweep", "--json", "--no-run", "--triton", f"{d / 'k1000.py'}:copy_kernel", "--spec",
          str(d / "block1000.toml"), "-o", str(d / "good")], USAGE, "power of 2"),
        (["rename-sweep", "--json", "--no-run", "--cu", str(d / "syn.cu"), "-o", str(d / "new")], USAGE,
         'expected a ";"'),
        (["rename-sweep", "--json", "--no-run", "--ptx", str(d / "k.ptx"), "--timeout", "0"], USAGE, "--timeout"),
        (["rename-sweep", "--json", "--bogus"], USAGE, "unrecognized arguments: --bogus"),
        (["report", "--json", str(d / "trunc")], USAGE, "not valid JSON"),
    ]:
        capsys.readouterr()
        code = main(argv)
        out, err = capsys.readouterr()
        doc = json.loads(out)  # the whole of stdout
        assert code == want == doc["exit_code"], (argv, code, doc)
        assert words in doc["error"] and doc["kind"], doc
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err


def test_without_nvcc_the_message_says_where_it_looked_and_how_to_point_at_one(inputs, monkeypatch, capsys):
    from ptxprobe.toolchain import tools

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for var in tools.CUDA_ROOT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tools, "DEFAULT_CUDA", str(inputs / "a_dir"))
    monkeypatch.setattr(tools, "wheel_roots", lambda: [])  # NVIDIA's nvcc wheels (.ci/run installs them)
    assert not any(t.kind == "nvcc" for t in tools.discover(("nvcc",))), "an nvcc this test does not hide"
    code = main(["rename-sweep", "-q", "--no-run", "--cu", str(inputs / "ok.cu"), "-o", str(inputs / "new")])
    err = capsys.readouterr().err
    assert code == TOOL and "no nvcc found" in err and "$CUDA_PATH/bin" in err and "CUDA_HOME=/path/to/cuda" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.fixture
def small_disk(tmp_path):
    """A 24 KiB file system (tmpfs, root only): a sweep's log fills it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_names_the_path_exits_3_and_a_re_run_resumes(inputs, small_disk, capsys):
    out = small_disk / "run"
    argv = ["rename-sweep", "-q", "--no-run", "--ptx", str(inputs / "k.ptx"), "-o", str(out)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == TOOL and f"cannot write {out}" in err and "no space left" in err, err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")], "a half-written file was left"
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    assert main(argv) in (0, 1)  # the same command, with room: it finishes what was begun
    assert (out / "manifest.json").exists() and (out / "results.parquet").exists()


def test_an_output_on_a_read_only_file_system_says_which_and_why(inputs, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", str(ro)],
                                           capture_output=True).returncode:
        pytest.skip("needs root to mount a read-only tmpfs")
    try:
        for argv in (["report", str(inputs / "good"), "-o", str(ro / "rep")],
                     ["rename-sweep", "-q", "--no-run", "--ptx", str(inputs / "k.ptx"), "-o", str(ro / "run")]):
            code = main(argv)
            err = capsys.readouterr().err
            assert code == USAGE and f"cannot write output directory {ro}" in err and "Read-only" in err, err
    finally:
        subprocess.run(["umount", str(ro)], check=False)
