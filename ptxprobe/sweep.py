"""Rename sweeps: names x kernels x dtypes x head dims x causal x configs x archs x ptxas x flags.

Each kernel spec is emitted once per arch; renames are pure text; ptxas runs in a process
pool. Every finished assembly is appended to ``variants.jsonl`` at once, so an interrupted
sweep loses nothing and a re-run skips what is there. ``results.jsonl``/``results.parquet``
are derived from that log (baseline comparisons, verdicts) and rewritten at the end.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

from . import __version__
from .assemble import TRITON_FLAGS, Artifact, assemble, cached_artifact
from .cache import Cache, cache_key, sha256_file, sha256_text
from .cubin import kernel_columns
from .emit import Emitted, emit_kernel, require_arch
from .errors import CubinError, PtxprobeError, SpecError
from .registry import Problem, family
from .rename import apply_template, check_equivalent, rename_entry
from .toolchain import Tool, discover, select_ptxas

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXPERIMENT = REPO_ROOT / "experiments" / "default.toml"
LOG, RESULTS_JSONL, RESULTS_PARQUET, MANIFEST = "variants.jsonl", "results.jsonl", "results.parquet", "manifest.json"


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str = ""
    kernels: tuple[str, ...] = ("attention",)
    dtypes: tuple[str, ...] = ("fp16",)
    head_dims: tuple[int, ...] = (128,)
    causal: tuple[bool, ...] = (False,)
    configs: tuple[str, ...] = ("default",)
    archs: tuple[str, ...] = ("sm_90a",)
    ptxas: tuple[str, ...] = ("triton",)
    flags: tuple[tuple[str, ...], ...] = (TRITON_FLAGS,)  # full ptxas flag lists (besides -v/--gpu-name)
    names: tuple[str, ...] = ("{base}", "cutlass_{base}")
    repeat: dict = field(default_factory=lambda: {"default": 1})
    seq_len: int = 4096
    ptx_files: tuple[str, ...] = ()
    cu_files: tuple[str, ...] = ()  # "file.cu" or "file.cu:entry", compiled by nvcc for every arch
    cubin_files: tuple[str, ...] = ()  # cubins with embedded PTX (-lineinfo)
    triton_functions: tuple[str, ...] = ()  # "module:function=spec.json" (or .toml)
    run: dict = field(default_factory=dict)  # the [run] table: GPU problem sizes and timing plan
    source: str | None = None  # path of the TOML it came from

    def repeats(self, arch: str) -> int:
        return int(self.repeat.get(arch, self.repeat.get("default", 1)))

    def to_json(self) -> dict:
        return asdict(self)


_LIST_AXES = (
    "kernels",
    "dtypes",
    "head_dims",
    "causal",
    "configs",
    "archs",
    "ptxas",
    "names",
    "ptx_files",
    "cu_files",
    "cubin_files",
    "triton_functions",
)


def load_experiment(path: str | os.PathLike) -> Experiment:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError as exc:
        raise SpecError(f"experiment file not found: {p}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: not valid TOML: {exc}") from exc
    meta = data.get("experiment", {})
    sweep = data.get("sweep", {})
    return experiment_from_dict(
        {
            **sweep,
            "name": meta.get("name", p.stem),
            "run": data.get("run", {}),
            "description": meta.get("description", ""),
            "source": str(p),
        }
    )


def experiment_from_dict(d: dict) -> Experiment:
    known = set(Experiment.__dataclass_fields__)
    unknown = set(d) - known
    if unknown:
        raise SpecError(f"unknown sweep keys: {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    kw = dict(d)
    for k in _LIST_AXES:
        if k in kw:
            v = kw[k]
            kw[k] = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    if "flags" in kw:
        kw["flags"] = tuple(tuple(f.split()) if isinstance(f, str) else tuple(f) for f in kw["flags"])
    if "repeat" in kw and not isinstance(kw["repeat"], dict):
        kw["repeat"] = {"default": int(kw["repeat"])}
    exp = Experiment(**kw)
    if not exp.names:
        raise SpecError("names: at least the baseline template is needed")
    for n in exp.names:
        if "{base}" not in n and n != n.strip():
            raise SpecError(f"bad name template {n!r}")
    return exp


def override(exp: Experiment, assignments: list[str]) -> Experiment:
    """Apply ``axis=v1,v2`` overrides from the command line."""
    changes: dict = {}
    for a in assignments:
        if "=" not in a:
            raise SpecError(f"--set takes axis=value[,value...], got {a!r}")
        key, _, raw = a.partition("=")
        key = key.strip().replace("-", "_")
        vals = [v.strip() for v in raw.split(",") if v.strip()]
        if key in ("head_dims",):
            changes[key] = [int(v) for v in vals]
        elif key == "causal":
            changes[key] = [v.lower() in ("1", "true", "yes", "causal") for v in vals]
        elif key == "repeat":
            changes[key] = {"default": int(vals[0])}
        elif key == "seq_len":
            changes[key] = int(vals[0])
        elif key == "flags":
            changes[key] = [raw.split(";")[i].split() for i in range(len(raw.split(";")))]
        else:
            changes[key] = vals
    base = {k: getattr(exp, k) for k in Experiment.__dataclass_fields__}
    base.update(changes)
    return experiment_from_dict(base)


@dataclass(frozen=True)
class Variant:
    """One assembly to perform: which PTX, renamed to what, by which ptxas, with which flags."""

    kernel: str
    family: str
    dtype: str | None
    head_dim: int | None
    causal: bool | None
    config: str | None
    arch: str
    ptxas_version: str
    ptxas_sha256: str
    flags: tuple[str, ...]
    name_template: str
    name: str
    baseline_name: str
    repeat: int

    @property
    def variant_id(self) -> str:
        return cache_key(**asdict(self))[:20]

    @property
    def group(self) -> tuple:
        """Everything but name and repeat: the rows a verdict compares."""
        return (self.kernel, self.arch, self.ptxas_sha256, self.flags)


# --- workers (top-level so they pickle) ----------------------------------------------------


def _emit_job(
    kernel_family: str,
    dtype: str,
    head_dim: int,
    causal: bool,
    config: str,
    arch: str,
    seq_len: int,
    cache_root: str,
    cache_enabled: bool,
    only_cached: bool = False,
) -> Emitted | None:
    fam = family(kernel_family)
    spec = fam.spec(dtype, head_dim, causal, config)
    return emit_kernel(
        fam,
        spec,
        arch,
        problem=Problem(seq_len=seq_len),
        cache=Cache(cache_root, cache_enabled),
        only_cached=only_cached,
    )


def _assemble_job(
    variant: Variant, ptx: str, tool: Tool, timeout: float, cache_root: str, cache_enabled: bool, extra: dict
) -> dict:
    art = assemble(
        ptx,
        variant.arch,
        tool,
        variant.flags,
        repeat=variant.repeat,
        timeout=timeout,
        cache=Cache(cache_root, cache_enabled),
    )
    return variant_row(variant, art, extra, Cache(cache_root, cache_enabled))


def _cubin_columns(art: Artifact, name: str, cache: Cache) -> dict:
    """kernel_columns, memoised by cubin hash (re-reading ELF files dominates a warm sweep)."""
    key = cache_key(cubin=art.cubin_sha256, name=name, v=1)
    hit = cache.get_json("cubin-columns", key)
    if hit is None:
        hit = kernel_columns(art.cubin(), name)
        cache.put_json("cubin-columns", key, hit)
    return hit


def variant_row(variant: Variant, art: Artifact, extra: dict, cache: Cache | None = None) -> dict:
    """The raw result row of one assembly (everything derived later is left out)."""
    row = {
        "variant_id": variant.variant_id,
        **asdict(variant),
        "ptxas_flags": " ".join(variant.flags),
        "status": art.status,
        "error": "" if art.ok else art.stderr.strip()[-2000:],
        "ptxas_seconds": art.seconds,
        "cached": art.cached,
        "note": art.note,
        "ptx_sha256": art.ptx_sha256,
        "cubin_sha256": art.cubin_sha256,
        **extra,
    }
    row.pop("flags")
    rep = art.reports.get(variant.name)
    row.update(
        {
            "registers": rep.registers if rep else None,
            "spill_store_bytes": rep.spill_store_bytes if rep else None,
            "spill_load_bytes": rep.spill_load_bytes if rep else None,
            "stack_bytes": rep.stack_bytes if rep else None,
            "barriers": rep.barriers if rep else None,
        }
    )
    facts_cols = dict.fromkeys(
        (
            "text_sha256",
            "code_sha256",
            "text_bytes",
            "capmerc_bytes",
            "merc_bytes",
            "n_instructions",
            "shared_bytes",
            "eiattr_registers",
        )
    )
    if art.ok:
        try:
            facts_cols.update(_cubin_columns(art, variant.name, cache or Cache()))
        except (CubinError, OSError) as exc:
            row["status"], row["error"] = "bad_cubin", str(exc)
    row.update(facts_cols)
    return row


# --- planning ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """PTX to rename: one emitted kernel spec on one arch, or a user's PTX file."""

    emitted: Emitted
    family: str
    dtype: str | None = None
    head_dim: int | None = None
    causal: bool | None = None
    config: str | None = None


def _proved_equivalent(base_ptx: str, base_name: str, ptx: str, name: str, cache: Cache):
    """check_equivalent, memoised by content (the proof is a pure function of the two texts)."""
    from .rename import Equivalence

    key = cache_key(a=sha256_text(base_ptx), an=base_name, b=sha256_text(ptx), bn=name, v=1)
    hit = cache.get_json("rename-proof", key)
    if hit is not None:
        return Equivalence(**hit)
    eq = check_equivalent(base_ptx, base_name, ptx, name)
    cache.put_json("rename-proof", key, asdict(eq))
    return eq


def plan_variants(
    exp: Experiment, sources: list[Source], tools: list[Tool], cache: Cache | None = None
) -> list[tuple[Variant, str, Tool, dict]]:
    """Every (variant, renamed PTX, ptxas, extra columns) of the sweep, renames checked."""
    out = []
    for src in sources:
        e = src.emitted
        base_entry = e.entry
        baseline_name = apply_template(exp.names[0], base_entry)
        base_ptx = e.ptx if baseline_name == base_entry else rename_entry(e.ptx, base_entry, baseline_name).ptx
        ptxases = [t for spec in exp.ptxas for t in select_ptxas(e.arch, spec, tools)]
        for template in exp.names:
            name = apply_template(template, base_entry)
            renamed = rename_entry(base_ptx, baseline_name, name)
            eq = _proved_equivalent(base_ptx, baseline_name, renamed.ptx, name, cache or Cache())
            if not eq.equal:
                raise PtxprobeError(f"rename {baseline_name} -> {name} changed more than the name: {eq.detail}")
            extra = {
                "rename_sites": renamed.sites,
                "rename_equivalent": eq.equal,
                "specialization": json.dumps(e.metadata.get("specialization", {}), sort_keys=True),
            }
            for tool, flags in itertools.product(dict.fromkeys(ptxases), exp.flags):
                for r in range(exp.repeats(e.arch)):
                    v = Variant(
                        e.kernel,
                        src.family,
                        src.dtype,
                        src.head_dim,
                        src.causal,
                        src.config,
                        e.arch,
                        tool.version,
                        tool.sha256,
                        tuple(flags),
                        template,
                        name,
                        baseline_name,
                        r,
                    )
                    out.append((v, renamed.ptx, tool, extra))
    return out


def user_sources(exp: Experiment, cache: Cache | None = None) -> list[Source]:
    """The user's own kernels: PTX and cubins keep their .target; .cu and Triton functions build per arch."""
    from .emit import emit_user, runtime_params, split_spec, user_items, user_triton_specialization
    from .launch import check_against_source, load_launch

    out = []
    for kind, item in user_items(exp):
        archs = [None] if kind in ("ptx", "cubin") else exp.archs
        target, spec_path = split_spec(item)
        launch = load_launch(spec_path) if spec_path else None  # a bad launch spec fails here, before any work
        loaded = user_triton_specialization(target, spec_path) if kind == "triton-user" and spec_path else None
        params = runtime_params(*loaded[:2]) if loaded else []
        for arch in archs:
            e = emit_user(kind, item, arch, cache, loaded=loaded)
            if launch is not None:
                check_against_source(launch, e.ptx, e.entry, kind, params)
            out.append(Source(e, kind))
    return out


def emit_jobs(exp: Experiment) -> list[tuple]:
    """One emission per (kernel, dtype, head dim, causal, config, arch) that the kernel supports.

    With several kernels in one experiment, combinations a kernel does not support (fp8 for the
    CUDA kernel, sm_90a for the Blackwell-only Gluon kernel) are skipped; asking for nothing a
    kernel can build is an error.
    """
    jobs = []
    for k in exp.kernels:
        fam = family(k)
        mine = 0
        for dt, d, c, cfg, arch in itertools.product(exp.dtypes, exp.head_dims, exp.causal, exp.configs, exp.archs):
            if len(exp.kernels) > 1 and not fam.supports(dt, d, arch):
                continue
            require_arch(fam, arch)
            spec = fam.spec(dt, d, c, cfg)  # validates the axes before any work
            jobs.append((k, dt, d, c, spec.config.label, arch, exp.seq_len))
            mine += 1
        if not mine:
            raise SpecError(f"{k}: none of the experiment's dtypes/head dims/archs are supported by it")
    return jobs


# --- derived columns -----------------------------------------------------------------------


def static_verdict(base: Counter, var: Counter) -> tuple[str, float | None]:
    """Compare the multisets of outputs (code hashes) of baseline and variant runs.

    The confidence of a difference is 1 - u**n: u is the Good-Turing estimate (add-one) of
    how much of the baseline's output distribution the baseline runs have not yet shown, n
    the variant's run count: the chance that n draws from the baseline's own distribution
    would all have missed everything the baseline showed.
    """
    if not base or not var:
        return "", None
    b, v = set(base), set(var)
    n_b, n_v = sum(base.values()), sum(var.values())
    if b == v:
        return ("identical" if len(b) == 1 else "differs_within_noise"), None
    if v <= b or (b & v):
        return "differs_within_noise", None
    singletons = sum(1 for c in base.values() if c == 1)
    unseen = (singletons + 1) / (n_b + 1)
    confidence = 1.0 - unseen**n_v
    if len(b) == 1 and len(v) == 1 and min(n_b, n_v) >= 2:
        return "differs_deterministic", confidence
    if max(n_b, n_v) < 2:
        return "differs_unrepeated", confidence  # one run each: nothing is known about ptxas's own spread
    return "differs_beyond_noise", confidence


def derive(rows: list[dict]) -> list[dict]:
    """Add baseline comparisons and verdicts to raw rows (pure: rows in, new rows out)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["kernel"], r["arch"], r["ptxas_sha256"], r["ptxas_flags"])].append(r)
    out = []
    for members in groups.values():
        by_name: dict[str, list[dict]] = defaultdict(list)
        for r in members:
            by_name[r["name"]].append(r)
        baseline = members[0]["baseline_name"]
        base_rows = [r for r in by_name.get(baseline, []) if r["status"] == "ok"]
        base_code = Counter(r["code_sha256"] for r in base_rows)
        base_text = {r["text_sha256"] for r in base_rows}
        base_regs = sorted({r["registers"] for r in base_rows if r["registers"] is not None})
        base_cap = sorted({r["capmerc_bytes"] for r in base_rows if r["capmerc_bytes"] is not None})
        for name, rs in by_name.items():
            ok = [r for r in rs if r["status"] == "ok"]
            code = Counter(r["code_sha256"] for r in ok)
            verdict, conf = ("baseline", None) if name == baseline else static_verdict(base_code, code)
            for r in rs:
                d = dict(r)
                d["is_baseline"] = name == baseline
                d["n_runs"] = len(ok)
                d["distinct_outputs"] = len(code)
                d["baseline_distinct_outputs"] = len(base_code)
                d["same_text_as_baseline"] = (
                    (r["text_sha256"] in base_text) if r["status"] == "ok" and base_text else None
                )
                d["same_code_as_baseline"] = (
                    (r["code_sha256"] in base_code) if r["status"] == "ok" and base_code else None
                )
                d["verdict"] = verdict
                d["verdict_confidence"] = conf
                d["baseline_registers"] = base_regs[0] if len(base_regs) == 1 else None
                d["baseline_capmerc_bytes"] = base_cap[0] if len(base_cap) == 1 else None
                out.append(d)
    return out


# --- running -------------------------------------------------------------------------------


def read_log(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by an interruption: that variant simply runs again
    return rows


def _drop_torn_tail(log: Path) -> None:
    """An interruption mid-write leaves a partial last line: cut it so appends start clean."""
    if not log.exists() or log.stat().st_size == 0:
        return
    data = log.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with open(log, "r+b") as f:
        f.truncate(keep)


def write_outputs(out_dir: Path, rows: list[dict]) -> list[dict]:
    import pandas as pd

    derived = derive(rows)
    tmp = out_dir / (RESULTS_JSONL + ".tmp")
    with open(tmp, "w") as f:
        for r in derived:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, out_dir / RESULTS_JSONL)
    if derived:
        df = pd.DataFrame(derived)
        tmpq = out_dir / (RESULTS_PARQUET + ".tmp")
        df.to_parquet(tmpq, index=False)
        os.replace(tmpq, out_dir / RESULTS_PARQUET)
    return derived


def kernel_source_hashes() -> dict:
    kdir = REPO_ROOT / "kernels"
    return {
        str(p.relative_to(REPO_ROOT)): sha256_file(p)
        for p in sorted(kdir.rglob("*"))
        if p.is_file() and p.suffix in (".py", ".cu", ".cuh", ".toml")
    }


def build_manifest(exp: Experiment, tools: list[Tool], argv: list[str], started: float, counts: dict) -> dict:
    import importlib.metadata as md

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    exp_file = exp.source
    return {
        "ptxprobe_version": __version__,
        "command": argv,
        "experiment": exp.to_json(),
        "experiment_sha256": sha256_file(exp_file) if exp_file and Path(exp_file).exists() else None,
        "kernel_sources": kernel_source_hashes(),
        "tools": [t.to_dict() for t in tools],
        "python": sys.version.split()[0],
        "triton": version("triton"),
        "torch": version("torch"),
        "host": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "node": platform.node(),
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": time.time() - started,
        "counts": counts,
    }


@dataclass
class SweepOutcome:
    out_dir: Path
    rows: list[dict]
    ran: int
    skipped: int
    wall_seconds: float
    ptxas_seconds: float
    interrupted: bool = False


def run_sweep(
    exp: Experiment,
    out_dir: str | os.PathLike,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
    timeout: float = 600.0,
    progress: bool = True,
    argv: list[str] | None = None,
    fresh: bool = False,
    max_variants: int | None = None,
) -> SweepOutcome:
    """Run (or resume) a sweep into ``out_dir``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    started = time.time()
    cache = cache or Cache()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / LOG
    if fresh and log.exists():
        log.unlink()
    _drop_torn_tail(log)
    done_rows = read_log(log)
    done_ids = {r["variant_id"] for r in done_rows}
    jobs = jobs or os.cpu_count() or 1
    tools = discover()
    ran = 0
    ptxas_seconds = 0.0
    interrupted = False
    ejobs = emit_jobs(exp)
    sources = user_sources(exp, cache)
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        Progress(*cols, disable=not progress, transient=False) as bar,
        ProcessPoolExecutor(max_workers=jobs) as pool,
        open(log, "a") as logf,
    ):
        t_emit = bar.add_task("emit PTX", total=len(ejobs))
        t_asm = bar.add_task("ptxas", total=None)
        pending: dict[Future, tuple | None] = {}  # emission job, or None for an assembly
        planned = 0
        skipped = 0

        def record(row: dict) -> None:
            nonlocal ran, ptxas_seconds
            row["run_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            logf.write(json.dumps(row, sort_keys=True) + "\n")
            logf.flush()
            os.fsync(logf.fileno())
            done_rows.append(row)
            done_ids.add(row["variant_id"])
            ran += 1
            if not row["cached"]:
                ptxas_seconds += row["ptxas_seconds"] or 0.0
            bar.advance(t_asm)

        def submit_variants(src: Source):
            nonlocal planned, skipped
            for v, ptx, tool, extra in plan_variants(exp, [src], tools, cache):
                if max_variants is not None and planned >= max_variants:
                    return
                planned += 1
                bar.update(t_asm, total=planned)
                if v.variant_id in done_ids:
                    skipped += 1
                    bar.advance(t_asm)
                    continue
                hit = (
                    cached_artifact(ptx, v.arch, tool, v.flags, repeat=v.repeat, cache=cache) if cache.enabled else None
                )
                if hit is not None:  # a cache hit is served here: no process hop
                    record(variant_row(v, hit, extra, cache))
                    continue
                pending[pool.submit(_assemble_job, v, ptx, tool, timeout, str(cache.root), cache.enabled, extra)] = None

        def source_of(job: tuple, emitted: Emitted) -> Source:
            kernel, dt, d, c, cfg = job[:5]
            return Source(emitted, kernel, dt, d, c, cfg)

        try:
            for src in sources:
                submit_variants(src)
            for j in ejobs:
                hit = _emit_job(*j, str(cache.root), cache.enabled, only_cached=True) if cache.enabled else None
                if hit is not None:
                    bar.advance(t_emit)
                    submit_variants(source_of(j, hit))
                else:
                    pending[pool.submit(_emit_job, *j, str(cache.root), cache.enabled)] = j
            while pending:
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for f in finished:
                    job = pending.pop(f)
                    if job is not None:  # an emission: its job tuple names the spec
                        bar.advance(t_emit)
                        submit_variants(source_of(job, f.result()))
                    else:
                        record(f.result())
        except KeyboardInterrupt:
            interrupted = True
            pool.shutdown(wait=False, cancel_futures=True)
    rows = write_outputs(out, done_rows)
    counts = {
        "rows": len(rows),
        "ran_this_time": ran,
        "skipped_done": skipped,
        "by_status": dict(Counter(r["status"] for r in rows)),
        "interrupted": interrupted,
    }
    manifest = build_manifest(exp, tools, argv or sys.argv, started, counts)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return SweepOutcome(out, rows, ran, skipped, time.time() - started, ptxas_seconds, interrupted)


# --- summaries (records, not strings) ------------------------------------------------------


def summarize(rows: list[dict]) -> list[dict]:
    """One record per (kernel, arch, ptxas, flags, name): the verdict and its key deltas."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["kernel"], r["arch"], r["ptxas_version"], r["ptxas_flags"], r["name"])].append(r)
    out = []
    for (kernel, arch, ver, flags, name), rs in sorted(groups.items()):
        ok = [r for r in rs if r["status"] == "ok"]
        regs = sorted({r["registers"] for r in ok if r["registers"] is not None})
        caps = sorted({r["capmerc_bytes"] for r in ok if r["capmerc_bytes"] is not None})
        spills = sorted({(r["spill_store_bytes"] or 0) + (r["spill_load_bytes"] or 0) for r in ok})
        out.append(
            {
                "kernel": kernel,
                "arch": arch,
                "ptxas_version": ver,
                "ptxas_flags": flags,
                "name": name,
                "is_baseline": rs[0].get("is_baseline"),
                "runs": len(rs),
                "ok": len(ok),
                "statuses": dict(Counter(r["status"] for r in rs)),
                "distinct_outputs": len({r["code_sha256"] for r in ok}),
                "registers": regs,
                "baseline_registers": rs[0].get("baseline_registers"),
                "capmerc_bytes": caps,
                "baseline_capmerc_bytes": rs[0].get("baseline_capmerc_bytes"),
                "spill_bytes": spills,
                "verdict": rs[0].get("verdict", ""),
                "verdict_confidence": rs[0].get("verdict_confidence"),
            }
        )
    return out


def default_out_dir(exp: Experiment) -> Path:
    return Path("runs") / exp.name
