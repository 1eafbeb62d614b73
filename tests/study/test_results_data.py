"""The committed results, checked through the analysis API (CPU only: the H200 data is committed)."""

from __future__ import annotations

import pytest

from experiments.analysis import static_runs as analysis
from experiments.analysis import superseded

pytestmark = pytest.mark.study

RUNTIME = "2026-12-02-h200-runtime-ptxas124"


@pytest.fixture(scope="module")
def runtime():
    return analysis.load_runtime(analysis.results_dir(RUNTIME))


def test_gpu_run_has_its_manifest(runtime):
    d = analysis.results_dir(RUNTIME)
    man = analysis.load_manifest(d)
    assert man["triton"] == "3.6.0" and any(t["kind"] == "ptxas" for t in man["tools"])
    import json

    gpu = json.loads((d / "gpu.json").read_text())
    assert gpu["gpu"] == "NVIDIA H200" and gpu["driver"] and gpu["arch"] == "sm_90a"
    assert set(runtime.gpu) == {"NVIDIA H200"}


def test_launched_code_is_the_analysed_code(runtime):
    named = runtime[runtime.name_template.notna()]
    tritons = named[named.aot_matches_launch.notna()]
    assert len(tritons) > 0 and tritons.aot_matches_launch.astype(bool).all()


def test_outputs_complete_and_accurate(runtime):
    named = runtime[runtime.name_template.notna()]
    assert named.fully_written.astype(bool).all() and (named.nan_count == 0).all()
    assert named[named.dtype == "fp16"].rel_err_vs_reference.max() < 1e-3
    assert named[named.dtype.str.startswith("fp8")].rel_err_vs_reference.max() < 0.1


def test_stored_ratios_recompute_from_raw_times(runtime):
    for _, row in runtime[runtime.name_template == "cutlass_{base}"].head(12).iterrows():
        iv = analysis.recompute(runtime, row.group_id, row.label)
        assert iv.estimate == pytest.approx(row.ratio_vs_baseline, rel=1e-12)
        assert iv.low == pytest.approx(row.ratio_ci_low, rel=1e-9)
        assert superseded.runtime_verdict(iv) == row.runtime_verdict


def test_control_name_never_clears_the_noise_floor(runtime):
    eff = analysis.runtime_effects(runtime)
    ctrl = eff[eff.name_template == "xutlass_{base}"]
    assert len(ctrl) > 0 and (ctrl.runtime_verdict_vs_floor == "no_difference").all()
    assert analysis.aa_summary(runtime)["floor_false_positives"] == 0


def test_static_analysis_tables():
    matrix = analysis.load_static(analysis.results_dir("2026-12-02-cpu-ptxas-matrix"))
    cm = analysis.change_matrix(matrix)
    assert set(cm.index) == {"sm_90a", "sm_100a", "sm_120a"}
    assert cm.loc["sm_100a"].dropna().eq(1.0).all()  # every kernel changes on Blackwell
    xm = analysis.change_matrix(matrix, "xutlass_{base}")
    assert xm.fillna(0).eq(0.0).all().all()  # the control name never does
    det = analysis.determinism(matrix)
    assert det[det.arch == "sm_100a"].nondeterministic.sum() > 0
    deltas = analysis.register_deltas(matrix)
    assert {"register_delta", "capmerc_ratio"} <= set(deltas.columns)


def test_independent_runs_agree_on_verdicts():
    d64_d128 = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-runtime-d64-d128"))
    ptxas124 = analysis.load_runtime(analysis.results_dir(RUNTIME))
    agreement = analysis.verdict_agreement(d64_d128, ptxas124, "12.8.93")
    assert agreement["shared"] >= 40
    assert agreement["agree"] / agreement["shared"] >= 0.9, agreement["disagreements"]


def test_cuda_kernel_run():
    r = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-cuda"))
    eff = analysis.runtime_effects(r)
    assert set(eff.dtype) == {"fp16", "bf16"}
    assert eff.bitwise_equal_to_baseline.astype(bool).all()
    assert eff[eff.dtype == "fp16"].rel_err_vs_reference.max() < 1e-3
    assert eff[eff.dtype == "bf16"].rel_err_vs_reference.max() < 1e-2
    assert (eff.runtime_verdict_vs_floor == "no_difference").all()
    sdpa = analysis.versus_sdpa(r)
    assert {"sdpa_cudnn", "sdpa_flash", "{base}"} <= set(sdpa.columns)


def test_ptxas124_speedup_repeats_with_the_same_sign():
    original = analysis.load_runtime(analysis.results_dir(RUNTIME))
    rep = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-repeat-ptxas124"))
    agreement = analysis.verdict_agreement(original, rep, "12.4.131")
    assert agreement["shared"] == 32
    opposite = [d for d in agreement["disagreements"] if {d[1], d[2]} == {"faster", "slower"}]
    assert not opposite
    eff = analysis.runtime_effects(rep)
    cut = eff[eff.name_template == "cutlass_{base}"]
    assert (cut.ratio_vs_baseline > 1).all()
    assert (eff[eff.name_template == "xutlass_{base}"].runtime_verdict_vs_floor == "no_difference").all()


def test_trigger_is_a_case_sensitive_substring():
    names = analysis.load_static(analysis.results_dir("2026-12-02-cpu-cutlass-names"))
    trig = analysis.name_triggers(names)
    assert len(trig) == 12  # every non-baseline template of the study
    for template, row in trig.iterrows():
        changes = row[["sm_100a", "sm_120a"]].min() > 0
        assert changes == analysis.predicted_by_strstr(template), template
        if not analysis.predicted_by_strstr(template):
            assert row.max() == 0  # non-triggers change nothing anywhere


def test_user_kernel_runs_on_the_h200():
    """sgemm.cu (FFMA-bound): `cutlass_` is faster, in two runs; the Triton matmul: no effect. Numbers unchanged."""
    run = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-user-kernels"))
    rep = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-user-sgemm-repeat"))
    named = run[run.name_template.notna()]
    assert named.passes_tolerance.astype(bool).all() and named.bitwise_equal_to_baseline.astype(bool).all()
    assert set(named.family) == {"cuda", "triton-user"}
    triton = named[named.family == "triton-user"]
    assert triton[triton.run_ptxas_version == "12.8.93"].aot_matches_launch.astype(bool).all()
    for r in (run, rep):
        eff = analysis.runtime_effects(r)
        sgemm = eff[eff.kernel == "sgemm.cu:sgemm"]
        cut = sgemm[sgemm.name_template == "cutlass_{base}"]
        assert len(cut) == 4 and (cut.ratio_vs_baseline > 1.02).all() and (cut.registers == 112).all()
        assert (cut.runtime_verdict_vs_floor == "faster").sum() >= 3
        assert (sgemm[sgemm.name_template == "xutlass_{base}"].runtime_verdict_vs_floor == "no_difference").all()
    eff = analysis.runtime_effects(run)
    assert (eff[eff.family == "triton-user"].runtime_verdict_vs_floor == "no_difference").all()
    for version in ("12.8.93", "12.4.131"):
        agreement = analysis.verdict_agreement(run, rep, version)
        assert agreement["shared"] == 4 and agreement["agree"] >= 3
        assert not [d for d in agreement["disagreements"] if {d[1], d[2]} == {"faster", "slower"}]


def test_sgemm_name_effect_holds_with_the_newest_ptxas():
    """ptxas 12.9 and 13.0 give the baseline 105 registers, `cutlass_sgemm` 112: still faster, beyond the floor."""
    r = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-user-sgemm-newest"))
    eff = analysis.runtime_effects(r)
    assert set(eff.run_ptxas_version) == {"12.9.86", "13.0.88"}
    cut, ctl = eff[eff.name_template == "cutlass_{base}"], eff[eff.name_template == "xutlass_{base}"]
    assert (cut.registers == 112).all() and (ctl.registers == 105).all()
    assert (cut.runtime_verdict_vs_floor == "faster").all() and (cut.ratio_vs_baseline > 1.04).all()
    assert (ctl.runtime_verdict_vs_floor == "no_difference").all()
    assert eff.bitwise_equal_to_baseline.astype(bool).all()


def test_aa_noise_floor_with_sixty_rounds():
    """60 rounds bring the median A/A half-width under 0.5 % (not every group); no false A/A effects."""
    r = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-aa-rounds"))
    aa = analysis.aa_summary(r)
    assert aa["groups"] == 8 and aa["median_halfwidth"] < 0.005 and aa["floor_false_positives"] == 0
    assert (r[r.label.str.endswith("#AA")].rounds == 60).all()
    eff = analysis.runtime_effects(r)
    assert (eff.runtime_verdict_vs_floor == "no_difference").all()  # ptxas 12.8: no name effect, as before


def test_slowed_control_with_sixty_rounds():
    """The ~2 %-slower control: the plain verdict sees it in every group, the floor verdict where A/A is tight."""
    r = analysis.load_runtime(analysis.results_dir("2026-12-02-h200-slow-control"))
    slow = r[r.label.str.endswith("#slowed")]
    assert len(slow) == 4 and slow.ratio_vs_baseline.between(0.97, 0.99).all()
    assert (slow.runtime_verdict == "slower").all()
    by_floor = dict(
        zip(slow.kernel.str.split("/").str[0] + "/" + slow.dtype, slow.runtime_verdict_vs_floor, strict=True)
    )
    assert by_floor["attention/fp16"] == by_floor["attention/fp8e5"] == "slower"
    aa = analysis.aa_summary(r)
    assert aa["floor_false_positives"] == 0 and aa["raw_false_positives"] == 0
