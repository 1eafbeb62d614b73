"""The reducer's predicate: the sweep's own static verdict on a candidate, planned and assembled as the sweep does.

A candidate is planned by ``static.plan.plan_emitted`` (the renamer, then the independent rename check: a
candidate it refuses is uninteresting), assembled through the content-addressed cache and the sweep's executor,
and judged by ``static.verdicts.derive`` over ``machine_code_sha256`` with the sweep's adaptive repeats
(``static.adaptive.more_runs``). Interesting: the renamed name's verdict is a difference and ``--keep`` holds on
every renamed assembly. One shortcut, exact under that verdict: as soon as the two names share an output, the
verdict can only be "within noise" or "identical", so no more repeats are assembled.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import PtxprobeError
from ptxprobe.reduce.keep import Keep, holds, with_baseline_fields
from ptxprobe.sources import Emitted, KernelSource
from ptxprobe.static.adaptive import more_runs
from ptxprobe.static.executors import Executor, variant_row
from ptxprobe.static.experiment import Experiment, FamilyAxes
from ptxprobe.static.plan import Planned, plan_emitted
from ptxprobe.static.verdicts import DIFFERS, SAME_CODE, derive
from ptxprobe.toolchain.assemble import cached_artifact
from ptxprobe.toolchain.tools import Tool

UNINTERESTING = ("same machine code", "within noise", "baseline fails", "both names fail", "renamed fails",
                 "rename check failed", "keep is false")


@dataclass(frozen=True)
class Setup:
    """What every candidate is judged under: one arch, one ptxas, one flag list, a baseline and a renamed name."""

    source: KernelSource
    kernel: str
    entry: str
    arch: str
    tool: Tool
    flags: tuple[str, ...]
    names: tuple[str, str]  # templates: baseline, renamed
    repeat: int = 2
    max_repeat: int = 8
    confidence: float = 0.98
    keep: Keep | None = None
    timeout: float = 600.0

    def experiment(self, repeat: int | None = None) -> Experiment:
        return Experiment(name="reduce", families=FamilyAxes(kernels=()), archs=(self.arch,),
                          ptxas=(self.tool.path,), flags=(self.flags,),
                          names=self.names, repeat={"default": repeat or self.repeat}, max_repeat=self.max_repeat,
                          confidence=self.confidence)


@dataclass(frozen=True)
class Judgement:
    interesting: bool
    why: str  # a verdict in DIFFERS when interesting, else one of UNINTERESTING
    rows: tuple[dict, ...] = ()  # the derived rows (baseline and renamed) it rests on
    error: str = ""


def judge_rows(rows: list[dict], keep: Keep | None) -> Judgement:
    """The verdict of complete rows of one candidate (pure): what the sweep would say, and ``keep`` on top."""
    derived = derive(rows)
    base = [r for r in derived if r["is_baseline"]]
    var = [r for r in derived if not r["is_baseline"]]
    base_ok = [r for r in base if r["status"] == "ok"]
    var_ok = [r for r in var if r["status"] == "ok"]
    if not base_ok:
        why = "both names fail" if not var_ok else "baseline fails"
        return Judgement(False, why, tuple(derived), next((r["error"] for r in base if r["error"]), ""))
    if not var_ok:
        return Judgement(False, "renamed fails", tuple(derived), next((r["error"] for r in var if r["error"]), ""))
    verdict = var[0]["verdict"]
    if verdict not in DIFFERS:
        return Judgement(False, "same machine code" if verdict == "identical" else "within noise", tuple(derived))
    if not all(holds(keep, with_baseline_fields(r, base_ok)) for r in var_ok):
        return Judgement(False, "keep is false", tuple(derived))
    return Judgement(True, verdict, tuple(derived))


def overlapping(rows: list[dict]) -> bool:
    """The two names already share an output: no further repeat can make the verdict a difference."""
    codes: dict[bool, set] = {True: set(), False: set()}
    for r in rows:
        if r["status"] == "ok":
            codes[r["name_template"] == r["_baseline_template"]].add(r[SAME_CODE])
    return bool(codes[True] & codes[False])


@dataclass
class Judge:
    """Judges batches of candidate texts on an executor; counts ptxas runs and cache hits."""

    setup: Setup
    pool: Executor
    cache: Cache
    ptxas_calls: int = 0
    cache_hits: int = 0
    candidates: int = 0
    reasons: Counter = field(default_factory=Counter)

    def __call__(self, texts: list[str]) -> list[bool]:
        return [j.interesting for j in self.judge(texts)]

    def _plan(self, text: str, repeats: int, start: int, only: set[str] | None = None) -> list[Planned]:
        s = self.setup
        emitted = Emitted(s.kernel, s.arch, s.entry, text, "ptx", {}, {}, (s.entry,))
        planned = plan_emitted(s.experiment(), s.source, emitted, [s.tool], self.cache, repeats=repeats,
                               start_repeat=start)
        return [p for p in planned if only is None or p.variant.name_template in only]

    def _assemble(self, jobs: dict[int, list[Planned]]) -> dict[int, list[dict]]:
        """Every planned assembly of every candidate: cache hits here, the rest on the executor at once."""
        out: dict[int, list[dict]] = {k: [] for k in jobs}
        pending: dict[Future, int] = {}
        for k, planned in jobs.items():
            for p in planned:
                v = p.variant
                hit = cached_artifact(p.ptx, v.arch, p.tool, v.flags, repeat=v.repeat, cache=self.cache)
                if hit is not None:
                    out[k].append(self._counted(variant_row(p, hit, self.cache)))
                else:
                    pending[self.pool.assemble((p,), self.setup.timeout, self.cache)] = k
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in done:
                k = pending.pop(f)
                out[k] += [self._counted(row) for row in self.pool.rows_of(f, self.cache)]
        return out

    def _counted(self, row: dict) -> dict:
        if row["cached"]:
            self.cache_hits += 1
        else:
            self.ptxas_calls += 1
        row["_baseline_template"] = self.setup.names[0]
        return row

    def judge(self, texts: list[str]) -> list[Judgement]:
        """One judgement per text, in order."""
        self.candidates += len(texts)
        result: dict[int, Judgement] = {}
        rows: dict[int, list[dict]] = {}
        first: dict[int, list[Planned]] = {}
        for k, text in enumerate(texts):
            try:
                first[k] = self._plan(text, 1, 0)
            except PtxprobeError as exc:  # the renamer or its independent check refuses this candidate
                result[k] = Judgement(False, "rename check failed", (), str(exc))
        rows = self._assemble(first)
        runs = {k: 1 for k in rows}
        while True:
            todo: dict[int, list[Planned]] = {}
            for k, rs in rows.items():
                if k in result:
                    continue
                if any(r["status"] != "ok" for r in rs) or overlapping(rs):
                    result[k] = judge_rows(rs, self.setup.keep)
                    continue
                need = self._need(rs, runs[k])
                if not need:
                    result[k] = judge_rows(rs, self.setup.keep)
                    continue
                todo[k] = self._plan(texts[k], 1, runs[k], need)
            if not todo:
                break
            for k, more in self._assemble(todo).items():
                rows[k].extend(more)
                runs[k] += 1
        for j in result.values():
            self.reasons[j.why] += 1
        return [result[k] for k in range(len(texts))]

    def _need(self, rs: list[dict], runs: int) -> set[str]:
        """Templates that need another assembly: up to ``repeat`` runs each, then the sweep's adaptive rule."""
        s = self.setup
        if runs < s.repeat:
            return set(s.names)
        if s.max_repeat <= runs:
            return set()
        outputs: dict[str, Counter] = {}
        counts: dict[str, int] = {}
        for r in rs:
            t = r["name_template"]
            counts[t] = counts.get(t, 0) + 1
            if r["status"] == "ok":
                outputs.setdefault(t, Counter())[r[SAME_CODE]] += 1
        base = outputs.get(s.names[0], Counter())
        return more_runs(base, {t: c for t, c in outputs.items() if t != s.names[0]}, counts, s.names[0],
                         s.confidence, s.max_repeat)
