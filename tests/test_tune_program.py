"""``tune -- PROGRAM``: a whole program tuned by its own measure, on programs the tests write with a known best.

The programs compile one Triton kernel ahead of time (no GPU), let the capture hook load the cubin of the arm, and
print a measure derived from what was loaded: the truth is known, so the race must find it (and keep yours when
nothing is better), and a configuration the program fails with is gated out in the program's own words.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from ptxprobe.cli import main
from ptxprobe.tune.program import ProgramRace, program_race_plan, race_program, run_program_tune
from ptxprobe.tune.run import TuneRequest
from tests.ptx_text import SCALE_KERNEL_PROGRAM

pytestmark = pytest.mark.e2e


def _program(measure: str) -> str:
    """A program that loads its kernel (the hook swaps the arm's cubin in first) and prints ``ms=<measure>``, an
    expression of ``size``, the loaded cubin's byte count (-O0's is the larger)."""
    start = "import os, sys\nsys.modules['torch'] = None  # no torch: each run of the program stays short\n"
    return start + SCALE_KERNEL_PROGRAM + textwrap.dedent(f'''
        try:
            k._init_handles()  # the swap hook runs first; Triton's own load then stops without a driver
        except Exception:
            pass
        size = len(k.kernel)
        print(f"ms={{{measure}}}")
    ''')


def _tune(tmp_path, measure: str, rounds: int = 6):
    prog = tmp_path / "prog.py"
    prog.write_text(_program(measure))
    return _tune_at(tmp_path, prog, rounds)


def _tune_at(tmp_path, prog, rounds: int = 6):
    req = TuneRequest(out=str(tmp_path / "t"), names=("{base}",), ptxas=(), option_sets=((), ("-O0",)))
    race = ProgramRace((sys.executable, str(prog)), r"ms=(\S+)", 300.0, program_race_plan(rounds, "simplest"))
    return run_program_tune(req, race)


def test_a_configuration_the_program_fails_with_is_gated_out_in_its_words(tmp_path):
    # the first contender's arm (the hook reads its plan from PTXPROBE_SWAP) fails the program's own check
    fail = "sys.exit('checksum mismatch, said the program')"
    out = _tune(tmp_path, f"{fail} if os.environ.get('PTXPROBE_SWAP', '').endswith('plan-c1.json') else 1.0")
    (k,) = out.doc.kernels
    gated = [p for p in k.pruned if p["reason"] == "numerics"]
    assert gated and "checksum mismatch, said the program" in gated[0]["detail"] and k.best_is_yours


def test_the_cli_tunes_a_program_given_alone_and_refuses_one_that_fails(tmp_path, capsys):
    """The known best found and proven through the CLI; tuned.json keeps every program run of the race, and its
    standings recompute from them (race.standing + judged: the measure varies a little from run to run, by process
    id, as a real one does); a program that fails alone is refused in its own words."""
    import numpy as np

    from ptxprobe.tune.program import race_logs
    from ptxprobe.tune.race import judged, rung_level, standing

    prog = tmp_path / "prog.py"
    prog.write_text(_program("1000.0 / size * (1 + (os.getpid() % 7) * 1e-4)"))
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O0", "--rounds", "6", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    doc = json.loads((tmp_path / "t" / "tuned.json").read_text())
    assert doc["program"]["command"][-1] == str(prog) and doc["numerics"] == "program"
    (k,) = doc["kernels"]  # the larger (-O0) cubin gives the smaller measure: the known best, found
    assert k["status"] == "tuned" and k["source_kind"] == "program" and k["entry"] == "scale_kernel"
    assert k["best"]["options"] == ["-O0"] and not k["best_is_yours"] and k["gain"]["verdict"] == "faster"
    assert k["race"]["standings"][0]["rounds"] == 6  # one rung of MIN_ROUNDS (the gate round not counted)
    logs = race_logs(k)
    level = rung_level(k["race"]["rungs"], 0.95)
    again = judged([standing(label, x, level) for label, x in logs.items()], logs, 0.005)
    for s, recorded in zip(again, k["race"]["standings"], strict=True):
        assert s.label == recorded["label"] and s.verdict == recorded["verdict"]
        assert np.allclose([s.ratio, s.low, s.high], [recorded["ratio"], recorded["low"], recorded["high"]])
    proof = json.loads((tmp_path / "t" / "apply" / "apply.json").read_text())  # the proof ran the recommendation
    assert proof["kernels"][0]["options"] == ["-O0"] and proof["rounds"] == 6
    from ptxprobe.cli.capture_cmd import program_ab_exit

    assert rc == program_ab_exit(proof)  # the proof's verdict is the exit code
    title = capsys.readouterr().out.splitlines()[0]  # raced, though this machine has no GPU: not "static pruning"
    assert "static pruning" not in title and ("raced inside the program" in title or doc["gpu"]), title
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nsys.exit('no GPU here, said the program')\n")
    capsys.readouterr()
    assert main(["tune", "-q", "-o", str(tmp_path / "t2"), "--", sys.executable, str(fails)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU here, said the program" in err[0]


def test_a_bad_metric_is_refused_before_the_program_runs_and_a_non_number_is_the_programs_failure(tmp_path, capsys):
    """--metric: a pattern that is no regular expression, or has more than one group, is bad usage (exit 2, one
    line, nothing run); a match that is not a number is a run without a measure (exit 3), never an internal error."""
    prog = tmp_path / "prog.py"
    prog.write_text(_program("'fast'"))  # prints ms=fast
    for metric in ("ms=(", r"(ms)=(\S+)"):
        for argv in (["tune", "-o", str(tmp_path / "bad")], ["apply", str(tmp_path / "bad")]):
            rc = main([*argv, "--metric", metric, "--", sys.executable, str(prog)])
            err = capsys.readouterr().err.strip().splitlines()
            assert rc == 2 and len(err) == 1 and "--metric" in err[0], (metric, argv, err)
    assert not (tmp_path / "bad").exists()
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O0", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3 and len(err) == 1 and "no number for --metric" in err[0], err


def test_a_kernel_the_hook_cannot_swap_is_pruned_and_said_not_raced(tmp_path):
    """The capture hook swaps Triton's and the CuTe DSL's kernels, the only frontends capture records today; should
    it record another, such a kernel keeps its static answer (its distinct codes) with the reason, and the program is
    not run for it (a defensive branch, exercised here with a made-up frontend)."""
    from ptxprobe.capture.program import CapturedKernel
    from ptxprobe.core.cache import Cache
    from ptxprobe.tune.prune import Candidate, Pruned

    def cand(name, sha, user):
        return Candidate("k.ptx", "sm_90a", "{base}", name, "12.8.93", "p" * 64, (), sha, is_user=user)

    user, other = cand("kernel_cutlass_k", "a" * 64, True), cand("kernel_xutlass_k", "b" * 64, False)
    pruned = Pruned("k.ptx", "sm_90a", user, (user, other), ())
    k = CapturedKernel("kernel_cutlass_k", "sm_90a", "ptx/k.ptx", "c" * 64, {}, "k.ptx", "numba-cuda")
    said = []
    never = ProgramRace(("false",), None, 1.0, program_race_plan(6, "simplest"))  # would fail if it ran
    (rec,), interrupted = race_program({("k.ptx", "sm_90a"): pruned}, [k], {}, never, tmp_path, Cache(),
                                       log=said.append)
    assert not interrupted
    assert rec["status"] == "static-only" and "numba-cuda" in rec["note"] and len(rec["distinct"]) == 2
    assert said and "not raced" in said[0]


def test_an_interrupt_in_the_race_keeps_tuned_json_and_exits_130(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the program race's first rung runs: tuned.json is written (the kernel keeps its static answer,
    its note says why), no proof runs, and the exit code is 130."""
    from ptxprobe.tune import program as tune_program

    prog = tmp_path / "prog.py"
    prog.write_text(_program("1000.0 / size"))
    real, calls = tune_program.run_rounds, []

    def interrupted_after_the_gate(*args, **kwargs):
        calls.append(args[3])
        if len(calls) == 2:  # the gate's one round ran; the first rung is cut short
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(tune_program, "run_rounds", interrupted_after_the_gate)
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O0", "--rounds", "6", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    assert rc == 130 and calls == [1, 6]
    doc = json.loads((tmp_path / "t" / "tuned.json").read_text())
    (k,) = doc["kernels"]
    assert k["status"] == "static-only" and "interrupted" in k["note"] and "interrupted" in doc["note"]
    assert not (tmp_path / "t" / "apply").exists()  # no proof after an interrupt
    assert "interrupted during the race" in capsys.readouterr().err


def test_a_kernel_with_one_machine_code_is_answered_without_running_the_program_again(tmp_path, capsys):
    """-O3 is ptxas's default: both option sets give your code, so nothing is raced, your configuration stays with
    that reason (a tuned record, not 'no GPU'), and the program runs only for the capture."""
    prog = tmp_path / "prog.py"
    ran = tmp_path / "ran.txt"  # one line per run of the program: whether the hook had a swap plan
    record = f"open({str(ran)!r}, 'a').write(os.environ.get('PTXPROBE_SWAP', 'none') + '\\n')\n"
    prog.write_text(_program("1.0") + record)
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O3", "--rounds", "6", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    assert rc == 0
    (k,) = json.loads((tmp_path / "t" / "tuned.json").read_text())["kernels"]
    assert k["status"] == "tuned" and k["best_is_yours"] and k["race"]["stopped_by"] == "alone"
    assert len(k["distinct"]) == 1 and k["change"] == "none: every configuration tried gives your machine code"
    assert ran.read_text().splitlines() == ["none"]  # the capture run alone
    assert "not timed (no GPU)" not in capsys.readouterr().out


def test_a_cute_dsl_name_that_cannot_be_loaded_gives_its_code_to_a_loadable_candidate():
    """Pruning keeps the first candidate of a code; for a CuTe DSL kernel a name of another length cannot be loaded,
    so it is pruned as not loadable first and its code is raced under the same-length name that shares it."""
    from ptxprobe.capture.program import CapturedKernel
    from ptxprobe.tune.program import loadable
    from ptxprobe.tune.prune import NOT_LOADABLE, Candidate, prune
    from ptxprobe.tune.space import TuneSpace

    space = TuneSpace(("{base}", "{base}_v2", "{base_untriggered}"), ("triton",), ((),))

    def cand(template, name, code, user=False):
        return Candidate("k.ptx", "sm_90a", template, name, "12.8.93", "p" * 64, (), code, is_user=user)

    user = cand("{base}", "kernel_cutlass_k", "a" * 64, True)
    longer, free = cand("{base}_v2", "kernel_cutlass_k_v2", "b" * 64), cand("{base_untriggered}", "kernel_xutlass_k",
                                                                             "b" * 64)
    before = prune([user, longer, free])
    assert [c.name for c in before.distinct] == ["kernel_cutlass_k", "kernel_cutlass_k_v2"]  # the longer one leads
    k = CapturedKernel("kernel_cutlass_k", "sm_90a", "ptx/k.ptx", "c" * 64, {}, "k.ptx", "cute-dsl")
    after = loadable(before, [k], space)
    assert [c.name for c in after.distinct] == ["kernel_cutlass_k", "kernel_xutlass_k"]
    assert [(p.candidate.name, p.reason) for p in after.pruned] == [("kernel_cutlass_k_v2", NOT_LOADABLE)]
    triton = CapturedKernel("kernel_cutlass_k", "sm_90a", "ptx/k.ptx", "c" * 64, {}, "k.ptx", "triton")
    assert loadable(before, [triton], space) is before  # Triton loads any name


def test_an_interrupt_after_a_completed_rung_keeps_that_rung_as_the_kernels_answer(tmp_path, monkeypatch):
    """A program race that ends interrupted after its first rung (the race itself is tested on simulated timings in
    test_tune.py; here it is stood in for, so the program runs only for the capture and the gate): the kernel's
    record holds that rung's standings (stopped_by interrupted), tuned.json is written, no proof runs (so yours stays:
    the race's choice is unproven), exit 130."""
    from ptxprobe.tune import program as tune_program
    from ptxprobe.tune import race as racing

    prog = tmp_path / "prog.py"
    prog.write_text(_program("1000.0 / size"))

    def one_rung_then_interrupted(labels, measure, plan):
        rung = [racing.Standing(label, 6, 1.05, 1.04, 1.06, 0.95, "faster", 0.03) for label in labels]
        return racing.RaceResult(tuple(rung), (), 1, 6 * len(labels), racing.INTERRUPTED)

    monkeypatch.setattr(tune_program, "race", one_rung_then_interrupted)
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O0", "--rounds", "12", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    (k,) = json.loads((tmp_path / "t" / "tuned.json").read_text())["kernels"]
    assert rc == 130 and k["status"] == "tuned" and k["race"]["stopped_by"] == "interrupted"
    assert k["race"]["rungs"] == 1 and k["best_is_yours"] and k["outcome"] == "unproven"  # no proof ran: yours stays
    assert k["race_choice"]["verdict"] == "faster" and "not proven" in k["change"]
    assert not (tmp_path / "t" / "apply").exists()



def test_an_interrupt_inside_the_first_rung_keeps_the_program_runs_that_finished(tmp_path, monkeypatch):
    """Ctrl-C while the race's first rung runs the program (on the GPU each run of the CuTe FA2 program took about
    20 s, and a cut call lost ten of them): no standings exist, yours stays, exit 130, and tuned.json keeps every
    program run that finished (the gate's and the rung's), with the GPU seconds they took. (Planted: the runs kept
    only once a call returns leaves the interrupted call's runs out and fails the count.)"""
    from ptxprobe.capture import ab
    from ptxprobe.tune import program as tune_program

    prog = tmp_path / "prog.py"
    prog.write_text(_program("1000.0 / size"))
    real = ab.run_rounds

    def interrupted_after_three_runs(argv, arms, out, rounds, *args, runs=None, **kw):
        if rounds == 1:  # the gate: as it is
            return real(argv, arms, out, rounds, *args, runs=runs, **kw)
        real(argv, arms, out, 1, *args, runs=runs, **kw)  # one round of both arms, then half of the next
        real(argv, arms[:1], out, 1, *args, runs=runs, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_program, "run_rounds", interrupted_after_three_runs)
    rc = main(["tune", "-q", "-o", str(tmp_path / "t"), "--names", "{base}", "--ptxas", "", "--options",
               "default;-O0", "--rounds", "6", "--metric", r"ms=(\S+)", "--", sys.executable, str(prog)])
    (k,) = json.loads((tmp_path / "t" / "tuned.json").read_text())["kernels"]
    assert rc == 130 and k["status"] == "static-only" and k["note"] == "not raced: interrupted"
    gate, rung = k["program_runs"]["calls"]
    assert len(gate) == 2 and len(rung) == 3 and all(r["value"] is not None for r in rung)
    assert k["gpu_seconds"] == pytest.approx(sum(r["seconds"] for r in gate + rung))
