"""``ptxprobe reduce``: take an input the sweep takes, check that the name changes its code, reduce it, write DIR.

DIR holds ``minimal.ptx`` (the smallest kernel found, under the baseline name), ``reduce.json`` (the predicate,
every accepted step, ptxas calls, wall time, what remains) and ``current.ptx`` (the best so far under the entry's
own name): all three are replaced atomically after every accepted step, so Ctrl-C keeps the best found so far and
a re-run with the same input and predicate resumes from it (the cache serves what was assembled before).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ptxprobe import __version__
from ptxprobe.core.cache import Cache, atomic_write
from ptxprobe.core.errors import SpecError, ToolFailed
from ptxprobe.core.items import KernelItem
from ptxprobe.core.store import lock_dir, prepare_dir, writing_to
from ptxprobe.ptx.rename import TRIGGER, apply_template, validate_name
from ptxprobe.records.reduce import ReduceRecord
from ptxprobe.reduce.ablate import ablate, as_json
from ptxprobe.reduce.keep import parse_keep
from ptxprobe.reduce.predicate import Judge, Judgement, Setup
from ptxprobe.reduce.remains import structure
from ptxprobe.reduce.search import Step, reduce_ptx
from ptxprobe.sources import Emitted, KernelSource, sources_of
from ptxprobe.static.executors import LocalExecutor
from ptxprobe.static.experiment import check_arch, experiment_from_dict, load_experiment
from ptxprobe.static.plan import renamed_cached
from ptxprobe.toolchain.assemble import TRITON_FLAGS
from ptxprobe.toolchain.tools import arch_order, select_ptxas

MINIMAL, RECORD, CURRENT = "minimal.ptx", ReduceRecord.FILE, "current.ptx"
DONE, INTERRUPTED, NO_DIFFERENCE, RUNNING = "done", "interrupted", "no difference", "running"


@dataclass(frozen=True)
class Request:
    """What to reduce and under which predicate (the command's options)."""

    arch: str
    out: str
    kernel: str | None = None  # a registered family
    ptx: str | None = None
    cu: str | None = None
    cubin: str | None = None
    triton: str | None = None
    lib: str | None = None  # a shared library, fatbin or wheel: PATH[:ENTRY], the kernel its PTX holds
    spec: str | None = None
    entry: str | None = None
    dtype: str = "fp16"
    head_dim: int = 128
    causal: bool = False
    config: str = "default"
    ptxas: str | None = None  # default: the sweep's (triton; nvcc for a .cu)
    name: str | None = None  # the renamed template (default cutlass_{base})
    flags: tuple[str, ...] = TRITON_FLAGS
    keep: str | None = None
    jobs: int = 1
    timeout: float = 600.0
    fresh: bool = False
    ablate: bool = False  # then: which ptxas options make the name stop mattering (minimal kernel and input)


@dataclass(frozen=True)
class Result:
    status: str  # DONE | INTERRUPTED | NO_DIFFERENCE
    out: Path
    record: dict


def source_of(req: Request) -> KernelSource:
    """The one input, as the sweep's source plumbing reads it."""
    given = [x for x in (req.kernel, req.ptx, req.cu, req.cubin, req.triton, req.lib) if x]
    if len(given) != 1:
        raise SpecError("reduce takes one input: a registered kernel name, --ptx, --cu, --cubin, --triton or --lib "
                        f"(got {len(given)})")
    if req.lib:
        return library_kernel(req.lib, req.entry, req.arch)
    axes: dict = {"name": "reduce", "kernels": [], "archs": [req.arch]}

    if req.kernel:
        axes.update(kernels=[req.kernel], dtypes=[req.dtype], head_dims=[req.head_dim], causal=[req.causal],
                    configs=[req.config])
    elif req.ptx:
        axes.update(ptx_files=[KernelItem(req.ptx, req.entry)], file_archs=[req.arch])
    elif req.cubin:
        axes.update(cubin_files=[KernelItem(req.cubin, req.entry)], file_archs=[req.arch])
    elif req.cu:
        axes.update(cu_files=[KernelItem(req.cu, req.entry, req.spec)])
    else:
        if not req.spec:
            raise SpecError("--triton needs --spec (ptxprobe spec init FILE.py:FUNCTION -o k.toml writes one)")
        axes.update(triton_functions=[KernelItem(req.triton, None, req.spec)])
    return sources_of(experiment_from_dict(axes))[0]


def library_kernel(lib: str, entry: str | None, arch: str) -> KernelSource:
    """One kernel of a library's PTX (``PATH:ENTRY`` or ``--entry``), from the module the driver would JIT for
    ``arch``: of the modules holding it, the newest target that reaches the arch (CUDA picks so among a fatbin's
    PTX), its text cut to that kernel. One name in two shared libraries of a wheel is refused: give the one."""
    item = KernelItem.parse("lib_files", lib)
    item = KernelItem(item.path, entry or item.entry)
    if item.entry in (None, "all"):
        raise SpecError(f"--lib {lib}: reduce takes one kernel of it: --lib PATH:ENTRY or --entry ENTRY")
    sources = sources_of(experiment_from_dict({"name": "reduce", "kernels": [], "archs": [arch], "lib_files": [item],
                                               "file_archs": [arch]}))  # the modules that reach the arch
    members = sorted({s.library for s in sources})
    if len(members) > 1:
        raise SpecError(f"{item.entry} is in {len(members)} libraries of {item.path} ({', '.join(members)}): "
                        "give the one you mean (unpacked from the wheel)")
    return max(sources, key=lambda s: arch_order(s.module.target))


def name_templates(entry: str, name: str | None) -> tuple[str, str]:
    """(baseline, renamed): a kernel whose own name holds the trigger is compared with it removed, as the sweep
    does for CuTe DSL kernels."""
    if TRIGGER in entry:
        return "{base_untriggered}", name or "{base}"
    return "{base}", name or f"{TRIGGER}_{{base}}"


def _emit(src: KernelSource, req: Request, cache: Cache) -> tuple[Emitted, str]:
    arch = check_arch(req.arch)
    if arch not in src.build_archs((arch,)):
        raise SpecError(f"{src.label} cannot be built for {arch}")
    emitted = src.emit(arch, cache)
    entries = emitted.swept_entries
    if len(entries) > 1:
        raise SpecError(f"{src.label} has {len(entries)} entries ({', '.join(entries[:6])}): pick one with --entry")
    return emitted, entries[0]


def _identity(emitted: Emitted, entry: str, setup: Setup) -> dict:
    return {"input_ptx_sha256": emitted.ptx_sha256, "kernel": emitted.kernel, "entry": entry, "arch": setup.arch,
            "ptxas_sha256": setup.tool.sha256, "flags": list(setup.flags), "names": list(setup.names),
            "keep": setup.keep.text if setup.keep else None, "repeat": setup.repeat, "max_repeat": setup.max_repeat}


def _resume(out: Path, identity: dict, fresh: bool) -> tuple[str | None, dict]:
    """The best text so far and the record of an earlier run of the same reduction (None: start afresh)."""
    rec_path, cur = out / RECORD, out / CURRENT
    if fresh or not rec_path.exists():
        return None, {}
    try:
        rec = json.loads(rec_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None, {}
    if rec.get("identity") != identity:
        raise SpecError(f"{out} holds a reduction of another input or predicate: use another -o, or --fresh")
    if rec.get("status") == NO_DIFFERENCE or not cur.exists():
        return None, rec
    return cur.read_text(), rec


def _pair(j: Judgement, setup: Setup, cache: Cache) -> dict:
    """The minimal pair: the sweep's facts per name (the most common output of each) and what differs."""
    out: dict = {"verdict": j.why}
    for role, is_base in (("baseline", True), ("renamed", False)):
        rows = [r for r in j.rows if r["is_baseline"] == is_base and r["status"] == "ok"]
        if not rows:
            continue
        r = rows[0]
        out[role] = {k: r.get(k) for k in ("name", "registers", "spill_store_bytes", "spill_load_bytes",
                                           "stack_bytes", "n_instructions", "text_bytes", "capmerc_bytes",
                                           "shared_bytes", SAME_CODE_KEY, "cubin_sha256")}
        out[role]["runs"] = len(rows)
        out[role]["distinct_outputs"] = len({x[SAME_CODE_KEY] for x in rows})
    b, v = out.get("baseline", {}), out.get("renamed", {})
    out["deltas"] = {k: v[k] - b[k] for k in ("registers", "n_instructions", "capmerc_bytes", "text_bytes",
                                               "spill_store_bytes", "spill_load_bytes", "stack_bytes")
                     if isinstance(b.get(k), int) and isinstance(v.get(k), int) and v[k] != b[k]}
    return out


SAME_CODE_KEY = "machine_code_sha256"


def _write_cubins(out: Path, pair: dict, cache: Cache) -> None:
    for role in ("baseline", "renamed"):
        digest = pair.get(role, {}).get("cubin_sha256")
        data = cache.get("cubin", digest, "kernel.cubin") if digest else None
        if data is not None:
            atomic_write(out / f"minimal-{role}.cubin", data)


def _planned(req: Request, cache: Cache) -> tuple[Setup, Emitted, str]:
    """The input emitted and the predicate set up: bad input (an expression, a name, a source) refused first."""
    keep = parse_keep(req.keep) if req.keep is not None else None  # a bad EXPR before any work
    if req.name is not None:
        validate_name(apply_template(req.name, "kernel"))
    src = source_of(req)
    emitted, entry = _emit(src, req, cache)
    spec = req.ptxas or ("nvcc" if src.kind == "cuda" else "triton")
    tool = select_ptxas(emitted.arch, spec)[0]
    defaults = load_experiment(None)
    setup = Setup(src, emitted.kernel, entry, emitted.arch, tool, tuple(req.flags), name_templates(entry, req.name),
                  defaults.repeats(emitted.arch), max(defaults.max_repeat, defaults.repeats(emitted.arch)),
                  defaults.confidence, keep, req.timeout)
    return setup, emitted, entry


def _record_head(setup: Setup, emitted: Emitted, entry: str, identity: dict, start: str | None,
                 earlier: dict) -> dict:
    """What reduce.json says of the reduction before any step: input, ptxas, names, predicate, earlier runs."""
    tool, keep = setup.tool, setup.keep
    return {
        "ptxprobe_version": __version__, "identity": identity, "input": emitted.kernel, "entry": entry,
        "arch": setup.arch, "ptxas": {"version": tool.version, "sha256": tool.sha256, "path": tool.path},
        "flags": list(setup.flags), "baseline_name": apply_template(setup.names[0], entry),
        "renamed_name": apply_template(setup.names[1], entry),
        "predicate": {"verdict": "the sweep's static verdict: the renamed name's machine_code_sha256 outputs "
                                 "differ from the baseline's beyond ptxas's run-to-run spread",
                      "rename_check": "the independent rename check passes", "keep": keep.text if keep else None,
                      "repeat": setup.repeat, "max_repeat": setup.max_repeat, "confidence": setup.confidence},
        "before": structure(emitted.ptx, entry), "resumed": bool(start),
        "earlier_runs": earlier.get("earlier_runs", []) + ([_run_summary(earlier)] if earlier else []),
    }


@dataclass
class _Reduction:
    """One reduction as it goes: DIR rewritten (current.ptx, minimal.ptx, reduce.json) after every accepted step."""

    out: Path
    setup: Setup
    entry: str
    judge: Judge
    cache: Cache
    head: dict
    started: float
    ptx: str
    steps: list = field(default_factory=list)
    last: dict = field(default_factory=dict)

    def counts(self) -> dict:
        return {"ptxas_calls": self.judge.ptxas_calls, "cache_hits": self.judge.cache_hits,
                "wall_seconds": round(time.monotonic() - self.started, 2)}

    def persist(self, text: str, steps: list[Step], status: str = RUNNING, extra: dict | None = None) -> None:
        """The best text so far, under the entry's name and the baseline's, and the record, written atomically."""
        self.ptx, self.steps = text, steps
        self.last = {**self.head, **(extra or {}), "status": status, "steps": [asdict(s) for s in steps],
                     **self.counts(), "candidates": self.judge.candidates, "judgements": dict(self.judge.reasons),
                     "after": structure(text, self.entry)}
        baseline = apply_template(self.setup.names[0], self.entry)
        minimal = text if baseline == self.entry else renamed_cached(text, {self.entry: baseline}, self.cache).ptx
        atomic_write(self.out / CURRENT, text.encode())
        atomic_write(self.out / MINIMAL, minimal.encode())
        _write_record(self.out, self.last)

    def no_difference(self, first: Judgement) -> Result:
        """The input shows no name effect to reduce: ptxas's own failure is the tool's, anything else an answer."""
        if first.why in ("baseline fails", "both names fail"):
            raise ToolFailed(f"ptxas {self.setup.tool.version} fails on {self.setup.kernel} for {self.setup.arch}: "
                             f"{first.error.splitlines()[0] if first.error else first.why}")
        (self.out / CURRENT).unlink(missing_ok=True)
        rec = {**self.head, "status": NO_DIFFERENCE, "why": first.why, **self.counts()}
        _write_record(self.out, rec)
        return Result(NO_DIFFERENCE, self.out, rec)

    def run(self, req: Request, emitted: Emitted, progress) -> Result:
        first = self.judge.judge([self.ptx])[0]
        if not first.interesting:
            return self.no_difference(first)

        def on_step(text: str, steps: list[Step]) -> None:
            self.persist(text, steps)
            if progress is not None and steps:
                progress(steps[-1])

        outcome = reduce_ptx(self.ptx, self.entry, self.judge, batch=max(1, req.jobs // 2), on_step=on_step)
        pair = _pair(self.judge.judge([outcome.ptx])[0], self.setup, self.cache)
        _write_cubins(self.out, pair, self.cache)
        extra = {"one_minimal": outcome.one_minimal, "rounds": outcome.rounds, "tests": outcome.tests,
                 "dead_code_removed_with_each_candidate": outcome.cleanup, "minimal_pair": pair}
        if req.ablate:
            extra["ablation"] = {"minimal": as_json(ablate(outcome.ptx, self.setup, self.judge)),
                                 "input": as_json(ablate(emitted.ptx, self.setup, self.judge))}
        self.persist(outcome.ptx, list(outcome.steps), DONE, extra)
        return Result(DONE, self.out, self.last)


def reduce_request(req: Request, progress=None) -> Result:
    """Reduce one input under the sweep's verdict (and ``--keep``); DIR written as it goes."""
    started = time.monotonic()
    cache = Cache()
    setup, emitted, entry = _planned(req, cache)
    identity = _identity(emitted, entry, setup)
    out = prepare_dir(Path(req.out))
    with writing_to(out), lock_dir(out):
        start, earlier = _resume(out, identity, req.fresh)
        pool = LocalExecutor(req.jobs)
        red = _Reduction(out, setup, entry, Judge(setup, pool, cache), cache,
                         _record_head(setup, emitted, entry, identity, start, earlier), started, start or emitted.ptx)
        try:
            result = red.run(req, emitted, progress)
            pool.shutdown()
            return result
        except KeyboardInterrupt:
            pool.stop()
            red.persist(red.ptx, red.steps, INTERRUPTED)
            raise
        except BaseException:
            pool.stop()
            raise


def _write_record(out: Path, rec: dict) -> None:
    """reduce.json, checked against its record (what a reduction keeps is what ``records.ReduceRecord`` says)."""
    ReduceRecord.of(rec, str(out / RECORD)).write(out)


def _run_summary(rec: dict) -> dict:
    return {k: rec.get(k) for k in ("status", "ptxas_calls", "cache_hits", "wall_seconds")}


