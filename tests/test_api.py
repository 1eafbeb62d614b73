"""The public API (``api.sweep``, ``open_run``, ``compare``, ``time_callable``): on CPU the sweep and the run
directory for real, the records' shapes, and the comparison's statistics on synthetic rounds (a planted 1 %
slowdown must come out ``slower``, an A/A pair ``equivalent``); on a GPU (``-m gpu``, skipped without CUDA)
a matmul compared with itself and with a wider, slower one."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ptxprobe import api
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import NoGpu, SpecError
from ptxprobe.gpu.compare import Comparison, TimedBlock, Timing, judge, labelled
from ptxprobe.gpu.timing import Sampled, TimingPlan
from ptxprobe.stats import paired as stats
from tests.ptx_text import AXPY_PTX

TIER = "integration"  # each test without its own tier (conftest): the sweep runs ptxas; the GPU tests are gpu
SIZED = 0.75  # a sample lasts at least this share of min_sample_ms (sized from a one-launch probe)


def test_importing_the_api_stays_cheap():
    code = ("import sys; from ptxprobe import api; fns = [api.sweep, api.open_run, api.compare, "
            "api.time_callable]; "
            "print(sorted(m for m in ('torch', 'pandas', 'triton', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- the sweep and its run directory, for real (a 15-line PTX kernel, one arch, Triton's ptxas) ---------------

def test_sweep_runs_resumes_and_its_run_directory_reads_back(tmp_path):
    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY_PTX)
    axes = {"ptx_files": [str(ptx)], "kernels": [], "archs": "sm_90a", "ptxas": "triton", "repeat": 1,
            "names": ["{base}", "cutlass_{base}"]}
    outcome = api.sweep("default", out=tmp_path / "run", jobs=1, **axes)
    assert outcome.out_dir == tmp_path / "run" and outcome.ran == 2 and outcome.skipped == 0 and not outcome.failed
    assert sorted(r["name"] for r in outcome.rows) == ["axpy", "cutlass_axpy"]
    assert {r["arch"] for r in outcome.rows} == {"sm_90a"}

    again = api.sweep("default", out=tmp_path / "run", jobs=1, **axes)  # resumed: nothing assembled again
    assert (again.ran, again.skipped) == (0, 2)

    run = api.open_run(outcome.out_dir)
    assert run.has_static and not run.has_runtime
    assert {r["variant_id"] for r in run.static_rows()} == {r["variant_id"] for r in outcome.rows}
    assert len(run.static_table()) == 2
    assert run.manifest["experiment"]["archs"] == ["sm_90a"]


def test_sweep_retargets_ptx_files_to_the_archs_asked_for_as_the_cli_does(tmp_path):
    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY_PTX.replace(".target sm_90a", ".target sm_90"))
    out = api.sweep("default", tmp_path / "run", ptx_files=[str(ptx)], kernels="", archs="sm_90a", ptxas="triton",
                    names="{base},cutlass_{base}", repeat=1, cache=Cache(tmp_path / "cache"))
    assert {r["arch"] for r in out.rows} == {"sm_90a"}
    assert api.make_experiment("default", ptx_files=[str(ptx)], archs="sm_90a", file_archs="sm_90").file_archs == (
        "sm_90",)  # given apart, file_archs is kept


def test_the_manifest_records_the_triton_knobs_set(tmp_path, monkeypatch):
    """TRITON_DEFAULT_FP_FUSION changes the PTX Triton emits (its default flips in 3.10): a run says how it was set."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY_PTX)
    api.sweep("default", tmp_path / "run", ptx_files=[str(ptx)], kernels="", archs="sm_90a", ptxas="triton",
              names="{base},cutlass_{base}", repeat=1, cache=Cache(tmp_path / "cache"))
    assert api.open_run(tmp_path / "run").manifest["triton_env"]["TRITON_DEFAULT_FP_FUSION"] == "0"


def test_your_kernels_get_the_names_the_command_line_gives_them(tmp_path):
    """A kernel whose symbol already holds the trigger is compared with it removed, through the API as through the
    command line (the API once kept cutlass_{base}, and a library's unreadable mangled names failed outright)."""
    from ptxprobe.runs.request import SweepRequest, UserKernels, plan_sweep

    ptx = tmp_path / "k.ptx"
    ptx.write_text(AXPY_PTX.replace("axpy", "cutlass_axpy"))
    exp = api.make_experiment("default", ptx_files=[str(ptx)], kernels=[], archs="sm_90a", ptxas="triton")
    cli = plan_sweep(SweepRequest(kernels=UserKernels(ptx=(str(ptx),)), axes={"archs": ["sm_90a"],
                                                                              "ptxas": ["triton"]}))
    assert exp.names == cli.experiment.names and "{base}" not in exp.names[:1]
    given = api.make_experiment("default", ptx_files=[str(ptx)], kernels=[], names="{base},cutlass_{base}")
    assert given.names == ("{base}", "cutlass_{base}")  # names given are kept


def test_a_sweep_on_a_cluster_is_told_its_address(tmp_path, monkeypatch):
    """api.sweep(executor="ray", ray_address=...) joins that cluster (docs/ray.md's local_cluster example)."""
    from ptxprobe.static import sweep as sweeping

    seen = {}
    monkeypatch.setattr(sweeping, "run_sweep", lambda exp, out, **kw: seen.update(kw, out=out))
    api.sweep("default", out=tmp_path / "r", executor="ray", ray_address="127.0.0.1:6379", archs="sm_90a")
    assert (seen["executor"], seen["ray_address"], seen["out"]) == ("ray", "127.0.0.1:6379", tmp_path / "r")


def test_sweep_refuses_a_bad_axis_and_open_run_a_missing_directory(tmp_path):
    with pytest.raises(SpecError, match="repeat"):
        api.sweep("default", out=tmp_path / "run", repeat=0)
    assert not (tmp_path / "run").exists()
    with pytest.raises(FileNotFoundError):
        api.open_run(tmp_path / "nowhere")


def test_overrides_are_spelled_as_the_command_line_spells_them():
    exp = api.make_experiment("default", archs=["sm_90a", "sm_100a"], names="{base},cutlass_{base}",
                                   causal=[True, False], repeat=2)
    assert exp.archs == ("sm_90a", "sm_100a") and exp.names == ("{base}", "cutlass_{base}")
    assert exp.families.causal == (True, False) and exp.repeats("sm_90a") == 2


# --- the comparison's statistics on synthetic rounds (no GPU) ---------------------------------------------------

def rounds(factor: float, n: int = 30, seed: int = 0, noise: float = 0.001) -> tuple[list[float], list[float]]:
    """Per-round per-launch times of a baseline and of ``other`` = ``factor`` x baseline, both under a clock that
    wanders by 2 % from round to round (shared within a round) with 0.1 % noise of their own."""
    rng = np.random.default_rng(seed)
    clock = 1.0 + 0.02 * np.cumsum(rng.normal(0, 0.2, n))
    base = 0.8 * clock * (1 + rng.normal(0, noise, n))
    other = 0.8 * factor * clock * (1 + rng.normal(0, noise, n))
    return base.tolist(), other.tolist()


def _judged(factor: float, n: int = 30, plan: TimingPlan | None = None) -> Comparison:
    base, other = rounds(factor, n)
    timings = {"base": Timing("base", tuple(base)), "other": Timing("other", tuple(other))}
    (c,) = judge(timings, "base", plan or TimingPlan())
    return c


def test_a_planted_one_percent_slowdown_comes_out_slower_and_sized():
    c = _judged(1.01)
    assert (c.baseline, c.other, c.verdict) == ("base", "other", stats.SLOWER)
    assert c.high < 1.0 and c.low <= 1 / 1.01 <= c.high  # throughput ratio: the other runs at 1/1.01 the rate
    assert c.ratio == pytest.approx(1 / 1.01, abs=0.001)
    assert c.rounds == 30 and c.level == pytest.approx(0.975)  # two looks (20, 30): Bonferroni over them
    assert c.p_value < 0.01 and c.margin == stats.EQUIVALENCE_MARGIN and c.interval == stats.SERIAL_SIGNED_RANK


def test_an_a_a_pair_comes_out_equivalent_and_the_block_stops_on_target():
    c = _judged(1.0)
    assert c.verdict == stats.EQUIVALENT and c.low < 1.0 < c.high
    assert c.half_width <= TimingPlan().target_halfwidth and c.stopped_by == "target"
    assert _judged(1.0, n=25).stopped_by is None  # 25 rounds is no look of the stopping rule: it says nothing


def test_a_faster_other_and_a_noisy_pair_are_decided_as_such():
    assert _judged(0.99).verdict == stats.FASTER
    base, other = rounds(1.0, n=20, noise=0.02)
    (c,) = judge({"a": Timing("a", tuple(base)), "b": Timing("b", tuple(other))}, "a", TimingPlan())
    assert c.verdict == stats.INCONCLUSIVE and c.stopped_by is None  # 20 rounds, too wide: the rule goes on


def test_an_interleaved_baseline_is_paired_through_its_partners():
    """Interleaved, the baseline runs in every pair: its times for each pair are what that pair compares."""
    slow_b, slow = rounds(1.01, seed=1)
    same_b, same = rounds(1.0, seed=2)
    base = Timing("base", tuple(x for pair in zip(slow_b, same_b, strict=True) for x in pair), 2,
                  partners={"slow": tuple(slow_b), "same": tuple(same_b)})
    timings = {"base": base, "slow": Timing("slow", tuple(slow), 2, partners={"base": tuple(slow)}),
               "same": Timing("same", tuple(same), 2, partners={"base": tuple(same)})}
    slow_c, same_c = judge(timings, "base", TimingPlan())
    assert (slow_c.other, slow_c.verdict, slow_c.rounds) == ("slow", stats.SLOWER, 30)
    assert (same_c.other, same_c.verdict) == ("same", stats.EQUIVALENT)


def test_records_keep_the_raw_samples_and_serialise():
    s = Sampled("k", [0.5, 0.52, 0.51], sm_clock_mhz=[1980, None, 1975], throttled=[False, True, False],
                launches_per_sample=20, partners={"b": [0.5, 0.52, 0.51]})
    t = Timing.of(s)
    assert t.times_ms == (0.5, 0.52, 0.51) and t.n == 3 and t.median_ms == 0.51 and t.throttled_samples == 1
    assert t.launches_per_sample == 20 and t.partners == {"b": (0.5, 0.52, 0.51)}
    assert t.per_second(1e9) == pytest.approx(1e9 / 0.51e-3)
    assert t.sampled().paired_with(Sampled("b", [1.0] * 3, partners={"k": [1.0] * 3}))[0] == [0.5, 0.52, 0.51]
    c = Comparison("a", "b", 0.99, 0.98, 0.995, 0.95, stats.SLOWER, 20, 0.001, 0.005, "signed-rank", "target")
    block = TimedBlock("a", {"k": t}, (c,), TimingPlan(), 1.5)
    rec = json.loads(json.dumps(block.to_json()))
    assert rec["timings"]["k"]["times_ms"] == [0.5, 0.52, 0.51] and rec["timings"]["k"]["median_ms"] == 0.51
    assert rec["comparisons"][0]["half_width"] == pytest.approx(0.0075) and rec["plan"]["design"] == "interleaved"
    assert block.comparison("b") is c
    with pytest.raises(KeyError):
        block.comparison("c")


def test_labels_come_from_a_mapping_or_the_functions_names():
    def mm():
        pass

    assert list(labelled({"x": mm, "y": mm})) == ["x", "y"]
    assert list(labelled([mm, mm, lambda: None])) == ["mm", "mm#1", "lambda#2"]


def test_without_a_gpu_compare_and_time_callable_raise_no_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    with pytest.raises(NoGpu, match="no CUDA GPU"):
        api.compare({"a": lambda: None, "b": lambda: None})
    with pytest.raises(NoGpu):
        api.time_callable(lambda: None)
    with pytest.raises(ValueError, match="two or more"):
        api.compare({"a": lambda: None})


# --- on a GPU: python3 -m pytest -q -m gpu tests/test_api.py ----------------------------------------------------

def _cuda():
    try:
        import torch
    except ImportError:
        pytest.skip("torch not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible")
    return torch


@pytest.mark.gpu
def test_compare_finds_a_wider_matmul_slower_and_a_matmul_equivalent_to_itself():
    torch = _cuda()
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=gen)
    wide = torch.randn(4096, 4608, device="cuda", dtype=torch.bfloat16, generator=gen)  # 12.5 % more work
    c, c_wide = a @ b, a @ wide

    def mm():
        torch.matmul(a, b, out=c)

    def mm_wide():
        torch.matmul(a, wide, out=c_wide)

    block = api.compare({"mm": mm, "mm_again": mm, "mm_wide": mm_wide})
    aa, slower = block.comparison("mm_again"), block.comparison("mm_wide")
    print(json.dumps([aa.to_json(), slower.to_json()], indent=1))
    assert aa.verdict == stats.EQUIVALENT, aa
    assert slower.verdict == stats.SLOWER and slower.high < 0.97, slower
    assert aa.stopped_by in ("target", "ceiling", "cap") and aa.rounds >= TimingPlan().min_rounds
    t = block.timings["mm"]
    assert t.launches_per_sample >= 1 and t.n >= 2 * aa.rounds  # the baseline runs in both pairs every round
    # samples are sized from a probe of one launch outside a graph, which reads slower than the graph replays it
    # (on the H200: 44 launches of 0.2006 ms, 8.8 ms for a 10 ms target): roughly the target, not exactly
    assert t.launches_per_sample * t.median_ms >= SIZED * TimingPlan().min_sample_ms

    one = api.time_callable(mm, rounds=5)
    assert one.label == "mm" and one.n == 5 and one.launches_per_sample * one.median_ms >= SIZED * 10.0
    assert one.median_ms == pytest.approx(t.median_ms, rel=0.1)
    tflops = one.per_second(2.0 * 4096**3) / 1e12
    assert 100 < tflops < 1500, tflops


@pytest.mark.gpu
def test_a_sustained_compare_holds_each_callable_and_reports_its_regime():
    """Each arm held alone (replays queued in batches) after its clock settles: the wider matmul still slower, the
    rounds as asked, every comparison with its regime, the clock and power read from the card CUDA sees."""
    torch = _cuda()
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=gen)
    wide = torch.randn(4096, 4608, device="cuda", dtype=torch.bfloat16, generator=gen)
    c, c_wide = a @ b, a @ wide

    def mm():
        torch.matmul(a, b, out=c)

    def mm_wide():
        torch.matmul(a, wide, out=c_wide)

    block = api.compare({"mm": mm, "mm_wide": mm_wide}, rounds=4, regime="sustained", hold_s=0.3, settle_s=0.2,
                        settle_max_s=1.0)
    slower = block.comparison("mm_wide")
    print(json.dumps(slower.to_json(), indent=1))
    assert slower.rounds == 4 and slower.ratio < 0.97 and slower.regime.regime == "sustained"
    reg = slower.regime
    assert reg.sm_clock_mhz is None or 500 < reg.sm_clock_mhz < 3000
    assert reg.power_limit_w is None or reg.power_w is None or 0 < reg.power_w <= 1.2 * reg.power_limit_w
    assert block.gpu_seconds >= 4 * 2 * (0.3 + 0.2)


def test_a_module_wide_template_with_an_uncached_registered_kernel_plans(tmp_path):
    """The one-name check reads a registered kernel only from the cache; uncached, there is nothing to check (it
    raised AttributeError on the missing PTX when a template spans the module)."""
    from ptxprobe.runs.request import SweepRequest, plan_sweep

    req = SweepRequest(axes={"kernels": ["attention"], "names": ["{base}", "{module_untriggered}"]},
                       use_cache=False, run=False, out=str(tmp_path / "o"))
    assert plan_sweep(req).experiment.names == ("{base}", "{module_untriggered}")
