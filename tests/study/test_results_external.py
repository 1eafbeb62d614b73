"""The committed results on kernels nobody here wrote and on the Hopper attention are internally consistent, and
their analysis can fail: throughput recomputes from the raw samples, checks from their tolerances, and every interval
from the raw times."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from experiments.analysis import external_runs as analysis_external
from experiments.analysis import static_runs as analysis
from ptxprobe.capture.ab import MIN_ROUNDS, Run, compare

pytestmark = pytest.mark.study

SOTA = analysis.RESULTS / "2026-12-03-h200-attention-sota"
AOT = analysis.RESULTS / "2026-12-03-h200-cute-dsl-aot" / "cute_aot.json"
AB = analysis.RESULTS / "2026-12-03-h200-capture-tutorial" / "ab" / "ab.json"
TOLERANCE = {"fp16": 5e-3, "bf16": 2e-2, "fp8e4nv": 8e-2}  # experiments/benchmarks/attention_sota.py


@pytest.mark.parametrize("name", ["sota.json", "sota-fp8.json", "sota-first.json"])
def test_every_stored_throughput_follows_from_its_time_and_flop_count(name):
    """These runs kept the median per label, not the raw samples (the benchmark's child dropped them from what it
    printed; it keeps them now): throughput and the FLOP count are checked, the median cannot be."""
    rec = json.loads((SOTA / name).read_text())
    rows = [r for r in rec["bench"] if "tflops" in r]
    assert rows and rec["environment"]["gpu"] == "NVIDIA H200"
    for r in rows:
        if "samples_ms" in r:
            assert r["ms"] == pytest.approx(statistics.median(r["samples_ms"]), rel=1e-12)
        assert r["tflops"] == pytest.approx(r["flops"] / r["ms"] / 1e9, rel=1e-12)
        flops = 4.0 * r["batch"] * r["heads"] * r["seq_len"] ** 2 * r["head_dim"] / (2 if r["causal"] else 1)
        assert r["flops"] == flops and r["batch"] * r["seq_len"] == 16384


def test_each_check_is_ok_exactly_when_its_error_is_within_tolerance():
    rows = [c for f in ("sota.json", "sota-checks.json") for c in json.loads((SOTA / f).read_text())["checks"]]
    assert len(rows) > 200
    for c in rows:
        within = c["rel_error"] is not None and c["rel_error"] <= TOLERANCE[c["dtype"]]
        assert c["ok"] == within


def test_the_table_and_goals_follow_from_the_rows():
    t = analysis_external.sota_table([SOTA / "sota.json", SOTA / "sota-fp8.json"])
    rec = json.loads((SOTA / "sota.json").read_text())["bench"]
    g = pd.DataFrame([r for r in rec if "tflops" in r and r["dtype"] == "fp16" and r["seq_len"] == 16384
                      and not r["causal"]])
    row = t[(t.dtype == "fp16") & (t.seq_len == 16384) & ~t.causal].iloc[0]
    assert row.best == g[g.label.str.startswith("gluon")].tflops.max()
    assert row.cudnn == g[g.label == "sdpa_cudnn"].tflops.iloc[0]
    goals = {goal: met for goal, met, _ in analysis_external.sota_goals(t)}
    assert goals["persistent at or above the classic grid at N <= 2k"] == bool(
        (t[(t.dtype == "fp16") & (t.seq_len <= 2048)].persistent >= t[(t.dtype == "fp16")
                                                                      & (t.seq_len <= 2048)].classic).all())
    # a planted change decides a goal: lift every Gluon number 30 % and fp8 reaches 1 PFLOPS
    lifted = t.assign(best=t.best * 1.3)
    assert dict((g, m) for g, m, _ in analysis_external.sota_goals(lifted))["fp8 at least 1.0 PFLOPS at N = 16k"]


def test_cute_aot_intervals_recompute_from_the_raw_times_and_a_planted_slowdown_moves_them(tmp_path):
    rec = json.loads(AOT.read_text())
    again = analysis_external.aot_comparisons(AOT, method="bca")  # as stored (before the signed-rank default)
    for r in again.itertuples():
        stored = rec["cases"][r.case]["comparisons"][r.role]
        assert (r.ratio, r.low, r.high, r.verdict) == (pytest.approx(stored["ratio"], rel=1e-12),
                                                        pytest.approx(stored["low"], rel=1e-12),
                                                        pytest.approx(stored["high"], rel=1e-12), stored["verdict"])
        assert r.rounds == 30 and r.bitwise
    planted = json.loads(AOT.read_text())
    t = planted["cases"]["hopper_gemm_fp16"]["times_ms"]
    t["control"] = [x * 1.02 for x in t["control"]]  # the control 2 % slower, round by round
    p = tmp_path / "planted.json"
    p.write_text(json.dumps(planted))
    moved = analysis_external.aot_comparisons(p, method="bca")
    m = moved[(moved.case == "hopper_gemm_fp16") & (moved.role == "control")].iloc[0]
    base = again[(again.case == "hopper_gemm_fp16") & (again.role == "control")].iloc[0]
    assert m.ratio == pytest.approx(base.ratio / 1.02, rel=1e-9) and m.verdict == "slower"


def test_the_program_ab_had_too_few_rounds_and_more_rounds_would_decide():
    rec = json.loads(AB.read_text())
    runs = [Run(**r) for r in rec["runs"]]
    assert {r["verdict"] for r in analysis_external.program_ab(AB).to_dict("records")} == {"too_few_runs"}
    assert all(r.swapped == 3 and r.value is not None for r in runs)  # every run loaded the three captured kernels
    # the same measurements seen over MIN_ROUNDS rounds are enough for verdicts
    more = [Run(r.arm, r.round + k * 3, r.position, r.ok, r.seconds, r.value, r.swapped)
            for k in range(MIN_ROUNDS // 3 + 1) for r in runs]
    assert {r["verdict"] for r in compare(more)} <= {"faster", "slower", "straddles_margin", "negligible", "equivalent",
                                                     "inconclusive"}


FA4 = analysis.RESULTS / "2026-12-04-h200-fa4-hopper"


@pytest.mark.parametrize("release", ["12.9.86", "13.0.88"])
def test_fa4_verdicts_recompute_from_the_raw_times_and_a_planted_fault_is_caught(tmp_path, release):
    """What the H200 printed (each name against the trigger-free spelling, ptxprobe.api.compare's rule) follows from
    the stored per-round times; the machine-code column from the prepared cubins' hashes; the TFLOPS from the FLOP
    count. Planted: a 1 % slowdown of the trigger in one case, and a trigger hash made the baseline's."""
    from ptxprobe.stats.paired import VERDICT_RULE

    run, prep = FA4 / f"cute_aot-{release}.json", FA4 / f"prepared-{release}.json"
    rec = json.loads(run.read_text())
    t = analysis_external.aot_comparisons(run, rule=VERDICT_RULE, prepared=prep).set_index(["case", "role"])
    for case, c in rec["cases"].items():
        s = c["shape"] if "shape" in c else json.loads(prep.read_text())["cases"][case]["shape"]
        assert c["flops"] == 4.0 * s["b"] * s["h"] * s["s"] ** 2 * s["d"] / (2 if s["causal"] else 1)
        assert c["tflops"]["baseline"] == pytest.approx(c["flops"] / c["median_ms"]["baseline"] / 1e9)
        for role, stored in c["comparisons"].items():
            again = t.loc[(case, role)]
            assert again.ratio == pytest.approx(stored["ratio"], abs=1e-12)
            assert (again.low, again.high) == pytest.approx((stored["low"], stored["high"]), abs=1e-12)
            assert again.verdict == stored["verdict"]
        assert t.loc[(case, "control"), "same_code"]  # the control spelling never changed the code
    slowed = json.loads(run.read_text())
    case = next(iter(slowed["cases"]))
    slowed["cases"][case]["times_ms"]["trigger"] = [x * 1.01 for x in slowed["cases"][case]["times_ms"]["trigger"]]
    (tmp_path / "slow.json").write_text(json.dumps(slowed))
    moved = analysis_external.aot_comparisons(tmp_path / "slow.json", rule=VERDICT_RULE, prepared=prep)
    row = moved.set_index(["case", "role"]).loc[(case, "trigger")]
    assert row.verdict == "slower" and row.high < 0.995
    hashes = json.loads(prep.read_text())
    v = hashes["cases"][case]["variants"]
    v["trigger"]["machine_code_sha256"] = "0" * 64
    (tmp_path / "prep.json").write_text(json.dumps(hashes))
    swapped = analysis_external.aot_comparisons(run, rule=VERDICT_RULE, prepared=tmp_path / "prep.json")
    assert not swapped.set_index(["case", "role"]).loc[(case, "trigger"), "same_code"]
