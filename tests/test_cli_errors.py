"""Bad input, as a user types it: a documented exit code and a one-line message, never a traceback.

A case that runs a tool or a compiler (ptxas, Triton) runs the real command in a fresh process (an abort there
would show here, not be hidden by an in-process call); a case refused before any of them runs goes through the
same ``main`` in this process, which is what the command's process would run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_rename import NVCC_STYLE

pytestmark = pytest.mark.e2e

USAGE, TOOL = 2, 3


def ptxprobe(*argv: str, cwd=None, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
    """The real command in a fresh process (run from a scratch directory unless told otherwise)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        return subprocess.run([sys.executable, "-m", "ptxprobe.cli", *argv], capture_output=True, text=True,
                              cwd=cwd or scratch, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    (d / "k.ptx").write_text(NVCC_STYLE)
    (d / "bogus.ptx").write_text(NVCC_STYLE.replace("ld.global.f32", "ld.globl.bogus.f32"))
    (d / "not_a_cubin").write_text("hello")
    (d / "a_dir").mkdir()
    (d / "a_file").write_text("x")
    (d / "bad.toml").write_text("[sweep\nnames=")
    (d / "bad_design.toml").write_text('[experiment]\nname = "x"\n[sweep]\nkernels = ["attention"]\n'
                                       '[run.timing]\ndesign = "abab"\n')
    (d / "k.py").write_text("import triton\n\n@triton.jit\ndef k(x_ptr, dtype: triton.language.constexpr):\n"
                            "    pass\n")
    (d / "bad_dtype.toml").write_text('signature = {x_ptr = "*fp32", dtype = "constexpr"}\n'
                                      'constexprs = {dtype = {dtype = "float17"}}\n')
    return d


def _tool_cases(d):
    """Refused by a tool or a compiler, or after one ran: each in a fresh process."""
    k = str(d / "k.ptx")
    sweep = ["rename-sweep", "-q", "--no-run"]
    return [
        ([*sweep, "--ptx", k, "-s", "ptxas=99.9"], TOOL, "no ptxas 99.9"),
        ([*sweep, "--ptx", k, "-s", "flags=-bogus", "-o", str(d / "o-flags")], USAGE, "-bogus"),
        ([*sweep, "--ptx", str(d / "bogus.ptx"), "-o", str(d / "o-bogus")], TOOL, "Unknown modifier '.globl'"),
        ([*sweep, "--triton", f"{d / 'k.py'}:k", "--spec", str(d / "bad_dtype.toml")], USAGE, "not a Triton dtype"),
        (["rename-sweep", "-q", "--run", "-e", str(d / "bad_design.toml"), "-o", str(d / "bd")], USAGE,
         "design 'abab'"),
        (["bisect", "--versions", "99.9"], USAGE, "no ptxas 99.9 installed"),
    ]


def _cases(d):
    """Refused before any tool or compiler runs."""
    k = str(d / "k.ptx")
    sweep = ["rename-sweep", "-q", "--no-run"]
    return [
        # (argv, exit code, words the message must contain)
        ([*sweep, "--ptx", k, "-s", "repeat=abc"], USAGE, "not an integer"),
        ([*sweep, "--ptx", k, "-s", "repeat=0"], USAGE, "must be an integer >= 1"),
        ([*sweep, "--ptx", k, "-s", "causal=maybe"], USAGE, "not true/false"),
        ([*sweep, "-s", "archs=sm_999"], USAGE, "sm_999"),
        ([*sweep, "-s", "archs=sm90"], USAGE, "sm90"),
        ([*sweep, "-s", "colour=red"], USAGE, "unknown sweep keys"),
        ([*sweep, "-s", "names="], USAGE, "baseline template"),
        ([*sweep, "--ptx", k, "-j", "-1"], USAGE, "--jobs"),
        ([*sweep, "--ptx", k, "--entry", "nope"], USAGE, "no entry 'nope'"),
        ([*sweep, "--ptx", str(d / "missing.ptx")], USAGE, "no such file"),
        ([*sweep, "--cu", str(d / "a_dir")], USAGE, "a directory"),
        ([*sweep, "--ptx", k, "-o", str(d / "a_file")], USAGE, "not a directory"),
        ([*sweep, "--ptx", k, "-o", str(d / "a_file" / "sub")], USAGE, "output"),
        ([*sweep, "--ptx", k, "-o", "/proc/ptxprobe-cannot-write"], USAGE, "cannot write"),
        ([*sweep, "-e", str(d / "bad.toml")], USAGE, "not valid TOML"),
        ([*sweep, "-e", str(d / "nothing.toml")], USAGE, "not found"),
        ([*sweep, "--ptx", k, "-s", "names={base},bad-name"], USAGE, "not a valid PTX identifier"),
        ([*sweep, "--spec", str(d / "a_file")], USAGE, "--spec goes with"),
        ([*sweep, "--entry", "x"], USAGE, "--entry goes with"),
        (["emit", "--arch", "sm_42"], USAGE, "sm_42"),
        (["emit", "--arch", "sm90"], USAGE, "sm90"),
        (["emit", "--kernel", "nope"], USAGE, "unknown kernel"),
        (["emit", "--dtype", "fp64"], USAGE, "fp64"),
        (["toolchain", "install", "banana"], USAGE, "not a CUDA release"),
        (["toolchain", "install"], USAGE, "needs one or more"),
        (["toolchain", "install", "12.4.131", "--kinds", "nvcc"], USAGE, "cannot install nvcc"),
        (["cubin", str(d / "a_dir")], USAGE, "directory"),
        (["explain", str(d / "a_dir")], USAGE, "no runtime.jsonl"),
        (["explain", str(d / "a_dir"), "--analyze-only"], USAGE, "no explain/index.json"),
        (["capture", "-o", str(d / "o-cap")], USAGE, "needs a command"),
        (["capture", "-o", str(d / "o-cap2"), "--names", "{base},cutlass_{base}", "--", "true"], USAGE,
         "three templates"),
        ([*sweep, "--ptx", k, "--executor", "ray", "--ray-address", "nohost"], USAGE, "host:port"),
        ([*sweep, "--ptx", k, "--ray-address", "127.0.0.1:1"], USAGE, "goes with --executor ray"),
        ([*sweep, "--ptx", k, "-s", "flags=--apply-controls"], USAGE, "needs an existing file"),
        (["cubin", str(d / "not_a_cubin")], USAGE, ""),
        (["cubin", str(d / "missing.cubin")], USAGE, "no such"),
        (["disasm", str(d / "not_a_cubin")], USAGE, ""),
        (["diff", str(d / "not_a_cubin"), str(d / "not_a_cubin")], USAGE, ""),
        (["diff"], USAGE, "two cubins"),
        (["report", str(d / "nothing")], USAGE, "not a run directory"),
        (["repro", str(d / "a_dir")], USAGE, "not a ptxprobe run directory"),
        (["bisect", "--arch", "sm90"], USAGE, "sm90"),
        (["check-rename", k, str(d / "missing.ptx")], USAGE, "no such"),
        (["rename", k, "--name", "a b"], USAGE, "not a valid PTX identifier"),
        (["assemble", str(d / "a_dir")], USAGE, "directory"),
        (["no-such-command"], USAGE, "invalid choice"),
    ]


def _in_process(argv: list[str], capsys) -> tuple[int, str]:
    """(exit code, stderr) of ``main`` run here, as ``python -m ptxprobe.cli`` runs it."""
    from ptxprobe.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own refusals
        code = stop.code if isinstance(stop.code, int) else 2
    return code, capsys.readouterr().err


def test_every_bad_input_gets_its_exit_code_and_one_line(files, capsys, monkeypatch, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    tools = _tool_cases(files)
    with ThreadPoolExecutor(3) as pool:  # each its own process, three at a time
        runs = [(r.returncode, r.stderr) for r in pool.map(lambda case: ptxprobe(*case[0]), tools)]
    monkeypatch.chdir(tmp_path)  # as the fresh processes run from a scratch directory
    cases = _cases(files)
    runs += [_in_process(argv, capsys) for argv, _, _ in cases]
    failures = []
    for (argv, code, words), (returncode, stderr) in zip([*tools, *cases], runs, strict=True):
        err = stderr.strip()
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("    ")]
        problems = []
        if returncode != code:
            problems.append(f"exit {returncode}, expected {code}")
        if "Traceback" in err or "Error:" in err.split("ptxprobe:")[0]:
            problems.append("a traceback reached the user")
        if words and words not in " ".join(err.split()):
            problems.append(f"message lacks {words!r}")
        heads = [ln for ln in lines if not ln.startswith("  ")]
        if code == USAGE and not argv[0].startswith("no-such") and len(heads) != 1:
            problems.append(f"{len(heads)} message lines")
        if problems:
            failures.append((argv, problems, err[-400:]))
    assert not failures, "\n".join(f"{a}: {p}\n{e}" for a, p, e in failures)


def test_a_failed_assembly_prints_ptxas_own_words_and_is_logged_with_them(files):
    out = files / "o-bogus2"
    r = ptxprobe("rename-sweep", "-q", "--no-run", "--ptx", str(files / "bogus.ptx"), "-o", str(out))
    assert r.returncode == TOOL
    assert "failed" in r.stderr and "Unknown modifier '.globl'" in r.stderr  # ptxas's words in the summary
    import json

    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "failed" and "Unknown modifier" in r["error"] for r in rows)


def test_closing_the_output_pipe_early_is_not_an_error(tmp_path, emitted):
    from ptxprobe.toolchain.assemble import assemble
    from ptxprobe.toolchain.tools import triton_ptxas

    e = emitted("fp16", "sm_90a")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(assemble(e.ptx, "sm_90a", triton_ptxas("sm_90a")).cubin())
    r = subprocess.run(f"{sys.executable} -m ptxprobe.cli disasm {cubin} | head -1", shell=True, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("// attention")
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


def test_json_is_one_document_and_notes_go_to_stderr(files):
    import json

    r = ptxprobe("rename-sweep", "--no-run", "--json", "--ptx", str(files / "k.ptx"), "-s",
                 "names={base},cutlass_{base}", "-o", str(files / "o-json"))
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout
    assert set(doc) >= {"pivot", "summary", "failures", "experiment"}


def test_help_names_every_option_with_its_default():
    r = ptxprobe("rename-sweep", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for opt in ("--experiment", "--set", "--ptx", "--cubin", "--cu", "--entry", "--triton", "--spec", "--out", "--jobs",
                "--timeout", "--fresh", "--no-cache", "--details", "--names-from-scan", "--run", "--no-run", "--json",
                "--verbose", "--quiet"):
        assert opt in text, opt
    assert "(default: 600.0)" in text and "(default: default)" in text
    assert "exit codes: 0 success" in text


def test_an_internal_error_is_one_line_and_minus_v_shows_its_traceback(monkeypatch, capsys):
    """A bug (not bad input) exits 4 with one line that says -v shows more; with -v the traceback follows."""
    from ptxprobe.cli import INTERNAL, commands, main

    def broken(args):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(commands, "cmd_kernels", broken)
    assert main(["kernels"]) == INTERNAL
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: planted bug (run with -v" in err and "Traceback" not in err
    assert main(["kernels", "-v"]) == INTERNAL
    assert "Traceback" in capsys.readouterr().err


def test_run_asked_for_without_a_gpu_is_exit_3_and_run_no_run_is_refused(files, monkeypatch, capsys):
    """--run is a request: without a GPU the static answer is kept but the exit code says it was not done (3), in
    --json mode too; --run --no-run contradicts itself (2)."""
    import json

    from ptxprobe.cli import TOOL_FAILED, USAGE, main
    from ptxprobe.gpu import device

    monkeypatch.setattr(device, "absent_gpu", lambda: "no CUDA GPU is visible (planted)")
    argv = ["rename-sweep", "--ptx", str(files / "k.ptx"), "-s", "names={base},cutlass_{base}", "-q"]
    assert main([*argv, "--run", "-o", str(files / "o-run")]) == TOOL_FAILED
    assert "--run: no CUDA GPU is visible (planted)" in capsys.readouterr().err
    assert main([*argv, "--run", "--json", "-o", str(files / "o-run")]) == TOOL_FAILED
    assert json.loads(capsys.readouterr().out)["runtime_error"].startswith("NoGpu: no CUDA GPU")
    assert main([*argv, "-o", str(files / "o-run")]) in (0, 1)  # not asked for: the static answer's own code
    assert main([*argv, "--run", "--no-run", "-o", str(files / "o-both")]) == USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_diff_refuses_a_rename_that_gives_the_kernel_its_own_name(files, capsys):
    from ptxprobe.cli import USAGE, main

    for same in ("{base}", "_Z9my_kernelPf"):
        assert main(["diff", "--ptx", str(files / "k.ptx"), "--rename", same]) == USAGE
        err = capsys.readouterr().err
        assert "gives _Z9my_kernelPf its own name: nothing to compare" in err and "identical" not in err


def test_assemble_arch_retargets_as_the_sweep_does(tmp_path, capsys):
    """``assemble x.ptx --arch sm_80`` on sm_90a PTX retargets it as ``-s archs`` and ``diff --arch`` do (it was
    ptxas's 'SM version specified by .target is higher' fatal error); what sm_80 truly lacks is ptxas's own line."""
    import json

    from ptxprobe.cli import OK, TOOL_FAILED, main

    body = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n%s ret;\n}\n"
    (tmp_path / "plain.ptx").write_text(body % "")
    (tmp_path / "hopper.ptx").write_text(body % " wgmma.fence.sync.aligned;\n")
    assert main(["assemble", str(tmp_path / "plain.ptx"), "--arch", "sm_80"]) == OK
    assert "k" in json.loads(capsys.readouterr().out)["kernels"]
    assert main(["assemble", str(tmp_path / "hopper.ptx"), "--arch", "sm_80"]) == TOOL_FAILED
    assert "Instruction 'wgmma.fence' not supported on .target 'sm_80'" in capsys.readouterr().err


def test_a_ptxas_option_is_given_and_judged_alike_in_every_command(files, capsys):
    """``--flags -O2`` parses as ``--flags=-O2``; an option the chosen ptxas lacks is the user's input (2) in
    ``assemble`` as in the sweep (``-s flags=``) and ``tune --options``, never a tool failure (3)."""
    import json

    from ptxprobe.cli import OK, USAGE, main

    k = str(files / "k.ptx")
    assert main(["assemble", k, "--flags", "-O2"]) == OK
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    for flags in (["--flags", "--bogus"], ["--flags=--bogus"]):
        assert main(["assemble", k, *flags]) == USAGE
        assert "--bogus" in capsys.readouterr().err
    cubin = str(files / "k.cubin")
    assert main(["assemble", k, "-o", cubin, "--json"]) == OK and main(["cubin", cubin, "--json"]) == OK


@pytest.mark.parametrize("argv, keys", [
    (["rename", "K", "--name", "cutlass_{base}"], {"entry", "name", "sites", "check", "ptx"}),
    (["spec", "init", "K"], {"target", "spec", "todo", "written"}),
    (["assemble", "K"], {"status", "kernels"}),
    (["emit"], {"kernel", "arch", "entry", "ptx_sha256", "ptx"}),
])
def test_json_is_taken_by_the_commands_that_print_files_or_records(files, capsys, argv, keys):
    import json

    from ptxprobe.cli import main

    argv = [str(files / "k.ptx") if a == "K" else a for a in argv]
    assert main([*argv, "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)  # the whole of stdout: one document
    assert keys <= set(doc)
    if "check" in doc:
        assert doc["check"]["equal"] and "cutlass_" in doc["name"]


def test_a_failed_tools_line_is_its_error_not_the_python_warnings_before_it():
    """Triton 3.9 warns on import (TRITON_DEFAULT_FP_FUSION): a program that then fails is described by its error;
    tune gates by that line's first 200 characters, which read the warning before."""
    from ptxprobe.core.proc import FAILED, ToolRun

    warned = ("/venv/triton/knobs.py:504: UserWarning: TRITON_DEFAULT_FP_FUSION is unset: defaulting to FP fusion\n"
              "  warn_once(FP_FUSION_DEFAULT_WARNING)\n"
              "checksum mismatch, said the program\n")
    run = ToolRun(("python", "prog.py"), 1, "", warned, 0.1, FAILED)
    assert run.describe() == "python exited 1: checksum mismatch, said the program"
    plain = ToolRun(("python", "prog.py"), 1, "", "Traceback (most recent call last):\n  File x\nValueError: bad\n",
                    0.1, FAILED)
    assert plain.describe() == "python exited 1: Traceback (most recent call last): |   File x | ValueError: bad"
