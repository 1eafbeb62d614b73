"""The committed H200 runs of the randomised design are internally consistent: every stored interval, verdict,
q-value and calibration recomputes from the raw samples and records committed beside it."""

from __future__ import annotations

import json

import pytest

from experiments.analysis import gpu_runs as analysis_gpu
from experiments.analysis import static_runs as analysis
from ptxprobe.core.store import compressed, read_log
from ptxprobe.gpu import calibrate
from ptxprobe.gpu.calibrate import summarize
from ptxprobe.gpu.dispatch import with_q_values
from ptxprobe.gpu.plan import run_config
from ptxprobe.static.experiment import experiment_from_dict, recorded_axes
from ptxprobe.stats import paired as stats

pytestmark = pytest.mark.study

# run -> (the experiment it timed, whether it used the paired design)
TIMED = {"2026-12-02-h200-design": ("h200-design", False), "2026-12-02-h200-design-user": ("h200-design-user", False),
         "2026-12-02-h200-design-long": ("h200-design-long", False),
         "2026-12-02-h200-design-pairs": ("h200-design", True),  # the same experiment, re-timed with pairs
         "2026-12-02-h200-sweep-explain": ("user", True),  # rename-sweep --cu sgemm.cu --run --explain
         "2026-12-03-h200-gluon-hopper": ("h200-gluon-hopper", True),  # cut short by the device time
         "2026-12-03-h200-interleaved": ("h200-interleaved", True),  # the interleaved design
         "2026-12-03-h200-interleaved-user": ("h200-interleaved-user", True),
         # the fast defaults (identical code not timed, plants in turn); run orders drawn by a coin per round and
         # shared by every group: calibration failed
         "2026-12-03-h200-interleaved-fast-coin-orders": ("h200-interleaved-fast", True),
         "2026-12-03-h200-interleaved-fast": ("h200-interleaved-fast", True),  # balanced orders, passed
         "2026-12-03-h200-interleaved-user-defaults": ("h200-interleaved-user-defaults", True),  # signed-rank
         "2026-12-03-h200-defaults": ("h200-defaults", True),  # every default: the GPU measurement's goals in one run
         "2026-12-03-h200-defaults-repro": ("h200-defaults", True),  # the same run re-measured by `ptxprobe repro`
         "2026-12-03-h200-overflow-check": ("h200-overflow-check", True),  # the overflow rule made to act
         "2026-12-04-h200-defaults": ("h200-defaults", True),  # plants in the names block, sizes judged nominally
         "2026-12-04-h200-defaults-repro": ("h200-defaults", True),
         "2026-12-04-h200-defaults-sized-plants": ("h200-defaults", True),  # each plant sized directly
         "2026-12-04-h200-gluon-hopper": ("h200-gluon-hopper", True),  # every group, the defaults then
         # the defaults study under the widened interval and, beside it on the same card, under signed-rank
         "2026-12-05-h100-defaults": ("h200-defaults", True),
         "2026-12-05-h100-defaults-signed-rank": ("h200-defaults-signed-rank", True)}
CARDS = {"2026-12-05-h100-defaults": "NVIDIA H100 80GB HBM3",  # the card each run was lent, where not the H200
         "2026-12-05-h100-defaults-signed-rank": "NVIDIA H100 80GB HBM3"}
RUNS = tuple(TIMED)


@pytest.mark.parametrize("run", RUNS)
def test_each_run_has_its_manifest_gpu_facts_and_calibration(run, monkeypatch):
    d = analysis.results_dir(run)
    man = analysis.load_manifest(d)
    gpu = json.loads((d / "gpu.json").read_text()) if (d / "gpu.json").exists() else None
    name, pairs = TIMED[run]
    assert man["experiment_identity"]["name"] == name
    rows = read_log(d / "runtime.jsonl")
    paired = [r for r in rows if r.get("block") == "names" and r.get("samples", {}).get("partners")]
    assert bool(paired) == pairs
    assert {t["kind"] for t in man["tools"]} >= {"ptxas", "nvdisasm", "cuobjdump"}
    assert all(len(t["sha256"]) == 64 for t in man["tools"])
    assert gpu is None or (gpu["gpu"] == CARDS.get(run, "NVIDIA H200") and gpu["arch"] == "sm_90a")
    cal = json.loads((d / "calibration.json").read_text())
    if "delivered_in_groups" not in cal:  # recorded before the delivered rule: every plant counted, as it ran
        monkeypatch.setattr(calibrate, "plant_delivered", lambda rec, key: None)
    recomputed = summarize(read_log(d / "groups.jsonl"))
    stored = {k: v for k, v in cal.items() if k != "note"}
    assert stored == {k: recomputed[k] for k in stored}  # keys the summary gained later are not in older files


@pytest.mark.parametrize("run", RUNS)
def test_stored_comparisons_recompute_from_the_raw_samples(run):
    d = analysis.results_dir(run)
    seed = run_config(experiment_from_dict(recorded_axes(analysis.load_manifest(d))).run).timing.seed
    rows = read_log(d / "runtime.jsonl")
    base = {r["group_id"]: r for r in rows if r.get("block") == "names" and r.get("is_baseline")}
    checked = 0
    for r in rows:
        if r.get("block") != "names" or r.get("is_baseline") or not r.get("name_template"):
            continue
        if r.get("timed") is False:  # not timed: its machine code is the baseline's, by the recorded facts
            assert r["runtime_verdict"] == stats.IDENTICAL_CODE and r["ratio_vs_baseline"] is None
            assert r["machine_code_sha256"] == base[r["group_id"]]["machine_code_sha256"]
            continue
        logs = stats.log_ratios(*analysis_gpu.compared_series(base[r["group_id"]], r))
        iv = stats.paired_interval(logs, level=r.get("ci_level", 0.95), n_boot=2000, seed=seed,
                                   method=r.get("ci_method", "bca"))  # runs before the signed-rank default
        assert (iv.estimate, iv.low, iv.high) == pytest.approx(
            (r["ratio_vs_baseline"], r["ratio_ci_low"], r["ratio_ci_high"]), rel=1e-12)
        assert stats.recorded_decision({**r, "ratio_vs_baseline": iv.estimate, "ratio_ci_low": iv.low,
                                        "ratio_ci_high": iv.high}) == r["runtime_verdict"]
        assert len(r["samples"]["positions"]) == r["rounds"] == len(logs)
        checked += 1
        if checked >= 20:
            break
    assert checked > 0


@pytest.mark.parametrize("run", RUNS)
def test_q_values_are_benjamini_hochberg_over_the_sweep(run):
    """The q-values derived on read are Benjamini-Hochberg over every tested name comparison of the run."""
    import numpy as np
    import pandas as pd

    rows = pd.DataFrame(with_q_values(read_log(analysis.results_dir(run) / "runtime.jsonl")))
    tested = rows[rows.q_value.notna()].sort_values("p_value")
    m = len(tested)
    assert m > 0 and set(tested.index) == set(rows[rows.name_template.notna() & ~rows.is_baseline.astype(bool)
                                                   & rows.p_value.notna()].index)
    # Benjamini-Hochberg from its definition: q_(i) = min over j >= i of p_(j) * m / j, capped at 1
    raw = tested.p_value.to_numpy() * m / np.arange(1, m + 1)
    expected = np.minimum(1.0, np.minimum.accumulate(raw[::-1])[::-1])
    assert np.allclose(tested.q_value.to_numpy(), expected, rtol=1e-12, atol=0)


def test_planted_slowdowns_were_verified_where_the_calibration_says_so():
    """Each sleep plant's recorded size check recomputes under the rule it records: within a quarter (the first
    runs), the nominal size inside the interval, or agreement with its direct sizing."""
    import math
    from statistics import NormalDist

    from ptxprobe.gpu.calibrate import Sizing, judge_plant

    rules = set()
    for run in RUNS:
        for g in read_log(analysis.results_dir(run) / "groups.jsonl"):
            for f, p in g["calibration"]["planted"].items():
                if f == "code":
                    continue
                rule = p.get("size_rule")
                rules.add(rule)
                iv = stats.Interval(p["ratio"], p["ratio_ci_low"], p["ratio_ci_high"], p.get("ci_level", 0.95))
                if rule is None:
                    tolerance = max(0.25 * float(f), 2 * (p["ratio_ci_high"] - p["ratio_ci_low"]) / 2)
                    assert p["verified"] == (abs(p["measured_fraction"] - float(f)) <= tolerance + 1e-12)
                elif rule == "interval":
                    assert p["verified"] == (iv.low <= 1 / (1 + float(f)) <= iv.high)
                else:
                    sized = Sizing(p["sized_fraction"], p["sized_se"], p["sized_replays"])
                    assert p["verified"] == judge_plant(iv, float(f), sized=sized)["verified"]
                    z = NormalDist().inv_cdf(0.5 + iv.level / 2)
                    gap = abs(-math.log(iv.estimate) - math.log1p(sized.fraction))
                    assert p["verified"] == (gap <= z * math.hypot(math.log(iv.high / iv.low) / (2 * z), sized.se))
                assert p["detected"] == (iv.high < 1.0)
    assert rules == {None, "interval", "sizing"}


def test_release_segments_join_runs_and_show_where_an_effect_appears_and_disappears():
    import pandas as pd

    def row(v, verdict, regs, base=100, status="ok"):
        return {"kernel": "k", "arch": "sm_90a", "name_template": "cutlass_{base}", "repeat": 0, "ptxas_version": v,
                "status": status, "verdict": verdict, "registers": regs, "baseline_registers": base}

    df = pd.DataFrame([row("12.0.76", "", None, status="unsupported_ptx"), row("12.4.131", "differs", 110),
                       row("12.2.91", "differs", 110), row("12.10.1", "identical", 100),
                       row("12.8.93", "identical", 100), row("13.0.88", "differs", 104)])
    seg = analysis.release_segments(df).iloc[0]
    assert seg.releases == 6
    assert seg.segments == ("12.0.76: ptxas cannot build it; 12.2.91–12.4.131: differs (+10 regs); "
                            "12.8.93–12.10.1: identical; 13.0.88: differs (+4 regs)")  # versions in numeric order



def test_run_orders_recover_from_each_groups_seed_and_show_the_cost_of_running_first(tmp_path):
    """The orders of a run with per-group seeds are recovered through the timing's own code and reproduce every
    recorded position and predecessor; a wrong seed does not. Running first in a replay measured slower."""
    import shutil

    run = analysis.results_dir("2026-12-03-h200-interleaved-fast")
    first = analysis_gpu.first_in_replay(run)
    checkable = first[first.consistent.notna()]
    assert len(first) == 48 and len(checkable) >= 24 and checkable.consistent.astype(bool).all()
    assert (first.aa1_first * 2 == first.rounds).all()  # balanced in every group
    se = first.first_penalty.std() / len(first) ** 0.5
    assert first.first_penalty.mean() > 3 * se  # the penalty the balance cancels
    bad = tmp_path / "run"
    shutil.copytree(run, bad)
    recs = _plain_groups(bad)
    (bad / "groups.jsonl").write_text("".join(json.dumps({**r, "order_seed": r["order_seed"] + 1}) + "\n"
                                              for r in recs))
    wrong = analysis_gpu.first_in_replay(bad)
    assert not wrong[wrong.consistent.notna()].consistent.astype(bool).any()


def test_gpu_measurement_goals_per_committed_run():
    """Which runs meet which goal (recomputed from groups.jsonl): the two runs with every default meet all six;
    the run before them misses only the half-width maximum, the coin-ordered one only the A/A false positives."""
    met = {run: analysis_gpu.goal_figures(analysis.results_dir(run))["goals_met"]
           for run in ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro", "2026-12-03-h200-interleaved-fast",
                       "2026-12-03-h200-interleaved-fast-coin-orders", "2026-12-03-h200-interleaved")}
    missed = {run: sorted(k for k, ok in g.items() if not ok) for run, g in met.items()}
    assert missed == {"2026-12-03-h200-defaults": [], "2026-12-03-h200-defaults-repro": [],
                      "2026-12-03-h200-interleaved-fast": ["aa_halfwidth_max"],
                      "2026-12-03-h200-interleaved-fast-coin-orders": ["aa_false_positives", "aa_halfwidth_max"],
                      "2026-12-03-h200-interleaved": ["gpu_seconds"]}


def test_every_recorded_stop_is_where_the_stopping_rule_stops():
    """Each names block replayed look by look from its raw rounds through timing.should_stop: the runs with every
    default stop where the rule says (on the target or, at max_rounds, under the ceiling; no overflow needed),
    and the overflow check (max_rounds 20, ceiling 0.08 %) used its 40 overflow rounds in both groups."""
    for run in ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro"):
        t = analysis_gpu.stopping_replay(analysis.results_dir(run))
        assert len(t) == 48 and (t.rounds_replayed == t.rounds_recorded).all()
        assert set(t.stopped_by) == {"target", "ceiling"} and (t.overflow_rounds_used == 0).all()
    t = analysis_gpu.stopping_replay(analysis.results_dir("2026-12-03-h200-overflow-check"))
    assert len(t) == 2 and (t.rounds_replayed == t.rounds_recorded).all()
    assert (t.stopped_by == "cap").all() and (t.overflow_rounds_used == 40).all()


def test_stopping_each_comparison_alone_times_fewer_pair_rounds_and_stops_where_the_rule_says():
    """The every-default study under each stopping rule on one card: every comparison of both runs stopped where
    ``look_stops`` stops it on the recorded rounds, and stopping each on its own timed fewer pair-rounds; the
    together run replayed under ``each`` predicts the each run's pair-rounds within 3 %."""
    from experiments.findings.stopping import STOPPING_COST

    t = {rule: analysis_gpu.stopping_replay(analysis.results_dir(run)) for rule, run in STOPPING_COST.items()}
    for rule, table in t.items():
        assert set(table.stopping) == {rule} and len(table) == 48
        assert table.comparisons_as_recorded.sum() == table.pairs.sum()
    each = sum(sum(r) for r in t["each"].comparison_rounds)
    together = sum(len(r) * max(r) for r in t["together"].comparison_rounds)
    predicted = analysis_gpu.stopping_saving(analysis.results_dir(STOPPING_COST["together"]))
    assert each < together == predicted["together"]
    assert abs(predicted["each"] / each - 1) < 0.03, (predicted, each)


def test_a_replay_uses_the_plan_each_group_recorded(tmp_path):
    """A group that recorded its plan is replayed with it: record no overflow rounds, and the replay stops at
    max_rounds where the block ran on (planted: the recorded stop no longer matches)."""
    import dataclasses
    import shutil

    from ptxprobe.gpu.timing import TimingPlan

    src = analysis.results_dir("2026-12-03-h200-overflow-check")
    run = tmp_path / "run"
    shutil.copytree(src, run)
    stated = run_config(analysis.load_manifest(src)["experiment"]["run"]).timing
    recs = _plain_groups(run)
    for plan, expected in ((stated, 60), (dataclasses.replace(stated, overflow_rounds=0), 20),
                           (dataclasses.replace(stated, ceiling_halfwidth=0.01), 20)):
        (run / "groups.jsonl").write_text("".join(json.dumps({**r, "timing_plan": dataclasses.asdict(plan)}) + "\n"
                                                  for r in recs))
        t = analysis_gpu.stopping_replay(run)
        assert (t.plan_source == "recorded").all() and (t.rounds_replayed == expected).all(), (plan, t)
    assert TimingPlan(**dataclasses.asdict(stated)) == stated


def _plain_groups(run) -> list[dict]:
    """A copied run's group records, its compressed log replaced by nothing (the test writes a plain one)."""
    recs = read_log(run / "groups.jsonl")
    compressed(run / "groups.jsonl").unlink()
    return recs


def test_the_shorter_warm_up_takes_its_planned_seconds_off_and_keeps_the_goals():
    """The warm-up comparison (the study twice on each of two cards, 0.02 s against 0.1 s per label): each run's
    untimed GPU time holds at least the warm-up its plan asks for (the timed parts are not counted twice), the
    shorter warm-up takes about what the plan says off it, and the A/A and delivered plants' goals hold under
    both."""
    from experiments.analysis.gpu_cost import gpu_time_parts
    from experiments.findings.stopping import WARMUP_COST

    for card, runs in WARMUP_COST.items():
        parts = {w: gpu_time_parts(analysis.results_dir(run)) for w, run in runs.items()}
        for w, p in parts.items():
            assert p.warmup_s == w and p.groups == 48
            assert p.planned_warmup <= p.untimed, (card, p)
            assert p.names + p.plants + p.references + p.setup + p.untimed == pytest.approx(p.total)
        saved = parts[0.1].untimed - parts[0.02].untimed
        planned = parts[0.1].planned_warmup - parts[0.02].planned_warmup
        assert 0.9 * planned <= saved <= 1.2 * planned, (card, saved, planned)
        for run in runs.values():
            met = analysis_gpu.goal_figures(analysis.results_dir(run))["goals_met"]
            assert all(ok for k, ok in met.items() if k != "gpu_seconds"), (run, met)
