"""``capture --run`` on CPU: the swap hook inside a real child program, and the A/B rounds and statistics.

No GPU: the child programs call Triton's ``CompiledKernel._init_handles`` on stand-in kernels (Triton's own
method, patched by the hook, runs until it asks for a driver) and report what they were given; the
A/B programs turn that into a measure, so the arms' true difference is known.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptxprobe.capture import ab as capture_ab
from ptxprobe.capture.program import CapturedKernel
from ptxprobe.capture.swap import write_swap_site
from ptxprobe.stats import paired as stats
from tests.ptx_text import SCALE_KERNEL_PROGRAM

pytestmark = pytest.mark.integration

LOADER = textwrap.dedent('''
    import json, sys
    from types import SimpleNamespace
    from triton.compiler.compiler import CompiledKernel  # imported after the hook: patched on import

    def load(name, ptx):
        k = SimpleNamespace(name=name, module=None, kernel=b"own", asm={"ptx": ptx})
        try:
            CompiledKernel._init_handles(k)
        except Exception:  # no driver here: Triton's own load stops after the hook ran
            pass
        return k
''')


def _site(tmp_path: Path) -> Path:
    return write_swap_site(tmp_path / "site")


def _run(prog: Path, site: Path, plan: Path) -> subprocess.CompletedProcess:
    env = capture_ab.swap_env(capture_ab.Arm("x", str(plan), {}), site)
    return subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=300, env=env)


def test_the_hook_swaps_by_entry_and_ptx_and_reports_what_it_did(tmp_path):
    """Two specialisations share the entry ``k``: each gets its own cubin; a third PTX under ``k`` is left alone."""
    cubins = {}
    for tag in ("a", "b"):
        cubins[tag] = tmp_path / f"{tag}.cubin"
        cubins[tag].write_bytes(f"cubin-{tag}".encode())
    sha = {t: hashlib.sha256(f"ptx-{t}".encode()).hexdigest() for t in ("a", "b")}
    plan = tmp_path / "plan.json"
    report = tmp_path / "report.jsonl"
    plan.write_text(json.dumps({"kernels": [
        {"entry": "k", "name": f"cutlass_k_{t}", "cubin": str(cubins[t]), "ptx_sha256": sha[t]} for t in ("a", "b")
    ], "report": str(report)}))
    prog = tmp_path / "prog.py"
    prog.write_text(LOADER + textwrap.dedent('''
        out = {t: load("k", f"ptx-{t}") for t in ("a", "b", "c")}
        out["other"] = load("other", "ptx-a")
        print(json.dumps({t: [k.name, k.kernel.decode()] for t, k in out.items()}))
    '''))
    r = _run(prog, _site(tmp_path), plan)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["a"] == ["cutlass_k_a", "cubin-a"] and got["b"] == ["cutlass_k_b", "cubin-b"]
    assert got["c"] == ["k", "own"] and got["other"] == ["other", "own"]  # not captured: untouched
    rep = json.loads(report.read_text())
    assert sum(rep["swapped"].values()) == 2 and rep["mismatched"] == ["k"] and rep["unseen"] == []


def test_without_the_plan_variable_the_program_runs_untouched(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(LOADER + 'print(load("k", "ptx").kernel.decode())\n')
    env = {k: v for k, v in capture_ab.swap_env(capture_ab.Arm("x", "unused", {}), _site(tmp_path)).items()
           if k != "PTXPROBE_SWAP"}
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "own"


PTX_KERNEL = "import sys\n" + SCALE_KERNEL_PROGRAM + 'open(sys.argv[1], "w").write(k.asm["ptx"])\n'



@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """One real Triton PTX, as capture would have kept it."""
    d = tmp_path_factory.mktemp("cap")
    gen = d / "gen.py"
    gen.write_text(PTX_KERNEL)
    (d / "ptx").mkdir()
    ptx = d / "ptx" / "scale_kernel.ptx"
    subprocess.run([sys.executable, str(gen), str(ptx)], check=True, timeout=300)
    text = ptx.read_text()
    return d, CapturedKernel("scale_kernel", "sm_90a", "ptx/scale_kernel.ptx",
                             hashlib.sha256(text.encode()).hexdigest(), {}, "h")


STAND_IN = {  # a Triton reduced to the class the hook patches: what the A/B children import instead of Triton
    "triton/__init__.py": "",
    "triton/compiler/__init__.py": "",
    "triton/compiler/compiler.py": "class CompiledKernel:\n    def _init_handles(self):\n"
                                   "        raise RuntimeError('no driver')  # as Triton's own, here without a GPU\n",
}


def _stand_in_triton(tmp_path: Path) -> Path:
    root = tmp_path / "stand-in"
    for rel, text in STAND_IN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _program(tmp_path: Path, ptx_path: Path, effect: str) -> Path:
    """A program whose measure depends on the name of the kernel it was given: ``effect`` maps a name to ms."""
    prog = tmp_path / "ab_prog.py"
    counter = tmp_path / "runs"
    prog.write_text(LOADER + textwrap.dedent(f'''
        import random
        from pathlib import Path
        k = load("scale_kernel", open({str(ptx_path)!r}).read())
        base = ({effect})(k.name)
        c = Path({str(counter)!r})
        n = int(c.read_text()) if c.exists() else 0
        c.write_text(str(n + 1))
        noise = random.Random(n).gauss(0, 0.002)  # seeded by the run's position: the test is repeatable
        print(f"ms={{base * (1 + noise):.6f}}")
    '''))
    return prog


def test_ab_rounds_find_a_planted_name_effect_and_the_aa_copy_agrees(tmp_path, captured, monkeypatch):
    """Real cubins (the captured PTX renamed and assembled per arm), the real hook in every child, the rounds and
    the statistics. The 24 children import a stand-in Triton (the class the hook patches, nothing else): the hook
    inside real Triton is the first test's, and Triton's import is most of a child's time."""
    from ptxprobe.toolchain.tools import triton_ptxas

    monkeypatch.setenv("PYTHONPATH", str(_stand_in_triton(tmp_path)))  # after the hook and ptxprobe, before Triton

    cap_dir, kernel = captured
    arms = capture_ab.build_arms([kernel], cap_dir, tmp_path / "ab", {"sm_90a": triton_ptxas("sm_90a")}, "sm_90a",
                                 __import__("ptxprobe.core.cache", fromlist=["Cache"]).Cache(tmp_path / "cache"))
    assert [a.label for a in arms] == ["baseline", "trigger", "control", "aa"]
    assert arms[1].names == {"scale_kernel": "cutlass_scale_kernel"}
    assert arms[2].names == {"scale_kernel": "xutlass_scale_kernel"}
    # the triggered name runs 5 % faster, every other name the same: the plan, not the label, decides
    prog = _program(tmp_path, cap_dir / kernel.ptx, "lambda n: 0.95 if n.startswith('cutlass_') else 1.0")
    # seven rounds: the trigger and control arms are adjusted together (BH over two), and six rounds' smallest
    # p-value (2/64) doubled is above 5 %: at six the planted effect could never be called
    runs = capture_ab.run_rounds([sys.executable, str(prog)], arms, tmp_path / "ab", rounds=7, timeout=300,
                                 metric=r"ms=(\S+)", log=lambda m: None)
    assert all(r.ok and r.swapped == 1 and r.value is not None for r in runs), [r.note for r in runs]
    few = capture_ab.compare([r for r in runs if r.round < capture_ab.MIN_ROUNDS - 1])
    assert {r["verdict"] for r in few} == {"too_few_runs"}  # five rounds decide nothing
    rows = {r["arm"]: r for r in capture_ab.compare(runs)}
    assert rows["trigger"]["verdict"] == "faster" and rows["trigger"]["ratio"] == pytest.approx(1 / 0.95, rel=0.01)
    assert rows["trigger"]["multiplicity"] == "bh over trigger, control" and "q_value" not in rows["aa"]
    six = {r["arm"]: r for r in capture_ab.compare([r for r in runs if r.round < 6])}
    assert six["trigger"]["p_value"] <= 0.05 < six["trigger"]["q_value"] and six["trigger"]["verdict"] != "faster"
    assert rows["control"]["verdict"] not in ("faster", "slower")
    assert rows["aa"]["verdict"] not in ("faster", "slower")
    assert not capture_ab.calibration_failed(list(rows.values()))
    rec = capture_ab.write_ab(tmp_path / "ab", ["prog"], arms, runs, list(rows.values()), {})
    assert json.loads((tmp_path / "ab" / capture_ab.AB).read_text())["comparisons"] == rec["comparisons"]


def test_a_run_in_which_nothing_was_swapped_is_discarded(tmp_path, captured):
    from ptxprobe.toolchain.tools import triton_ptxas

    cap_dir, kernel = captured
    arms = capture_ab.build_arms([kernel], cap_dir, tmp_path / "ab", {"sm_90a": triton_ptxas("sm_90a")}, "sm_90a",
                                 __import__("ptxprobe.core.cache", fromlist=["Cache"]).Cache(tmp_path / "cache"))
    prog = tmp_path / "noop.py"
    prog.write_text("print('ms=1.0')\n")  # never loads a kernel: ptxprobe's cubins never ran
    runs = capture_ab.run_rounds([sys.executable, str(prog)], arms, tmp_path / "ab", rounds=1, timeout=300,
                                 metric=r"ms=(\S+)", log=lambda m: None)
    assert all(r.value is None and "swapped no kernel" in r.note for r in runs)
    assert capture_ab.compare(runs)[0]["verdict"] == "too_few_runs"


def test_the_program_ab_holds_its_level_at_few_rounds_and_calls_a_consistent_effect_at_six():
    """Synthetic program A/Bs through ``compare`` (A/A arms: no effect) at the round counts a program affords: the
    exact signed-rank interval keeps A/A directions at or under the nominal 5 % where a BCa bootstrap interval
    alone does not, and a 1 % effect that every round shows is called at six rounds (the rule that also required
    a sign-flip test with the Hodges-Lehmann statistic called none: p >= 0.059 at six rounds)."""
    import numpy as np

    from ptxprobe.stats import paired as stats

    def runs_of(logs):
        return [capture_ab.Run(arm, r, 0, True, 1.0, value, 1) for r, x in enumerate(logs)
                for arm, value in (("baseline", float(np.exp(x))), ("aa", 1.0))]

    rng = np.random.default_rng(7)
    sims = 1000
    for n in (6, 8):
        called = bca = 0
        for i in range(sims):
            x = rng.normal(0, 0.003, size=n)
            called += capture_ab.compare(runs_of(x), arms=("aa",))[0]["verdict"] in stats.SIGNIFICANT
            bca += stats.decide(stats.paired_interval(x, n_boot=1000, seed=i, method="bca")) in stats.SIGNIFICANT
        assert called / sims <= 0.07 and bca / sims > 0.07, (n, called, bca)  # the level held; the BCa fault seen
    found = sum(capture_ab.compare(runs_of(rng.normal(0.01, 0.001, size=6)), arms=("aa",))[0]["verdict"] == "faster"
                for _ in range(200))
    assert found / 200 >= 0.9  # the serial widening costs some power at six rounds, none at ten
    found = sum(capture_ab.compare(runs_of(rng.normal(0.01, 0.001, size=10)), arms=("aa",))[0]["verdict"] == "faster"
                for _ in range(200))
    assert found / 200 >= 0.99


def test_one_sided_outliers_are_flagged_where_the_mean_and_the_pseudo_median_part(capsys):
    """Twenty rounds of a program whose arm is 1 % faster; in two of them the arm's run is 15 % slow (a stray
    process). The Hodges-Lehmann ratio barely moves and still says faster, the ratio of means says slower, apart by
    more than the half-width: ``contaminated``, and the terminal says so; the clean A/B is not flagged (a flag
    always on fails there, one never on fails on the dirty A/B: both planted and seen failing)."""
    import numpy as np

    from ptxprobe.cli.capture_cmd import say_contaminated

    rng = np.random.default_rng(3)
    base = 1.0 + rng.normal(0, 0.001, 20)
    arm = base / 1.01 * (1 + rng.normal(0, 0.001, 20))
    dirty = arm.copy()
    dirty[[1, 11]] *= 1.15

    def runs_of(values):
        return [capture_ab.Run(a, r, 0, True, 1.0, float(v), 1) for r in range(20)
                for a, v in (("baseline", base[r]), ("trigger", values[r]))]

    clean_row = capture_ab.compare(runs_of(arm), arms=("trigger",))[0]
    dirty_row = capture_ab.compare(runs_of(dirty), arms=("trigger",))[0]
    assert not clean_row["contaminated"] and clean_row["verdict"] == "faster"
    assert dirty_row["contaminated"] and dirty_row["verdict"] == "faster" and dirty_row["ratio_of_means"] < 1.0
    say_contaminated([clean_row, dirty_row])
    said = "".join(capsys.readouterr())
    assert "trigger: the ratio of means" in said and said.count("ratio of means") == 1


def test_a_metric_printed_with_few_digits_is_not_resolved_below_its_rounding():
    """A program that prints ms=1.23 every run gives identical rounds and a zero-width interval: without the
    rounding's bound that read "faster" at 1.0082; widened to what three digits can tell apart, it is not shown."""
    assert capture_ab.printed_resolution("1.23") == pytest.approx(0.01)
    assert capture_ab.printed_resolution("1.5e-3") == pytest.approx(1e-4)
    assert capture_ab.printed_resolution("120") == 1.0 and capture_ab.printed_resolution("nan") is None
    printed = {"baseline": 1.23, "trigger": 1.22, "control": 1.23, "aa": 1.23}
    runs = [capture_ab.Run(arm, r, 0, True, 1.0, v, 1, "", resolution=0.01) for r in range(10)
            for arm, v in printed.items()]
    rows = {r["arm"]: r for r in capture_ab.compare(runs)}
    t = rows["trigger"]
    assert t["widened_to_resolution"] and t["low"] <= 1.0 + 1e-9 and t["verdict"] not in stats.SIGNIFICANT
    assert t["p_value"] >= 0.05 and t["q_value"] >= 0.05  # the p of the data as printed, not of identical rounds
    unrounded = [capture_ab.Run(x.arm, x.round, 0, True, 1.0, x.value, 1) for x in runs]  # wall time: no floor
    assert capture_ab.compare(unrounded)[0]["verdict"] == "faster"
    fine = [capture_ab.Run(x.arm, x.round, 0, True, 1.0, x.value * (1 + 0.002 * (x.round % 3) * (x.arm == "trigger")),
                           1, "", resolution=1e-6) for x in runs]
    assert not capture_ab.compare(fine)[0].get("widened_to_resolution")  # enough digits: the interval stands
