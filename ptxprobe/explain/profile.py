"""Profiling one timed group under Nsight Compute: per-SASS-instruction warp-stall samples, for ``explain``.

For every name of a group, ncu runs ``python -m ptxprobe.explain.profile`` as its target: the
group's own Workload (same inputs, seed, grid and launch as the timing), a few warm-up
launches, then the one launch ncu profiles (``--launch-skip``). Clocks are left alone
(``--clock-control none``). From each report the source page (one row per SASS
instruction, samples by stall reason) and the details page (duration, cycles per issued
instruction) are exported as CSV and kept with the cubin that ran, so the analysis
(``ptxprobe.explain.attribution``) can be redone anywhere without a GPU.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import NoGpu, ToolFailed, ToolNotFound
from ptxprobe.core.proc import run_tool
from ptxprobe.static.experiment import experiment_from_dict, recorded_axes
from ptxprobe.toolchain.tools import select_ptxas

NCU_SECTIONS = ("SourceCounters", "WarpStateStats", "SpeedOfLight")
WARMUP_LAUNCHES = 3


@dataclass(frozen=True)
class Profiled:
    """What one name's profile left on disk (paths relative to the explain directory)."""

    group_id: str
    template: str
    name: str
    cubin: str
    source_csv: str
    details_csv: str


def find_ncu() -> str:
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    raise ToolNotFound("ncu (Nsight Compute) not found: explain needs it on the GPU host")


def safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120]


def profile_group(run_dir: Path, group_id: str, templates: list[str], out: Path, timeout: float = 600.0,
                  ncu: str | None = None) -> list[Profiled]:
    """Profile every template of one group; CSVs and cubins under ``out/<group>/``."""
    ncu = ncu or find_ncu()
    gdir = out / safe(group_id)
    gdir.mkdir(parents=True, exist_ok=True)
    done = []
    for template in templates:
        stem = safe(template) or "base"
        job = {"run_dir": str(run_dir.resolve()), "group_id": group_id, "template": template,
               "warmup": WARMUP_LAUNCHES, "cubin_out": str(gdir / f"{stem}.cubin"),
               "name_out": str(gdir / f"{stem}.name")}
        job_path = gdir / f"{stem}.job.json"
        job_path.write_text(json.dumps(job))
        name = _kernel_name(job, timeout)
        rep = gdir / f"{stem}"
        argv = [ncu, "--clock-control", "none", *[a for s in NCU_SECTIONS for a in ("--section", s)],
                "-k", f"regex:^{re.escape(name)}$", "--launch-skip", str(WARMUP_LAUNCHES), "--launch-count", "1",
                "-f", "-o", str(rep), sys.executable, "-m", "ptxprobe.explain.profile", str(job_path)]
        run = run_tool(argv, timeout=timeout)
        report = rep.with_suffix(".ncu-rep")
        said = run.stdout + run.stderr
        if "ERR_NVGPUCTRPERM" in said or "LibraryNotLoaded" in said:
            raise NoGpu("ncu cannot read the hardware counters here: " + said.strip()[-300:])
        if not run.ok or not report.exists():
            raise ToolFailed(f"ncu on {group_id} as {name}: {run.describe()}")
        pages = (("source", "source.csv", ["--print-source", "sass"]), ("details", "details.csv", []))
        for page, suffix, extra in pages:
            exp = run_tool([ncu, "-i", str(report), "--page", page, "--csv", *extra], timeout=timeout)
            if not exp.ok:
                raise ToolFailed(f"ncu --page {page} of {report.name}: {exp.describe()}")
            (gdir / f"{stem}.{suffix}").write_text(exp.stdout)
        rel = gdir.relative_to(out)
        done.append(Profiled(group_id, template, name, str(rel / f"{stem}.cubin"), str(rel / f"{stem}.source.csv"),
                             str(rel / f"{stem}.details.csv")))
    return done


def _kernel_name(job: dict, timeout: float) -> str:
    """Run the target once without ncu: it checks that it runs, writes its cubin and says the symbol."""
    run = run_tool([sys.executable, "-m", "ptxprobe.explain.profile", "--dry", json.dumps(job)], timeout=timeout)
    if not run.ok:
        raise ToolFailed(f"the profile target for {job['group_id']} as {job['template']} failed: {run.describe()}")
    return Path(job["name_out"]).read_text().strip()


def _target(job: dict) -> None:
    """The process ncu profiles: build the group's workload and launch one name's kernel."""
    import torch

    from ptxprobe.gpu.device import gpu_info
    from ptxprobe.gpu.group import named_kernels
    from ptxprobe.gpu.plan import plan_groups, run_config
    from ptxprobe.gpu.worker import group_workload
    from ptxprobe.runs.rundir import RunDir

    exp = experiment_from_dict(recorded_axes(RunDir(job["run_dir"]).manifest))
    cfg = run_config(exp.run)
    info = gpu_info(0)
    groups = {g.group_id: g for g in plan_groups(exp, cfg, info["arch"])[0]}
    if job["group_id"] not in groups:
        raise SystemExit(f"no group {job['group_id']!r} in this run's plan (have: {', '.join(sorted(groups))})")
    group = groups[job["group_id"]]
    cache = Cache()
    tool = select_ptxas(info["arch"], group.ptxas)[0]
    w = group_workload(group, cfg, info, tool, cache)
    names, kernels, _ = named_kernels(w.emitted, [job["template"]], tool, cache, w.load, w.launched)
    from ptxprobe.gpu.launchers import cubin_for

    Path(job["cubin_out"]).write_bytes(cubin_for(w.emitted, names[0], tool, cache)[0])
    Path(job["name_out"]).write_text(names[0])
    gen = torch.Generator(device="cuda").manual_seed(cfg.timing.seed)
    case = w.timed(gen)
    args = case.args(case.tensors)
    kernel = kernels[job["template"]]
    for _ in range(job["warmup"] + 1):
        kernel[case.grid](*args)
    torch.cuda.synchronize()


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "--dry":
        job = json.loads(argv[1])
        job = {**job, "warmup": 0}
    else:
        job = json.loads(Path(argv[0]).read_text())
    _target(job)
