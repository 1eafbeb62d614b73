"""The analysis notebook runs top to bottom on the committed data, and every plot has data."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.study

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "naming_effect.ipynb"


def test_notebook_is_small_in_git():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    assert NOTEBOOK.stat().st_size < 50_000


def test_notebook_executes_with_plots_and_computed_conclusions(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) >= 8  # one per plotting cell; each cell asserts its axes hold data
    text = " ".join(o["data"].get("text/markdown", "") for o in outputs if o.output_type == "display_data")
    # the conclusions carry the numbers the committed data give (computed here independently of the notebook)
    import pandas as pd

    from experiments.analysis import gpu_runs as analysis_gpu
    from experiments.analysis import static_runs as analysis

    eff = pd.concat([analysis_gpu.name_effects(analysis_gpu.load(analysis.results_dir(r)))
                     for r in ("2026-12-03-h200-interleaved", "2026-12-03-h200-interleaved-user")], ignore_index=True)
    cut = eff[eff.name_template == "cutlass_{base}"]
    assert f"in {int((cut.q_value <= 0.05).sum())} of {len(cut)} groups" in text
    assert f"in {int(eff.bitwise_equal_to_baseline.astype(bool).sum())} of {len(eff)} renamed rows" in text
    cal = analysis_gpu.calibration(analysis.results_dir("2026-12-03-h200-interleaved"))
    assert f"A/A false-positive rate {cal['aa_false_positive_rate']:.1%}" in text
    assert f"{cal['gpu_seconds'] / cal['groups'] * 48:.0f} GPU s per 48 groups" in text
    # every default, run twice: what `repro` says of the pair (recomputed here)
    from ptxprobe.core.store import read_log
    from ptxprobe.reports import repro

    rec, new = (read_log(analysis.results_dir(r) / "runtime.jsonl")
                for r in ("2026-12-03-h200-defaults", "2026-12-03-h200-defaults-repro"))
    rows = repro.compare_runtime(rec, new)
    assert f"`repro`: {sum(r.status == repro.REPRODUCED for r in rows)} of {len(rows)} comparisons reproduce" in text
    assert f"between-run SD estimate {repro.between_run_sd(rec, new) * 100:.3f} %" in text
    # the Gluon Hopper attention's name statically, and a CuTe DSL kernel under its own name on the H200
    from experiments.analysis import external_runs as analysis_external

    hs = analysis.load_static(analysis.results_dir("2026-12-03-cpu-gluon-hopper-static"))
    cut = hs[(hs.repeat == 0) & (hs.name_template == "cutlass_{base}")]
    assert f"in {int(cut.verdict.isin(analysis.DIFFERS).sum())} of {len(cut)} kernel × release cells" in text
    aot = analysis_external.aot_comparisons(analysis.results_dir("2026-12-03-h200-cute-dsl-aot") / "cute_aot.json")
    tutorial = analysis.results_dir("2026-12-03-h200-capture-tutorial-8rounds")
    tut = analysis_external.program_ab(tutorial / "ab" / "ab.json")
    t = tut[tut.arm == "trigger"].iloc[0]
    assert f"{t.ratio:.4f} [{t.low:.4f}, {t.high:.4f}] ({t.verdict}, {t.rounds} rounds)" in text
    fa2 = aot[(aot.case == "ampere_fa2_fp16_full") & (aot.role == "trigger")].iloc[0]
    assert f"throughput [{fa2.low:.4f}, {fa2.high:.4f}] ({fa2.verdict})" in text

