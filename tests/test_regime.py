"""The regime in every answer: the clock slope's calibration on series of known truth, the readings a comparison
pairs, and the sustained regime on a simulated power-capped card (the GPU-only parts with the card simulated)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ptxprobe.gpu import sustained, timing
from ptxprobe.gpu.graphs import Unit
from ptxprobe.gpu.timing import Sampled, TimingPlan, comparison_regime, effective, paired_readings, time_block
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import BURST, SUSTAINED, ClockSlope, Reading, Regime, clock_slope, regime_of

pytestmark = pytest.mark.unit


def _ar1(rng, n: int, r: float, sd: float) -> np.ndarray:
    e = rng.normal(0, sd * math.sqrt(1 - r * r), n)
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    for i in range(1, n):
        x[i] = r * x[i - 1] + e[i]
    return x


def _flags(slope: float, sims: int, n: int, r: float, seed: int) -> float:
    """How often a series of ``n`` rounds is flagged clock-dependent: wandering clocks (AR(1) of lag-1 ``r``, 20
    MHz sd, read in 15 MHz steps) and log ratios of ``r`` too, with ``slope`` per 100 MHz planted."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(sims):
        clock = 1900 + _ar1(rng, n, r, 20.0)
        logs = _ar1(rng, n, r, 0.002) + slope * (clock - clock.mean()) / 100
        s = clock_slope(logs, list(np.round(clock / 15) * 15))
        hits += bool(s and s.dependent)
    return hits / sims


def test_the_clock_slope_flags_at_most_its_level_where_the_gain_does_not_move_with_the_clock():
    # both series wander (lag-1 0.6, 0.8) but independently: an interval at the comparison's own sqrt(n) bandwidth
    # flagged 11 % and 20 % of these series
    assert _flags(0.0, 400, 40, 0.6, 1) <= 0.06
    assert _flags(0.0, 400, 40, 0.8, 5) <= 0.08
    assert _flags(0.0, 400, 20, 0.0, 2) <= 0.06


def test_a_planted_clock_slope_is_found_and_estimated():
    assert _flags(0.01, 200, 40, 0.6, 3) >= 0.7  # +1 % per 100 MHz over clocks that wander by 20 MHz
    rng = np.random.default_rng(4)
    clock = 1850 + 100 * rng.random(60)
    logs = 0.004 * (clock - 1900) / 100 + rng.normal(0, 0.0005, 60)
    s = clock_slope(logs, list(clock))
    assert s.low < 0.004 < s.high and s.dependent and s.rounds == 60


def test_no_slope_is_claimed_from_a_clock_that_did_not_move_or_too_few_rounds():
    assert clock_slope([0.01] * 30, [1980] * 30) is None  # one clock: nothing to regress on
    assert clock_slope([0.01, 0.02, 0.0], [1900, 1950, 1980]) is None
    assert clock_slope([0.0] * 10, [None] * 10) is None


def test_a_regime_goes_into_a_row_and_back():
    base = [Reading(1980, 500.0, False), Reading(1965, 690.0, True)] * 6
    other = [Reading(1950, 695.0, True), Reading(1935, 699.0, True)] * 6
    logs = list(np.linspace(-0.001, 0.001, 12))
    reg = regime_of(SUSTAINED, logs, base, other, 700.0)
    assert reg.clock_delta_mhz == -30 and reg.throttled_share == pytest.approx(18 / 24)
    assert reg.power_limit_w == 700.0 and 0.9 < reg.power_share < 1.0
    back = Regime.from_fields({**reg.fields(), "rounds": 12})
    assert back.regime == SUSTAINED and back.sm_clock_mhz == reg.sm_clock_mhz and back.clock_dependent == \
        reg.clock_dependent
    assert Regime.from_fields({"ratio_vs_baseline": 1.01}) is None  # rows from before regimes were recorded
    with pytest.raises(ValueError, match="regime 'long'"):
        regime_of("long", logs, base, other, None)


def test_each_comparison_reads_the_readings_of_its_own_rounds():
    a = Sampled("a", times_ms=[1.0, 1.1, 1.2, 1.3], sm_clock_mhz=[1900, 1910, 1920, 1930], power_w=[1.0] * 4,
                throttled=[False] * 4, partners={"b": [1.0, 1.2], "c": [1.1, 1.3]},
                partner_index={"b": [0, 2], "c": [1, 3]})
    b = Sampled("b", times_ms=[2.0, 2.1], sm_clock_mhz=[1800, 1820], power_w=[2.0, 2.0], throttled=[True, True],
                partners={"a": [2.0, 2.1]}, partner_index={"a": [0, 1]})
    base, other = paired_readings(a, b)
    assert [r.sm_clock_mhz for r in base] == [1900, 1920] and [r.sm_clock_mhz for r in other] == [1800, 1820]
    old = replace_sampled(b, partner_index={})  # a record from before partner_index: b's own readings, shared
    base, other = paired_readings(replace_sampled(a, partner_index={}), old)
    assert base == other and [r.sm_clock_mhz for r in base] == [1800, 1820]
    one = Sampled("x", times_ms=[1.0, 1.0], sm_clock_mhz=[1700, 1710])
    two = Sampled("y", times_ms=[1.0, 1.0], sm_clock_mhz=[1750, 1760])
    assert [r.sm_clock_mhz for r in paired_readings(one, two)[1]] == [1750, 1760]  # every label once a round
    reg = comparison_regime(a, Sampled("z", times_ms=[1.0]), [0.0], TimingPlan(), None)
    assert reg.regime == BURST and reg.sm_clock_mhz is None  # rounds that cannot be matched: no readings


def replace_sampled(s: Sampled, **kw) -> Sampled:
    d = {k: getattr(s, k) for k in s.__dataclass_fields__}
    d.update(kw)
    return Sampled(**d)


class Card:
    """A power-capped card: each label's launch takes ``cycles`` at the current clock and draws ``w_per_mhz``
    watts per MHz; the clock relaxes (time constant ``tau_ms``) toward the highest the cap allows for what runs."""

    def __init__(self, cycles: dict, w_per_mhz: dict, cap_w: float = 700.0, fmax: float = 1980.0,
                 tau_ms: float = 150.0):
        self.cycles, self.w, self.cap, self.fmax, self.tau = cycles, w_per_mhz, cap_w, fmax, tau_ms
        self.clock, self.last = fmax, next(iter(cycles))

    def run(self, label: str, launches: int) -> float:
        total = 0.0
        for _ in range(launches):
            ms = self.cycles[label] / (self.clock * 1e3)
            target = min(self.fmax, self.cap / self.w[label])
            self.clock += (target - self.clock) * (1 - math.exp(-ms / self.tau))
            total += ms
        self.last = label
        return total

    def read(self) -> tuple:
        clock = round(self.clock / 15) * 15
        return int(clock), self.w[self.last] * self.clock, clock < self.fmax - 15


def _on_card(monkeypatch, card: Card) -> None:
    class FakeGraph:
        def __init__(self, fn, k, tail=None):
            self.label, self.k = fn.label, k

        def replay_ms(self) -> float:
            return card.run(self.label, self.k)

        def replay_many(self, n: int) -> float:
            return sum(card.run(self.label, self.k) for _ in range(n))

    class FakeNvml:
        def read(self):
            return card.read()

        def power_limit_w(self):
            return card.cap

    monkeypatch.setattr(timing, "GraphSample", FakeGraph)
    monkeypatch.setattr(timing, "Nvml", FakeNvml)


def _units(labels, k: int = 100) -> dict[str, Unit]:
    def marker(label):
        def fn():
            return None
        fn.label = label
        return fn
    return {label: Unit(marker(label), k, 10.0) for label in labels}


def _ratio(samples, plan) -> tuple[float, Regime]:
    logs = stats.log_ratios(*samples["a"].paired_with(samples["b"]))
    return float(np.exp(np.median(logs))), comparison_regime(samples["a"], samples["b"], logs, plan, 700.0)


def test_the_sustained_regime_gives_back_the_gain_a_power_hungry_code_loses_as_clock(monkeypatch):
    # b takes 5 % fewer cycles but draws more power: under the cap its own clock is lower
    card = Card({"a": 198_000, "b": 188_100}, {"a": 0.34, "b": 0.37})
    _on_card(monkeypatch, card)
    quick = TimingPlan(design="pairs", warmup_s=0.0, card_warmup_s=0.0, rounds=12, min_rounds=12, max_rounds=12,
                       batch_rounds=12, overflow_rounds=0)
    samples, _ = time_block(_units("ab"), quick, [("a", "b")], seed=1, nvml=timing.Nvml())
    burst, burst_regime = _ratio(samples, quick)
    held = replace(quick, regime=SUSTAINED, rounds=None, sustained_rounds=6, hold_s=0.3, settle_s=0.2,
                   settle_max_s=2.0)
    samples, _ = time_block(_units("ab"), held, [("a", "b")], seed=1, nvml=timing.Nvml())
    sus, sus_regime = _ratio(samples, held)
    per_cycle = 198_000 / 188_100  # what b does per cycle: the burst regime's answer
    at_own_clocks = per_cycle * (700 / 0.37) / 1980  # each at its own equilibrium clock
    assert burst == pytest.approx(per_cycle, abs=0.004)
    assert sus == pytest.approx(at_own_clocks, abs=0.003) and sus < burst - 0.03
    assert abs(burst_regime.clock_delta_mhz) <= 15 and sus_regime.clock_delta_mhz <= -60
    assert sus_regime.regime == SUSTAINED and sus_regime.power_limit_w == 700.0
    assert len(samples["a"].times_ms) == 6 and all(s >= 0.2 for s in samples["b"].settle_s)


def test_holding_an_arm_waits_for_its_clock_then_times_its_own_window():
    card = Card({"a": 198_000}, {"a": 0.40}, tau_ms=300.0)
    plan = TimingPlan(regime=SUSTAINED, hold_s=0.5, settle_s=0.2, settle_max_s=5.0)
    held = sustained.hold(lambda n: sum(card.run("a", 100) for _ in range(n)), 100, card.read, plan)
    eq = 700 / 0.40
    assert 0.2 <= held.settle_s < 5.0 and abs(held.sm_clock_mhz - eq) <= 15 and held.throttled
    assert held.ms_per_launch == pytest.approx(198_000 / (eq * 1e3), rel=0.01)
    no_nvml = sustained.hold(lambda n: 10.0 * n, 1, lambda: (None, None, False), plan)
    assert no_nvml.settle_s == pytest.approx(0.2, abs=0.051) and no_nvml.sm_clock_mhz is None
    with pytest.raises(RuntimeError, match="nothing to hold"):  # a replay that takes no time cannot be held
        sustained.hold(lambda n: 0.0, 1, lambda: (None, None, False), plan)


def test_a_sustained_plan_runs_fixed_rounds_of_pairs_and_says_its_cost_first():
    plan = effective(TimingPlan(regime=SUSTAINED, sustained_rounds=12))
    assert (plan.design, plan.rounds, plan.min_rounds, plan.max_rounds, plan.overflow_rounds) == ("pairs", 12, 12, 12,
                                                                                                    0)
    assert effective(TimingPlan()) == TimingPlan()
    assert sustained.sustained_seconds(plan, 3, 12) == (108, 288)  # 12 rounds x 3 pairs x 2 arms x (1.5 .. 4 s)
    from ptxprobe.gpu.dispatch import sustained_cost_note
    from ptxprobe.gpu.plan import PLANT_KINDS, GpuRunConfig, Group, with_plants

    cfg = GpuRunConfig(timing=TimingPlan(regime=SUSTAINED))
    one = with_plants([Group("g", None, "triton")], cfg)  # a sweep of one group plants every kind in it
    pairs = 3 + len(PLANT_KINDS)
    text = sustained_cost_note(cfg, 3, one)
    assert f"up to {pairs} pairs a group" in text
    assert f"about {12 * pairs * 2 * 1.5 / 60:.1f}-{12 * pairs * 2 * 4 / 60:.1f} GPU min" in text
    with pytest.raises(ValueError, match="regime 'idle'"):
        TimingPlan(regime="idle")


def test_the_regime_is_asked_for_on_the_command_line_and_in_the_experiment():
    from ptxprobe.core.errors import SpecError
    from ptxprobe.gpu.plan import run_config
    from ptxprobe.runs.request import with_regime
    from ptxprobe.static.experiment import load_experiment

    exp = with_regime(load_experiment("default"), SUSTAINED)
    assert run_config(exp.run).timing.regime == SUSTAINED
    with pytest.raises(SpecError, match="--regime 'x'"):
        with_regime(exp, "x")
    with pytest.raises(SpecError, match="regime 'x'"):
        run_config({"timing": {"regime": "x"}})


def test_a_regime_text_shows_what_was_recorded_and_no_limit_where_none_was():
    from ptxprobe.reports.gpu_section import regime_text

    slope = ClockSlope(0.006, 0.002, 0.010, 0.95, 40, 30.0)
    reg = Regime(BURST, 40, 1905.0, 30.0, 0.0, 0.25, 650.0, 700.0, slope)
    assert regime_text(reg) == ("burst, 1905±15 MHz, throttled 25%, 650/700 W, clock-dependent +0.60%/100 MHz")
    old = Regime(BURST, 40, 1980.0, 0.0, 0.0, 0.0, 400.0, None, None)
    assert regime_text(old) == "burst, 1980±0 MHz, throttled 0%, 400 W" and regime_text(None) == "-"


def test_a_program_run_keeps_what_the_card_said_while_it_ran_and_the_a_b_carries_its_regime():
    import time

    from ptxprobe.capture import ab
    from ptxprobe.gpu.monitor import Monitor, program_reader, summarize

    clocks = iter(range(1800, 100_000))
    with Monitor(lambda: (next(clocks), 600.0, True), period=0.001) as card:
        time.sleep(0.05)
    assert card.result.readings >= 5 and card.result.throttled_share == 1.0 and card.result.power_w == 600.0
    with Monitor(None) as nothing:
        pass
    assert nothing.result.sm_clock_mhz is None and summarize([(None, None, False)]).readings == 0
    # a program idles the card while it imports and compiles: its kernels' regime is read while the card was busy
    run = [(1980, 120.0, False, False)] * 40 + [(1830, 690.0, True, True)] * 5 + [(1980, 118.0, False, None)] * 3
    seen = summarize(run)
    assert (seen.sm_clock_mhz, seen.power_w, seen.throttled_share, seen.readings) == (1830, 690.0, 1.0, 5)
    assert summarize([(1980, 120.0, False, False)] * 3).power_w == 120.0  # none busy: every reading counts

    class Card:
        def read(self):
            return 1900, 500.0, False

        def busy(self):
            return True

    assert program_reader(Card())() == (1900, 500.0, False, True)
    runs = [ab.Run(arm, r, 0, True, 1.0, (1.0 if arm == "baseline" else 0.99) * (1 + 0.001 * (r % 3)), 1, "",
                   1900.0 - (20 if arm == "trigger" else 0), 650.0, 1.0)
            for r in range(8) for arm in ("baseline", "trigger", "control", "aa")]
    rows = {r["arm"]: r for r in ab.compare(runs, power_limit_w=700.0)}
    reg = Regime.from_fields({**rows["trigger"]["regime"], "rounds": 8})
    assert reg.regime == "program" and reg.clock_delta_mhz == -20 and reg.power_limit_w == 700.0
    assert rows["aa"]["regime"]["clock_delta_mhz"] == 0
    old = [ab.Run(x.arm, x.round, 0, True, 1.0, x.value, 1) for x in runs]  # runs recorded before the monitor
    assert ab.compare(old)[0]["regime"]["clock_mhz"] is None


def test_a_program_tunes_proof_reads_its_regime_from_the_runs_it_kept():
    from dataclasses import asdict

    from ptxprobe.capture.ab import Run
    from ptxprobe.tune.program import proof_regime

    def call(rounds, clock_c1):
        return [asdict(Run(arm, r, 0, True, 1.0, 1.0 if arm == "c0" else 0.98, 1, "", clock, 690.0, 1.0))
                for r in range(rounds) for arm, clock in (("c0", 1900.0), ("c1", clock_c1), ("c2", 1500.0))]

    reg = proof_regime([call(4, 1880.0), call(4, 1880.0)], "c0", "c1", 700.0)
    assert reg.regime == "program" and reg.rounds == 8 and reg.clock_delta_mhz == -20 and reg.power_limit_w == 700.0
    unread = ("sm_clock_mhz", "power_w", "throttled_share")
    old = [[{k: v for k, v in r.items() if k not in unread} for r in call(4, 1)]]
    assert proof_regime(old, "c0", "c1", None).sm_clock_mhz is None  # runs recorded before the readings
    assert proof_regime([], "c0", "c1", None) is None


def test_a_sustained_plan_refuses_settings_that_cannot_hold_and_nvml_reads_the_visible_card(monkeypatch):
    for bad in ({"sustained_rounds": 0}, {"hold_s": 0.0}, {"settle_s": 2.0, "settle_max_s": 1.0}):
        with pytest.raises(ValueError, match="sustained:"):
            TimingPlan(regime=SUSTAINED, **bad)

    class FakeNv:
        def nvmlDeviceGetHandleByIndex(self, i):
            return ("index", i)

        def nvmlDeviceGetHandleByUUID(self, u):
            return ("uuid", u)

    for visible, handle in (("2,3", ("index", 2)), ("GPU-8af6", ("uuid", "GPU-8af6")), ("", ("index", 0))):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert timing._visible_handle(FakeNv()) == handle


def test_a_run_directory_timed_in_one_regime_is_not_resumed_in_the_other(tmp_path):
    from ptxprobe.core.errors import SpecError
    from ptxprobe.gpu.dispatch import refuse_other_regime

    burst = [{"group_id": "g", "ratio_vs_baseline": 1.01, "regime": "burst"}, {"group_id": "g", "ratio_vs_baseline":
                                                                                 None, "regime": None}]
    refuse_other_regime(burst, BURST, tmp_path)  # the same regime resumes
    refuse_other_regime([], SUSTAINED, tmp_path)  # nothing timed yet
    with pytest.raises(SpecError, match="timed in the burst regime; --regime sustained would mix"):
        refuse_other_regime(burst, SUSTAINED, tmp_path)
    old = [{"group_id": "g", "ratio_vs_baseline": 1.0}]  # recorded before regimes: bursts
    with pytest.raises(SpecError, match="burst regime"):
        refuse_other_regime(old, SUSTAINED, tmp_path)


def test_the_command_line_refuses_to_resume_a_run_in_another_regime_before_any_work(tmp_path, capsys):
    import json as _json

    from ptxprobe.cli import main
    from ptxprobe.core.store import RUNTIME_LOG

    out = tmp_path / "run"
    out.mkdir()
    (out / RUNTIME_LOG).write_text(_json.dumps({"group_id": "g", "ratio_vs_baseline": 1.01, "regime": "burst"}) + "\n")
    code = main(["rename-sweep", "-o", str(out), "--regime", "sustained", "--run", "-s", "kernels=vector_add"])
    err = capsys.readouterr().err
    assert code == 2 and "timed in the burst regime; --regime sustained would mix" in err
    assert sorted(p.name for p in out.iterdir()) == [RUNTIME_LOG]  # nothing else was written


def test_a_program_tuned_alone_refuses_a_regime_it_cannot_hold(tmp_path, capsys):
    from ptxprobe.cli import main

    code = main(["tune", "-o", str(tmp_path / "t"), "--regime", "sustained", "--", "python3", "-c", "pass"])
    assert code == 2 and "a program tuned alone is measured by its own runs" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


def test_a_program_tunes_proof_is_not_proven_faster_below_its_metrics_printed_digits():
    """ms=1.23 for yours and ms=1.22 for the other code, every run: identical rounds, a zero-width interval at
    1.0082 that once proved it faster; widened to what two decimals can resolve (from the proof's kept runs), it is
    not; with enough digits the proof stands as it was."""
    from dataclasses import asdict

    from ptxprobe.capture.ab import Run
    from ptxprobe.tune.program import proof_pairs, to_printed_digits
    from ptxprobe.tune.proof import Proof

    def calls(resolution):
        return [[asdict(Run(arm, r, 0, True, 1.0, v, 1, "", resolution=resolution)) for r in range(6)
                 for arm, v in (("c0", 1.23), ("c1", 1.22))]]

    zero = Proof("c1", 6, 1, 1.23 / 1.22, 1.23 / 1.22, 1.23 / 1.22, 0.95, stats.FASTER, 0.03, "settled")
    rounded = to_printed_digits(zero, proof_pairs(calls(0.01), "c0", "c1"), 0.005)
    assert rounded.low <= 1.0 + 1e-9 <= rounded.high and rounded.verdict not in stats.SIGNIFICANT
    assert rounded.outcome != "confirmed" and rounded.p_value >= 0.05
    assert to_printed_digits(zero, proof_pairs(calls(None), "c0", "c1"), 0.005) == zero  # wall time: no floor
