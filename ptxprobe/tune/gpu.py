"""The GPU side of ``tune``: one kernel at one problem, its candidates assembled, gated on numerics, raced.

The race's ``measure`` is the sweep's calibrated paired design (``gpu.timing.time_block``): every contender is one
pair with the user's configuration, A B B A in one CUDA graph, the pairs in a fresh random order each round, who
goes first balanced; a call of ``rounds`` rounds returns each contender's per-round log ratios. The candidates are
assembled again from the PTX the GPU runs (cache hits when it is the PTX the static sweep assembled) and pruned by
the same ``prune``, so what is timed is distinct by the code that really runs. The race's choice is then timed
again on fresh rounds by the same design (``tune.proof``), and that decides. The race runs in the burst regime;
the proof in the regime the user asked for (``TimingPlan.regime``: a sustained proof holds each arm alone for
seconds), and the kernel's record carries the proof's regime (``stats.regime``) beside its gain.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import ToolFailed
from ptxprobe.gpu.device import require_gpu
from ptxprobe.gpu.group import draw_numerics
from ptxprobe.gpu.plan import GpuRunConfig, Group
from ptxprobe.gpu.timing import Nvml, TimingPlan, round_readings, time_block, unit_for
from ptxprobe.gpu.worker import group_workload
from ptxprobe.ptx.rename import template_ptx
from ptxprobe.sources import Emitted
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import BURST, regime_of
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import Tool, select_ptxas
from ptxprobe.tune.answer import chosen, kernel_answer, passes_numerics
from ptxprobe.tune.proof import proved
from ptxprobe.tune.prune import Candidate, arranged, prune
from ptxprobe.tune.race import RacePlan, race
from ptxprobe.tune.space import TuneSpace


def tools_for(space: TuneSpace, arch: str) -> list[Tool]:
    """The space's ptxas releases for ``arch``, the user's first, each binary once."""
    seen: dict[str, Tool] = {}
    for spec in space.ptxas:
        for t in select_ptxas(arch, spec):
            seen.setdefault(t.sha256, t)
    return list(seen.values())


def assembled(emitted: Emitted, template: str, tool: Tool, flags: tuple[str, ...], space: TuneSpace, user: Tool,
              cache: Cache) -> tuple[Candidate, bytes | None]:
    """One candidate of the PTX the GPU runs: renamed, assembled with ``flags``, its machine code read."""
    name, renamed = template_ptx(emitted.ptx, emitted.entry, template)
    ptx = renamed.ptx
    art = assemble(ptx, emitted.arch, tool, flags, cache=cache)
    options = flags[len(space.user_flags):]
    is_user = template == space.names[0] and tool.sha256 == user.sha256 and not options
    if not art.ok:
        return Candidate(emitted.kernel, emitted.arch, template, name, tool.version, tool.sha256, options, None,
                         art.status, art.message, None, is_user), None
    data = art.cubin()
    k = read_cubin(data).kernel(name)
    return Candidate(emitted.kernel, emitted.arch, template, name, tool.version, tool.sha256, options,
                     k.machine_code_sha256, "ok", None, k.regcount, is_user), data


def tune_group(group: Group, space: TuneSpace, cfg: GpuRunConfig, plan: RacePlan, numerics: str, info: dict,
               cache: Cache, log=lambda text: None) -> dict:
    """Tune one kernel at one problem on this process's GPU: its answer record (``answer.kernel_answer``)."""
    torch = require_gpu()
    started = time.perf_counter()
    tools = tools_for(space, info["arch"])
    user_tool = tools[0]
    w = group_workload(group, cfg, info, user_tool, cache)
    built: list[tuple[Candidate, bytes | None]] = []
    for tool in tools:
        for options in space.option_sets:
            for template in space.names:
                built.append(assembled(w.emitted, template, tool, space.flags(options), space, user_tool, cache))
    cubins = {(c.name, c.ptxas_sha256, c.options): data for c, data in built}
    pruned = prune(arranged((c for c, _ in built), space))
    if pruned.user is None:
        raise ToolFailed(f"{w.emitted.kernel}: your own configuration ({space.names[0]}, ptxas {user_tool.version}) "
                         "did not assemble")
    labels = [c.label for c in pruned.distinct]  # the user's first
    kernels = {c.label: w.load(c.name, cubins[(c.name, c.ptxas_sha256, c.options)]) for c in pruned.distinct}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(cfg.timing.seed)
    nums = draw_numerics(w, kernels, labels, gen, cfg.numerics_draws)
    passed = {label: passes_numerics(nums[label], nums[labels[0]], numerics, w.tolerance) for label in labels[1:]}
    contenders = [label for label in labels[1:] if passed[label][0]]
    log(f"{w.emitted.kernel}: {len(built)} candidates, {len(labels)} distinct codes, {len(contenders)} pass "
        f"numerics ({numerics})")
    timed = w.timed(gen)
    args = timed.args(timed.tensors)
    fns = {label: (lambda k=kernels[label]: k[timed.grid](*args)) for label in [labels[0], *contenders]}
    timing = cfg.timing
    base = unit_for(fns[labels[0]], timing)
    units = {label: base if label == labels[0] else unit_for(fn, timing, k=base.k) for label, fn in fns.items()}
    nvml, seconds, calls = Nvml(), [0.0], [0]
    proof_rounds: list[tuple] = []  # (log ratio, yours' reading, the choice's reading) of every proof round

    def measured(regime: str, keep: list | None):
        """The race's (burst) or the proof's (``regime``: the user's) ``measure``: log ratios per contender."""
        def measure(cands, rounds: int) -> dict:
            fixed = replace(_fixed_rounds(timing, rounds), regime=regime)
            chosen = {labels[0]: units[labels[0]], **{c: units[c] for c in cands}}
            samples, secs = time_block(chosen, fixed, [(labels[0], c) for c in cands],
                                       stats.stable_seed(timing.seed, f"{group.group_id}#{calls[0]}"), nvml)
            seconds[0] += secs
            calls[0] += 1
            base_s = samples[labels[0]]
            logs = {c: list(stats.log_ratios(*base_s.paired_with(samples[c]))) for c in cands}
            if keep is not None:
                for c in cands:
                    keep.extend(zip(logs[c], *round_readings(base_s, samples[c], logs[c], fixed), strict=True))
            return logs
        return measure

    result = race(contenders, measured(BURST, None), plan)
    proof, cut = proved(chosen(result, {c.label: c for c in pruned.distinct}, pruned.user, plan.prefer), result,
                        plan, measured(timing.regime, proof_rounds), log)
    regime = (regime_of(timing.regime, *(list(v) for v in zip(*proof_rounds, strict=True)), nvml.power_limit_w())
              if proof is not None and proof_rounds else None)
    problem = {k: w.common.get(k) for k in ("seq_len", "batch", "heads", "sizes") if w.common.get(k) is not None}
    return kernel_answer(pruned, result, nums=nums, gate={k: v[1] for k, v in passed.items() if not v[0]},
                         numerics=numerics, gpu_seconds=seconds[0], wall_seconds=time.perf_counter() - started,
                         prefer=plan.prefer, proof=proof, proof_interrupted=cut, regime=regime,
                         target={"group_id": group.group_id, "source_kind": group.source.kind, "gpu": info.get("gpu"),
                                 "entry": w.emitted.entry, "ptx_sha256": w.emitted.ptx_sha256,
                                 "frontend": w.emitted.frontend, **problem})


def _fixed_rounds(plan: TimingPlan, rounds: int) -> TimingPlan:
    """The sweep's timing plan made to run exactly ``rounds`` rounds, one look (the race does the stopping)."""
    return replace(plan, rounds=rounds, min_rounds=rounds, max_rounds=rounds, batch_rounds=rounds, overflow_rounds=0)
