"""Running the planned groups: one worker per visible GPU, one timing at a time per GPU, resumable.

Every group's rows are appended to ``runtime.jsonl`` as soon as it finishes; a re-run skips
the groups already there.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import replace
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.core.store import (
    CALIBRATION,
    GPU_INFO,
    GROUPS_LOG,
    RUNTIME_LOG,
    RUNTIME_PARQUET,
    RUNTIME_TABLE_DROPS,
    append_records,
    drop_torn_tail,
    read_log,
    write_parquet,
)
from ptxprobe.gpu.calibrate import summarize as summarize_calibration
from ptxprobe.gpu.device import device_arch, gpu_info, require_gpu
from ptxprobe.gpu.plan import GpuRunConfig, Group, plan_groups, run_config
from ptxprobe.gpu.ray_timing import route_groups, start_actors
from ptxprobe.gpu.sustained import sustained_seconds
from ptxprobe.gpu.timing import effective
from ptxprobe.gpu.worker import group_rows
from ptxprobe.records.gpu import Calibration, GpuFacts, GroupRecord
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import BURST, SUSTAINED


def _run_one(
    device: str, group: Group, templates: list[str], cfg: GpuRunConfig, out_path: str, cache_root: str, lock=None
) -> None:
    """Worker body for one group on this process's GPU: time it, append its rows and calibration to the logs."""
    rows, record = group_rows(group, templates, cfg, Cache(cache_root))
    append_group(out_path, group, rows, record, lock)


def append_group(out_path: str, group: Group, rows: list[dict], record: dict, lock=None) -> None:
    """A finished group's rows and calibration record, appended to the logs (under ``lock`` when shared)."""
    line = {**record, "group_id": group.group_id}
    GroupRecord.of(line, str(Path(out_path).with_name(GROUPS_LOG)))  # checked before either log is touched
    if lock is not None:
        lock.acquire()
    try:
        with open(out_path, "a") as f:
            append_records(f, [{**r, "group_id": group.group_id} for r in rows])
        with open(Path(out_path).with_name(GROUPS_LOG), "a") as f:
            append_records(f, [line])
    finally:
        if lock is not None:
            lock.release()


def _device_worker(device: str, queue, work, work_args: tuple) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = device  # this process sees exactly one GPU
    while True:
        group = queue.get()
        if group is None:
            return
        work(device, group, *work_args)


def dispatch(groups: list, devices: list[str], work, *work_args) -> None:
    """Run ``work(device, group, *work_args)`` for every group, one worker process per device.

    Workers pull from one queue, so a device never runs two groups at once and faster devices
    take more groups. A worker that dies is reported after the others finish; what it had
    appended to the log is kept, and a re-run resumes from there.
    """
    if len(devices) <= 1 or len(groups) <= 1:
        for g in groups:
            work(devices[0] if devices else "0", g, *work_args)
        return
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    for g in groups:
        queue.put(g)
    for _ in devices:
        queue.put(None)
    procs = [ctx.Process(target=_device_worker, args=(d, queue, work, work_args)) for d in devices]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [(d, p.exitcode) for d, p in zip(devices, procs, strict=True) if p.exitcode]
    if failed:
        raise RuntimeError(f"GPU worker(s) failed: {failed}; finished groups are kept, re-run to resume")


def visible_devices() -> list[str]:
    torch = require_gpu()
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else []
    return ids or [str(i) for i in range(torch.cuda.device_count())]


def runtime_sweep(
    exp,
    out_dir,
    cache: Cache | None = None,
    devices: list[str] | None = None,
    progress: bool = True,
    notify=None,
    executor: str = "local",
) -> list[dict]:
    """Time every name of every source on the visible GPUs, or on a Ray cluster's; resumable.

    ``notify(text)`` hears about user kernels that cannot run (no launch spec, another arch).
    """
    if executor != "ray":
        require_gpu()
    cfg = run_config(getattr(exp, "run", None))
    cache = cache or Cache()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / RUNTIME_LOG
    drop_torn_tail(log)
    logged = read_log(log)
    refuse_other_regime(logged, cfg.timing.regime, out)
    done = {r["group_id"] for r in logged}
    templates = list(exp.names)
    if executor == "ray":
        info = _ray_groups(exp, cfg, templates, str(log), done, notify)
        return _finish(out, log, info)
    planned, notes = plan_groups(exp, cfg, device_arch(0))
    groups = [g for g in planned if g.group_id not in done]
    if cfg.timing.regime == SUSTAINED and groups:
        notes = [*notes, sustained_cost_note(cfg, len(templates), groups)]
    for note in notes if notify else ():
        notify(note)
    devices = devices or visible_devices()
    if len(devices) > 1:
        lock = mp.get_context("spawn").Lock()
        dispatch(groups, devices, _run_one, templates, cfg, str(log), str(cache.root), lock)
    else:
        from rich.console import Console
        from rich.progress import track

        try:
            for g in track(groups, description="GPU runs", disable=not progress, console=Console(stderr=True)):
                _run_one(devices[0], g, templates, cfg, str(log), str(cache.root))
        except KeyboardInterrupt:  # the finished groups still get their table and calibration, then it stops
            _finish(out, log, gpu_info(0))
            raise
    return _finish(out, log, gpu_info(0))


def refuse_other_regime(logged: list[dict], regime: str, out: Path) -> None:
    """A run directory holds one regime: resuming its GPU runs in another would hand back the old groups as the
    answer and mix both in its q-values and calibration (rows from before regimes were recorded are bursts)."""
    recorded = sorted({r.get("regime") or BURST for r in logged if r.get("ratio_vs_baseline") is not None})
    if recorded and recorded != [regime]:
        raise SpecError(f"{out}: its GPU groups were timed in the {' and '.join(recorded)} regime; --regime {regime} "
                        "would mix the two in one run: give another --out (or --fresh to start over)")


def sustained_cost_note(cfg: GpuRunConfig, names: int, groups: list[Group]) -> str:
    """What a sustained sweep will cost, said before it runs: each group's names against the baseline, its A/A
    pair and its plants, each pair's two arms held every round."""
    plan = effective(cfg.timing)
    pairs = [names + len(g.plants) for g in groups]
    low, high = (sum(sustained_seconds(plan, p, plan.rounds or 0)[i] for p in pairs) for i in (0, 1))
    return (f"sustained regime: each arm held {plan.hold_s:g} s after {plan.settle_s:g}-{plan.settle_max_s:g} s of "
            f"settling, {plan.rounds} rounds of up to {max(pairs)} pairs a group: about {low / 60:.1f}-"
            f"{high / 60:.1f} GPU min for {len(groups)} groups")


def _ray_groups(exp, cfg: GpuRunConfig, templates: list[str], log: str, done: set, notify) -> dict:
    """Plan per arch of the cluster's GPUs and time every group on an actor of that arch; the first GPU's facts."""
    actors = start_actors()
    archs = sorted({a.arch for a in actors})
    by_arch: dict[str, list[Group]] = {}
    for arch in archs:
        planned, notes = plan_groups(exp, cfg, arch)
        if len(archs) > 1:  # one group id per arch
            planned = [replace(g, group_id=f"{arch}:{g.group_id}") for g in planned]
        by_arch[arch] = [g for g in planned if g.group_id not in done]
        for note in notes if notify else ():
            notify(f"{arch}: {note}")
    route_groups(actors, by_arch, (templates, cfg), lambda g, res, actor: append_group(log, g, *res))
    return {"ray_actors": [{"arch": a.arch, "where": a.where, **a.facts} for a in actors]}


def finalize(out: Path) -> list[dict]:
    """Write runtime.parquet, calibration.json and gpu.json from a run's logs, with no GPU (a run cut short
    before it wrote them); gpu.json then holds the GPU facts its rows recorded."""
    log = out / RUNTIME_LOG
    rows = read_log(log)
    if not rows:
        raise SpecError(f"{out} has no {RUNTIME_LOG} rows to finalise")
    keys = ("gpu", "driver", "arch")
    info = {k: rows[0].get(k) for k in keys} | {"from_rows": True}
    return _finish(out, log, info)


def _finish(out: Path, log: Path, info: dict) -> list[dict]:
    """q-values, the Parquet table, calibration.json and gpu.json from the logs."""
    rows = with_q_values(read_log(log))
    write_parquet(out / RUNTIME_PARQUET, rows, drop=RUNTIME_TABLE_DROPS)
    records = read_log(out / GROUPS_LOG)
    calibration = summarize_calibration(records)
    Calibration.of(calibration, str(out / CALIBRATION)).write(out)
    GpuFacts.of(info, str(out / GPU_INFO)).write(out)
    return rows


def with_q_values(rows: list[dict]) -> list[dict]:
    """Benjamini-Hochberg across every name comparison of the run: each renamed row gets its ``q_value``, and a
    row judged by a rule that gates by q (``stats.BH_RULES``) its final verdict under that rule (significant only
    when q <= 1 - its interval's level). Rows recorded under the interval-alone rule keep their verdict. The A/A
    and planted rows are not in the family: calibration counts each one alone."""
    tested = [i for i, r in enumerate(rows) if r.get("name_template") and not r.get("is_baseline")
              and r.get("p_value") is not None]
    q = stats.bh_qvalues([rows[i]["p_value"] for i in tested])
    out = [dict(r) for r in rows]
    for i, v in zip(tested, q, strict=True):
        out[i]["q_value"] = v
        if out[i].get("verdict_rule") in stats.BH_RULES:
            out[i]["runtime_verdict"] = stats.recorded_decision(out[i], out[i].get("margin", stats.EQUIVALENCE_MARGIN))
    return out
