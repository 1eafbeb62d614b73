"""``ptxprobe explain`` on a GPU: profile one committed sgemm group under ncu and check the attribution.

Skips, saying which, without a GPU, without ncu, or where ncu cannot read the hardware counters.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "experiments/results/2026-12-02-h200-design-user"


def _need_gpu_and_counters():
    torch = pytest.importorskip("torch", reason="torch not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible")
    from ptxprobe.core.errors import ToolNotFound
    from ptxprobe.explain.profile import find_ncu

    try:
        return find_ncu()
    except ToolNotFound as exc:
        pytest.skip(str(exc))


def test_explain_profiles_a_group_and_its_checks_hold(tmp_path):
    _need_gpu_and_counters()
    from ptxprobe.core.errors import NoGpu
    from ptxprobe.explain.run import EXPLAIN_DIR, analyze, profile_run

    run = tmp_path / "run"  # the committed run's records, without its committed profiles
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("explain"))
    try:
        profile_run(run, ["sgemm@m=2048,n=2048,k=2048"], max_groups=1)
    except NoGpu as exc:  # ncu runs but the counters are not readable on this machine
        pytest.skip(f"ncu cannot read hardware counters: {exc}")
    assert (run / EXPLAIN_DIR / "manifest.json").exists()
    doc = analyze(run)
    assert len(doc["groups"]) == 2
    for g in doc["groups"]:
        assert g["checks"]["joined_all_samples"]
        assert g["checks"]["opcode_mismatches"] == {"baseline": 0, "variant": 0}
        assert g["samples"]["baseline"] > 10_000
    cut = next(g for g in doc["groups"] if g["variant"].startswith("cutlass_"))
    assert cut["checks"]["duration_sign_agrees"] is True
