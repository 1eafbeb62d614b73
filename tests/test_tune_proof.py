"""tune decides on fresh rounds: the race chooses, ``tune.proof`` times the choice again and decides; the race's
verdicts are adjusted over every candidate raced; the exit codes tell confirmed, unconfirmed and slower apart. (The
committed simulation, experiments/analysis/tune_proof.py, meets the issue's goals: tests/study/test_tune_proof.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptxprobe.cli import CHOICE_SLOWER, CHOICE_UNCONFIRMED, FOUND_DIFFERENCES, OK, TOOL_FAILED
from ptxprobe.cli.tune_cmd import proof_exit, tune_exit
from ptxprobe.records import ApplyRecord, TunedDocument
from ptxprobe.stats import paired as stats
from ptxprobe.tune import proof as proving
from ptxprobe.tune import race as racing
from ptxprobe.tune.answer import chosen, kernel_answer
from ptxprobe.tune.prune import prune


def _measure(truths: dict[str, float], sd: float, seed: int):
    rng = np.random.default_rng(seed)
    calls = []

    def measure(labels, rounds):
        calls.append((tuple(labels), rounds))
        return {x: list(math.log(truths[x]) + rng.normal(0.0, sd, rounds)) for x in labels}

    return measure, calls


@pytest.mark.unit
def test_the_proof_times_the_choice_alone_until_its_verdict_is_settled():
    """A clear +2 % settles at the first look; a gain at the margin itself never settles and runs to the cap at
    Bonferroni-adjusted looks; a slower choice is refuted. Each look measures the chosen label alone."""
    measure, calls = _measure({"a": 1.02}, 0.0013, 1)
    p = proving.prove("a", measure)
    assert (p.outcome, p.stopped_by, p.rounds, p.looks) == ("confirmed", proving.SETTLED, 20, 1)
    assert calls == [(("a",), 20)] and p.low > 1.005
    measure, calls = _measure({"a": 1.005}, 0.0013, 2)
    p = proving.prove("a", measure)
    assert p.stopped_by == "cap" and p.rounds == 80 and [n for _, n in calls] == [20, 40, 20]
    assert p.level == pytest.approx(racing.rung_level(3, 0.95)) and p.outcome == "unconfirmed"
    measure, _ = _measure({"a": 0.98}, 0.0013, 3)
    assert proving.prove("a", measure).outcome == proving.REFUTED
    with pytest.raises(ValueError, match="asked 20"):
        proving.prove("a", lambda labels, n: {"a": [0.0] * (n - 1)})


@pytest.mark.unit
def test_an_unconfirmed_or_refuted_choice_keeps_yours_and_says_why():
    """The race's choice is recommended only when its proof says faster; otherwise yours stays, the record keeps
    the race's choice and the proof, and the change line says what the fresh rounds found. (Planted: recommending
    the race's choice whatever the proof says fails the first assertions.)"""
    from tests.test_tune import _cand

    pruned = prune([_cand("{base}", "k", "A", is_user=True), _cand("{base_triggered}", "cutlass_k", "B")])
    label = pruned.contenders[0].label
    measure, _ = _measure({label: 1.02}, 0.0013, 4)
    res = racing.race([label], measure)
    choice = chosen(res, {c.label: c for c in pruned.distinct}, pruned.user, "simplest")
    assert choice is not None and choice.label == label
    args = {"nums": {}, "gate": {}, "numerics": "bitwise", "gpu_seconds": 1.0, "wall_seconds": 1.0,
            "target": {"frontend": "triton"}}
    for truth, outcome, said in ((1.003, "unconfirmed", "was not confirmed"), (0.98, "slower", "was slower")):
        proof = proving.prove(label, _measure({label: truth}, 0.0013, 5)[0])
        rec = kernel_answer(pruned, res, proof=proof, **args)
        assert rec["best_is_yours"] and rec["gain"] is None and rec["outcome"] == outcome
        assert rec["race_choice"]["label"] == label and rec["proof"]["verdict"] == proof.verdict
        assert said in rec["change"] and "yours stays" in rec["change"]
    confirmed = kernel_answer(pruned, res, proof=proving.prove(label, _measure({label: 1.02}, 0.0013, 6)[0]), **args)
    assert not confirmed["best_is_yours"] and confirmed["gain"]["fresh_rounds"] and confirmed["outcome"] == "confirmed"
    assert kernel_answer(pruned, res, **args)["best_is_yours"]  # a choice never proven is not recommended
    other = proving.Proof("x", 20, 1, 1.02, 1.01, 1.03, 0.95, "faster", 0.01, "settled")
    with pytest.raises(ValueError, match="the proof timed x"):
        kernel_answer(pruned, res, proof=other, **args)


@pytest.mark.unit
def test_the_races_verdicts_are_adjusted_over_every_candidate_raced():
    """A clear leader a, a noisy survivor b and five candidates no faster than yours, dropped by the first rung:
    b, faster with BH over the two survivors, is inconclusive once the five it was chosen from are counted (q over
    seven). (Planted: ``race`` adjusting over the survivors alone fails the verdicts' assertion.)"""
    rng = np.random.default_rng(17)
    logs = {"a": list(0.09 + rng.normal(0, 0.002, 40)), "b": list(0.06 + rng.normal(0, 0.06, 40))}
    logs.update({f"d{i}": list(rng.normal(0, 0.002, 40)) for i in range(5)})
    at = dict.fromkeys(logs, 0)

    def measure(labels, rounds):  # these rounds, in order
        out = {x: logs[x][at[x]:at[x] + rounds] for x in labels}
        for x in labels:
            at[x] += rounds
        return out

    res = racing.race(list(logs), measure, racing.RacePlan(first_rounds=10, max_rounds=40))
    assert {d.standing.label for d in res.dropped} == {f"d{i}" for i in range(5)}
    assert res.to_json()["bh_family"] == racing.RACED_FAMILY
    assert {s.label: s.verdict for s in res.standings} == {"a": "faster", "b": "inconclusive"}
    seen = {x: logs[x][:n] for x, n in at.items()}
    alone = {s.label: s for s in racing.judged(res.standings, seen, 0.005)}
    assert alone["b"].verdict == "faster"  # what BH over the survivors alone said
    assert alone["b"].p_value == stats.paired_pvalue(np.asarray(seen["b"]))


@pytest.mark.unit
def test_a_race_runs_the_rounds_its_verdict_over_every_candidate_needs():
    """The H200 program race of the FFMA matmul: five codes, three 4.8 % faster than yours in every round, two
    equal; a program race plans 6 rounds. At 6 rounds the best p is 2/64 and BH over five gives q 0.052: every
    verdict inconclusive and yours stays, whatever the data. The race now runs the 8 rounds five codes need, and
    the leader is faster. (Planted: without the floor the first assertion fails with 6 rounds and no winner.)"""
    from ptxprobe.tune.program import program_race_plan

    truths = {"x124": 1.048, "x128": 1.048, "x130": 1.048, "c124": 1.0, "c130": 1.0}
    measure, calls = _measure(truths, 0.0015, 8)
    res = racing.race(list(truths), measure, program_race_plan(6, "simplest"))
    assert calls[0][1] == stats.decisive_rounds(5) == 8 and res.winner is not None
    assert res.winner.label.startswith("x") and res.winner.p_value == pytest.approx(2 / 2 ** 8)
    assert [stats.decisive_rounds(m) for m in (1, 2, 5, 25, 26)] == [6, 7, 8, 10, 11]
    for m in (1, 2, 5, 12, 40):  # the floor is the least that can reach q <= 0.05, never more
        n = stats.decisive_rounds(m)
        assert 2 / 2 ** n * m <= 0.05 < 2 / 2 ** (n - 1) * m


def tuned(kernels: list[dict]) -> TunedDocument:
    """A tuned.json of these kernel records (each a raced kernel at sm_90a unless it says otherwise)."""
    return TunedDocument.from_json({"command": ["tune"], "space": {}, "ptxas": {}, "static_sweep": "", "kernels": [
        {"kernel": f"k{i}", "arch": "sm_90a", "status": "tuned", **k} for i, k in enumerate(kernels)]})


@pytest.mark.unit
def test_the_exit_code_tells_confirmed_unconfirmed_and_slower_apart():
    """tune: 1 when any kernel's choice was confirmed, else 6 when a proof found it slower, else 5 when one was not
    confirmed, else 0; a tuned.json from before the proof counts a recommendation as it made it. apply's A/B: 1
    faster, 6 slower, 5 anything else, 3 when the A/A failed, 0 run once."""
    def doc(*outcomes):
        return tuned([{"outcome": o, "best_is_yours": o != "confirmed"} for o in outcomes])

    assert tune_exit(doc("confirmed", "slower", "unconfirmed")) == FOUND_DIFFERENCES
    assert tune_exit(doc("unconfirmed", "slower")) == CHOICE_SLOWER
    assert tune_exit(doc("unconfirmed", "nothing faster")) == CHOICE_UNCONFIRMED
    assert tune_exit(doc("unproven")) == CHOICE_UNCONFIRMED
    assert tune_exit(doc("nothing faster")) == OK and tune_exit(tuned([])) == OK
    assert tune_exit(tuned([{"best_is_yours": False}])) == FOUND_DIFFERENCES  # recorded before the proof
    assert tune_exit(tuned([{"best_is_yours": True}, {"status": "static-only"}])) == OK

    def applied(verdict, failed=False):
        return ApplyRecord(command=("prog",), rounds=8, metric="ms", kernels=(), calibration_failed=failed,
                           comparisons=({"arm": "aa", "verdict": "equivalent"},) + (
                               ({"arm": "tuned", "verdict": verdict},) if verdict else ()))

    assert [proof_exit(applied(v)) for v in ("faster", "slower", "straddles_margin", "equivalent", "negligible",
                                              "inconclusive", None)] == [1, 6, 5, 5, 5, 5, 0]
    assert proof_exit(applied("faster", failed=True)) == TOOL_FAILED
    assert len({OK, FOUND_DIFFERENCES, CHOICE_UNCONFIRMED, CHOICE_SLOWER, TOOL_FAILED, 2, 4, 130, 141}) == 9


@pytest.mark.unit
def test_a_program_tunes_kernels_are_adjusted_together():
    """Two kernels of one program, each with its proof: a choice confirmed alone at p 0.03 is not once the other
    kernel's proof (p 0.6) is counted (q 0.06): yours stays for it, and the record says so; one kernel alone, or two
    clear proofs, stand. (Planted: the adjustment skipped leaves the first recommended, and fails.)"""
    from ptxprobe.tune.answer import adjusted_over_kernels, unchanged_because

    def rec(label, p, ratio, low, high, verdict):
        proof = {"label": label, "ratio": ratio, "low": low, "high": high, "level": 0.95, "verdict": verdict,
                 "p_value": p, "rounds": 20, "looks": 1, "stopped_by": "settled",
                 "outcome": "confirmed" if verdict == "faster" else "unconfirmed", "fresh_rounds": True}
        confirmed = verdict == "faster"
        r = {"kernel": label, "user": {"label": "yours"}, "best": {"label": label if confirmed else "yours"},
             "best_is_yours": not confirmed, "gain": proof if confirmed else None, "proof": proof,
             "race_choice": {"label": label}, "outcome": proof["outcome"]}
        r["change"] = "a change" if confirmed else unchanged_because(r)
        return r

    weak, idle = rec("k1", 0.03, 1.02, 1.008, 1.03, "faster"), rec("k2", 0.6, 1.001, 0.99, 1.01, "inconclusive")
    assert adjusted_over_kernels([weak], 0.005) == [weak]
    a, b = adjusted_over_kernels([weak, idle], 0.005)
    assert a["best_is_yours"] and a["gain"] is None and a["outcome"] == "unconfirmed"
    assert a["proof"]["q_value"] == pytest.approx(0.06) and "not confirmed" in a["change"]
    assert b["outcome"] == "unconfirmed" and b["proof"]["multiplicity"] == "bh over 2 kernels' proofs"
    strong = rec("k3", 0.001, 1.05, 1.04, 1.06, "faster")
    c, d = adjusted_over_kernels([strong, weak], 0.005)
    assert not c["best_is_yours"] and c["gain"]["q_value"] == pytest.approx(0.002)
    assert not d["best_is_yours"] and d["proof"]["q_value"] == pytest.approx(0.03)
    assert tune_exit(tuned([a, b])) == CHOICE_UNCONFIRMED and tune_exit(tuned([c, d])) == 1
