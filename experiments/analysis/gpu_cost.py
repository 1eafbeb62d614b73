"""Where a GPU run's seconds go: the kernels timed (names, plants, the SDPA references), the plants' setup, and the
rest (warm-up and the gaps between replays), from what each group recorded; records out, no prose."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ptxprobe.api import RunDir, read_log


@dataclass(frozen=True)
class GpuTimeParts:
    """A run's GPU seconds per 48 groups, by part. ``untimed`` is what no sample covers: the warm-up before each
    block and the host's time between replays; ``planned_warmup`` is what the plan's warm-up alone asks for
    (``warmup_s`` per label of each block, ``card_warmup_s`` once)."""

    groups: int
    names: float
    plants: float
    references: float
    setup: float
    untimed: float
    planned_warmup: float
    total: float
    warmup_s: float


def _sample_seconds(samples: dict) -> float:
    return sum(samples["times_ms"]) * samples["launches_per_sample"] / 1000.0


def gpu_time_parts(run_dir: str | Path) -> GpuTimeParts:
    """The parts of a run's GPU seconds, scaled to 48 groups (the study's size). A label's samples are times per
    launch, so a sample's seconds are its time times its launches; a names block's samples cover both labels of
    each interleaved pair, so the parts add up to the block's replays."""
    run = RunDir(run_dir)
    groups = run.groups
    timed = {"names": 0.0, "sdpa": 0.0}
    references: dict[str, int] = {}
    for row in read_log(Path(run_dir) / "runtime.jsonl"):
        if row.get("samples"):
            timed[row["block"]] = timed.get(row["block"], 0.0) + _sample_seconds(row["samples"])
            if row["block"] == "sdpa":
                references[row["group_id"]] = references.get(row["group_id"], 1) + 1  # the baseline runs too
    plants = sum(_sample_seconds(s) for g in groups for s in (g.get("calibration_samples") or {}).values())
    setup = sum((g.get("calibration") or {}).get("gpu_seconds", 0.0) for g in groups)
    total = sum(g["gpu_seconds"] for g in groups)
    plan = groups[0]["timing_plan"]
    labels = sum(len({x for pair in g["compared"] for x in pair}) + references.get(g["group_id"], 0) for g in groups)
    warmup = plan.get("warmup_s", 0.0) * labels + plan.get("card_warmup_s", 0.0)
    scale = 48 / len(groups)
    untimed = total - timed["names"] - timed["sdpa"] - plants - setup
    return GpuTimeParts(len(groups), timed["names"] * scale, plants * scale, timed["sdpa"] * scale, setup * scale,
                        untimed * scale, warmup * scale, total * scale, plan.get("warmup_s", 0.0))
