"""GPU timing on a Ray cluster: one long-lived actor per GPU, one group at a time, routed by arch.

Each actor holds one GPU (``num_gpus=1``), so Ray never places two on one device; the driver
hands an actor its next group only when the last one came back, so an actor never runs two
timings at once. Groups are planned per arch (the arch each actor reports) and go only to
actors of that arch. An actor lost mid-group (its node or process died) puts the group back
at the head of its arch's queue for another actor; rows reach the log only from a group that
came back whole, so nothing is lost and nothing is logged twice.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ptxprobe.core.cache import Cache
from ptxprobe.core.cluster import require_ray, worker_identity
from ptxprobe.core.errors import ClusterError, NoGpu
from ptxprobe.gpu.device import device_arch, gpu_info

log = logging.getLogger("ptxprobe")


class TimingWorker:
    """The actor's body (made a Ray actor by ``start_actors``); ``work`` and ``arch_probe`` may be replaced in tests."""

    def __init__(self, work: Callable | None = None, arch_probe: Callable | None = None):
        self.work, self.arch_probe = work, arch_probe

    def arch(self) -> str:
        if self.arch_probe is not None:
            return self.arch_probe()

        return device_arch(0)

    def where(self) -> str:
        return worker_identity()

    def facts(self) -> dict:
        if self.arch_probe is not None:
            return {"arch": self.arch()}

        return gpu_info(0)

    def run(self, group, *args):
        if self.work is not None:
            return self.work(group, *args)
        from ptxprobe.gpu.worker import group_rows

        templates, cfg = args
        return group_rows(group, templates, cfg, Cache())


@dataclass
class Actor:
    handle: object
    arch: str
    where: str
    facts: dict


def start_actors(num_gpus: float = 1.0, work: Callable | None = None, arch_probe: Callable | None = None,
                 count: int | None = None) -> list[Actor]:
    """One actor per GPU the cluster has (or ``count``); each tells its arch and node."""
    ray = require_ray()
    gpus = int(ray.cluster_resources().get("GPU", 0)) if count is None else count
    if gpus < 1:
        raise NoGpu("the Ray cluster has no GPUs (a node's GPUs join with `ray start --num-gpus N`)")
    cls = ray.remote(num_gpus=num_gpus, max_restarts=0)(TimingWorker)
    handles = [cls.remote(work, arch_probe) for _ in range(gpus)]
    archs = ray.get([h.arch.remote() for h in handles], timeout=600)
    wheres = ray.get([h.where.remote() for h in handles], timeout=600)
    facts = ray.get([h.facts.remote() for h in handles], timeout=600)
    return [Actor(*a) for a in zip(handles, archs, wheres, facts, strict=True)]


def route_groups(actors: list[Actor], groups_by_arch: dict[str, list], args: tuple, on_done: Callable) -> list:
    """Run every group on an actor of its arch, one per actor at a time; ``on_done(group, result, actor)`` each.

    Returns the groups no actor could take (no GPU of that arch in the cluster).
    """
    ray = require_ray()
    from ray.exceptions import RayActorError

    queues = {arch: deque(gs) for arch, gs in groups_by_arch.items()}
    idle = list(actors)
    busy: dict = {}
    while True:
        for actor in list(idle):
            queue = queues.get(actor.arch)
            if queue:
                group = queue.popleft()
                busy[actor.handle.run.remote(group, *args)] = (actor, group)
                idle.remove(actor)
        if not busy:
            break
        done, _ = ray.wait(list(busy), num_returns=1)
        for ref in done:
            actor, group = busy.pop(ref)
            try:
                result = ray.get(ref)
            except RayActorError as exc:  # the actor died: its GPU is gone from this sweep, the group goes back
                log.warning("GPU actor on %s lost (%s); its group goes to another", actor.where,
                            str(exc).splitlines()[0][:120])
                queues[actor.arch].appendleft(group)
                if not any(a.arch == actor.arch for a in idle) and not any(a.arch == actor.arch
                                                                           for a, _ in busy.values()):
                    left = len(queues[actor.arch])
                    raise ClusterError(f"every GPU actor for {actor.arch} was lost; {left} groups not timed "
                                       "(finished groups are kept: re-run to resume)") from exc
                continue
            on_done(group, result, actor)
            idle.append(actor)
    return [g for arch, q in queues.items() for g in q if q and not any(a.arch == arch for a in actors)]
