"""FINDINGS: the atlas's speed sample (ops timed on a GPU in their own library's call path, ``capture --run``), read
through experiments/atlas/speed.py from the committed run directories."""

from __future__ import annotations

import json

from experiments.analysis import static_runs as analysis
from experiments.atlas.speed import op_record

TRIAL = "2026-12-06-h100-atlas-speed-trial"  # h200_study.sh atlas-speed, cut by its time limit


def trial_section() -> list[str]:
    """The first trial: what one op's program A/B costs and how far its measure moves between runs of one code."""
    d = analysis.results_dir(TRIAL)
    rec = op_record(d, {"liger_kernel": "liger-kernel"})
    ab = json.loads((d / "ab" / "ab.json").read_text())
    runs = [r for r in ab["runs"] if r["ok"]]
    seconds = [r["seconds"] for r in runs]
    values = [r["value"] for r in runs]
    same = [r["value"] for r in runs if r["arm"] in ("baseline", "aa")]
    verdicts = sorted({c["verdict"] for c in rec["comparisons"].values()})
    gpu = json.loads((d / "manifest.json").read_text())["gpu"].split(",")[0]
    deltas = ", ".join(f"{int(k):+d} registers" for k in rec["register_deltas"])
    return [f"**Speed in a library's own call path, a first trial** (`{TRIAL}`, {gpu}, `bash experiments/gpu/"
            "h200_study.sh atlas-speed`): liger-kernel's RMSNorm, forward and backward at Llama-3-8B's shapes, "
            f"{rec['kernels']} kernels of which the trigger changes {rec['changed_by_trigger']} "
            f"(`{'`, `'.join(rec['changed_functions'])}`: {deltas}), timed by `ptxprobe capture --run` with the "
            f"driver's median ms per call as the measure ({rec['seconds_per_run']:g} s of calls per run). Each "
            f"program run took {min(seconds):.0f} to {max(seconds):.0f} s, so {len(runs)} runs fit the time limit "
            f"and no arm has a verdict ({', '.join(verdicts)}); the measure moved from {min(values):.3f} to "
            f"{max(values):.3f} ms between runs, and between the runs of identical code alone (the baseline and "
            f"its A/A copy) from {min(same):.3f} to {max(same):.3f} ms. A difference of that size between runs of "
            "one code hides any the name could make; what moves it is not established here (the op is launched "
            "call by call from Python at shapes where its kernels take about a millisecond, so the host's share "
            "may dominate). The sample's next run should time each op as a CUDA graph or at larger shapes, and "
            "start its programs faster; fla-core's op and the Inductor capture were cut before they finished "
            "their first run.", ""]
