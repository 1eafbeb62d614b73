"""``apply DIR -- python prog.py``: the program run with the tuned configuration of each of its kernels.

The program is first run once with the capture knobs (``capture.program``): its own PTX of every kernel is what the
tuned configuration is applied to (the tuned name, ptxas release and options), never a cubin built from another
specialisation. Each swapped cubin is verified by name (its entry is the tuned name) and, where the program's PTX
is the one tune timed, by hash (its machine code is the tuned one). The capture hook (``capture.swap``) then loads
those cubins in place of the program's own. A CuTe DSL kernel's host code looks it up by its own name, so its cubin
is assembled under the tuned name and its symbol then spelt back (``binary.symbols``; names of one length): the code
is the tuned name's, the name the program's; an export (``export_to_c``) made under apply embeds that cubin. With
``rounds`` the program is A/B-timed against the user's own configuration assembled the same way, plus an A/A copy:
``capture --run``'s design and small-sample rule.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.binary.symbols import respelled
from ptxprobe.capture.ab import Arm, calibration_failed, compare, run_rounds
from ptxprobe.capture.program import CUTE_FRONTEND, cute_env, run_program
from ptxprobe.core.cache import Cache, atomic_write, sha256_text
from ptxprobe.core.errors import SpecError, ToolFailed, ToolNotFound
from ptxprobe.gpu.timing import Nvml
from ptxprobe.ptx.rename import template_ptx
from ptxprobe.ptx.text import target_of
from ptxprobe.records.program import ApplyRecord
from ptxprobe.records.tuned import TunedDocument
from ptxprobe.stats import paired as stats
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import Tool, identify
from ptxprobe.tune.answer import TUNED_STATUS, across_problems

APPLIED = ApplyRecord.FILE
ARMS = ("yours", "tuned", "aa")  # the user's own configuration, the tuned one, an A/A copy of the user's


def tuned_by_entry(doc: TunedDocument) -> tuple[dict[str, dict], list[str]]:
    """Each raced kernel's record by its entry: one configuration across the problems it was tuned at
    (``answer.across_problems``), and notes on entries whose problems disagree. An entry where yours stays
    everywhere is not swapped."""
    groups: dict[str, list[dict]] = {}
    for rec in doc.kernels:
        if rec.status == TUNED_STATUS and rec.entry:
            groups.setdefault(rec.entry, []).append(rec.to_json())
    out: dict[str, dict] = {}
    notes = []
    for entry, recs in groups.items():
        one = across_problems(recs)
        if len({r["best"]["label"] for r in recs}) > 1:
            notes.append(f"{entry}: {one['change'].removeprefix('none: ')}")
        if not one["best_is_yours"]:
            out[entry] = one
    if not out and groups:
        raise SpecError("yours stays for every kernel tune raced (no configuration was confirmed faster): nothing "
                        "to apply")
    if not out:
        raise SpecError("the tuned answer holds no raced kernel (static pruning only): nothing to apply; run "
                        "`ptxprobe tune` on a GPU")
    return out, notes


@dataclass(frozen=True)
class Assembler:
    """What assembling a configuration again needs: the ptxas binaries by sha256 (where tune found each) and your
    own flags. Tune's answer has both; a program's race has them before it has an answer."""

    ptxas: dict
    user_flags: tuple[str, ...] = ()

    @classmethod
    def of(cls, doc: TunedDocument) -> Assembler:
        return cls(doc.ptxas, tuple(doc.space.get("user_flags", [])))


def ptxas_tool(ptxas: dict, sha256: str) -> Tool:
    """The ptxas of a tuned configuration, by its sha256 (the path tune recorded, checked again)."""
    rec = ptxas.get(sha256, {})
    path = rec.get("path")
    if path and Path(path).exists():
        tool = identify(path, "ptxas", rec.get("origin", "tuned"))
        if tool.sha256 == sha256:
            return tool
    raise ToolNotFound(f"ptxas {rec.get('version', sha256[:12])} of the tuned configuration is not on this machine "
                       f"(tune recorded {path}); install it with `ptxprobe toolchain install {rec.get('version', '')}`")


@dataclass(frozen=True)
class Swap:
    """One kernel of the program in one arm: its entry, the name and cubin loaded instead, and the checks."""

    entry: str
    name: str  # the symbol the program loads: the tuned name, or (CuTe DSL) its own
    cubin: str
    ptx_sha256: str
    ptxas_version: str
    options: tuple[str, ...]
    machine_code_sha256: str
    same_ptx_as_tuned: bool  # the program's PTX is the one tune timed: the machine code must be the tuned one
    verified: bool  # the cubin's entry is ``name`` (and, with same_ptx_as_tuned, its machine code the tuned one)
    compiled_as: str = ""  # the name ptxas assembled it under (the tuned name)


def build_swap(ptx: str, entry: str, ptx_sha256: str, rec: dict, which: str, assembler: Assembler, out: Path,
               cache: Cache, frontend: str | None = None) -> Swap:
    """``which`` ('best' or 'user') configuration of a tuned record applied to the program's own PTX; for a CuTe
    DSL kernel, assembled under the tuned name and loaded under its own (``binary.symbols.respelled``)."""
    cfg = rec[which]
    tool = ptxas_tool(assembler.ptxas, cfg["ptxas_sha256"])
    flags = (*assembler.user_flags, *cfg["options"])
    name, renamed = template_ptx(ptx, entry, cfg["name_template"])
    text = renamed.ptx
    art = assemble(text, _arch_of(ptx), tool, tuple(flags), cache=cache)
    if not art.ok:
        raise ToolFailed(f"ptxas {tool.version} could not assemble {entry} as {name}: {art.message[-300:]}")
    data = art.cubin()
    try:
        code = read_cubin(data).kernel(name).machine_code_sha256
    except Exception as exc:  # the cubin lacks the tuned name: not what tune chose
        raise ToolFailed(f"the cubin assembled for {entry} has no kernel {name}: {exc}") from exc
    loaded_as = entry if frontend == CUTE_FRONTEND else name
    if loaded_as != name:
        data = respelled(data, name, loaded_as)
        if read_cubin(data).kernel(loaded_as).machine_code_sha256 != code:  # the respelling touched the code
            raise ToolFailed(f"{entry}: spelling the symbol back changed the machine code of {name}")
    same = ptx_sha256 == rec.get("ptx_sha256")
    verified = code == cfg["machine_code_sha256"] if same else True
    # one file per PTX, ptxas and flags: two configurations that differ by an option alone never share it
    stem = f"{name}-{sha256_text(text + chr(0) + ' '.join(flags))[:12]}-{tool.version}"
    path = out / "cubins" / f"{stem}{'-as-own' if loaded_as != name else ''}.cubin"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return Swap(entry, loaded_as, str(path.resolve()), ptx_sha256, tool.version, tuple(cfg["options"]), code, same,
                verified, name)


def _arch_of(ptx: str) -> str:
    return target_of(ptx)


def write_arm(label: str, swaps: list[Swap], out: Path) -> Arm:
    """The swap plan of one arm (``capture.swap`` reads it) and where its hook reports."""
    plan, report = out / f"plan-{label}.json", out / f"report-{label}.jsonl"
    kernels = [{"entry": s.entry, "name": s.name, "compiled_as": s.compiled_as, "cubin": s.cubin,
                "ptx_sha256": s.ptx_sha256, "ptxas": s.ptxas_version} for s in swaps]
    atomic_write(plan, json.dumps({"arm": label, "kernels": kernels, "report": str(report.resolve())},
                                  indent=1).encode())
    return Arm(label, str(plan), {s.entry: s.name for s in swaps}, str(report.resolve()))


def program_env(arms_dir: Path, arch: str | None = None) -> dict[str, str]:
    """What the program's runs need beside the hook: Inductor through Triton's launcher (which the hook patches),
    a Triton cache of the arms' own (kernels compiled again, so each run's PTX is seen and swapped), the CuTe DSL's
    PTX kept (the hook matches a compiled function by it) and, with ``arch``, its target pinned (no GPU asked)."""
    cute_dump = (arms_dir / "cute-dump").resolve()
    cute_dump.mkdir(parents=True, exist_ok=True)  # the DSL writes only into a directory that exists
    return {"TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER": "0",
            "TRITON_CACHE_DIR": str((arms_dir / "triton-cache").resolve()), **cute_env(cute_dump, arch)}


def compare_arms(runs: list, margin: float = stats.EQUIVALENCE_MARGIN,
                 method: str = stats.SERIAL_SIGNED_RANK, power_limit_w: float | None = None) -> list[dict]:
    """The tuned arm and the A/A copy against the user's arm: ``capture.ab.compare``'s rule and rows."""
    return compare(runs, margin, baseline=ARMS[0], arms=ARMS[1:], method=method, power_limit_w=power_limit_w)


def apply_program(doc: TunedDocument, argv: list[str], out: Path, *, rounds: int, metric: str | None, timeout: float,
                  cache: Cache, log=lambda text: None, arch: str | None = None) -> ApplyRecord:
    """Capture the program's kernels, swap the tuned configuration in, run it (once, or an A/B of ``rounds``);
    ``arch`` pins a CuTe DSL program's target (an export on a machine without a GPU)."""
    tuned, notes = tuned_by_entry(doc)
    kernels, _ = run_program(argv, out / "capture", timeout, arch)
    matched = [k for k in kernels if k.entry in tuned and k.arch in (None, tuned[k.entry]["arch"])]
    elsewhere = sorted({f"{k.entry} for {k.arch} (tuned for {tuned[k.entry]['arch']})" for k in kernels
                        if k.entry in tuned and k not in matched})
    if elsewhere and not matched:  # a configuration's code is its target's own: tune for this one
        raise SpecError(f"the program compiled {elsewhere[0][:200]}: tune it for that target")
    notes += [f"not applied: {e[:200]}" for e in elsewhere]
    if not matched:
        raise ToolFailed(f"the program compiled none of the tuned kernels (tuned: {', '.join(sorted(tuned))}; it "
                         f"compiled: {', '.join(sorted({k.entry for k in kernels}))[:200]})")
    shared, matched = one_per_cute_module(matched)
    notes += [f"not applied: {k.entry[:120]} shares one CuTe DSL cubin with {first[:120]} (one kernel per compiled "
              "function)" for k, first in shared]
    arms_dir = out / "arms"
    assembler = Assembler.of(doc)
    swaps: dict[str, list[Swap]] = {"tuned": [], "yours": []}
    for k in matched:
        ptx = (out / "capture" / k.ptx).read_text()
        for arm, which in (("tuned", "best"), ("yours", "user")):
            swaps[arm].append(build_swap(ptx, k.entry, k.ptx_sha256, tuned[k.entry], which, assembler, arms_dir,
                                         cache, k.frontend))
    bad = [s for s in swaps["tuned"] if not s.verified]
    if bad:
        raise ToolFailed(f"{bad[0].entry}: the program's PTX is the one tune timed, yet its cubin's machine code is "
                         "not the tuned one (ptxas gave other code this time)")
    arms = {label: write_arm(label, swaps["yours" if label == "aa" else label], arms_dir) for label in ARMS}
    env = program_env(arms_dir, arch)
    chosen = [arms[a] for a in (ARMS if rounds else ("tuned",))]
    runs = run_rounds(argv, chosen, arms_dir, max(1, rounds), timeout, metric, env_extra=env, log=log)
    failed = [r for r in runs if r.value is None]  # failed, gave no --metric number, or ran nothing of ptxprobe's
    if failed:
        raise ToolFailed(f"the program with {'the tuned kernels' if failed[0].arm == 'tuned' else 'your own'} swapped "
                         f"in (arm {failed[0].arm}, round {failed[0].round + 1}): {failed[0].note}")
    rec = {"command": argv, "rounds": rounds, "metric": metric or "wall seconds", "notes": notes,
           "kernels": [{**asdict(s), "options": list(s.options), "change": tuned[s.entry]["change"],
                        "gain": tuned[s.entry]["gain"]} for s in swaps["tuned"]],
           "yours": [{**asdict(s), "options": list(s.options)} for s in swaps["yours"]],
           "runs": [asdict(r) for r in runs],
           "comparisons": compare_arms(runs, power_limit_w=Nvml().power_limit_w()) if rounds else []}
    rec["calibration_failed"] = bool(rounds) and calibration_failed(rec["comparisons"])
    rec["prediction"] = prediction_check(rec)
    record = ApplyRecord.of(rec, str(out / APPLIED))
    record.write(out)
    return record


def one_per_cute_module(kernels: list) -> tuple[list[tuple], list]:
    """A CuTe DSL compiled function is one cubin, which the hook replaces whole: of several tuned kernels compiled
    into one (one PTX), the first is applied. ((kernel left out, the kernel applied instead), the kernels kept)."""
    first: dict[str, str] = {}
    kept, shared = [], []
    for k in kernels:
        if k.frontend == CUTE_FRONTEND and k.ptx_sha256 in first:
            shared.append((k, first[k.ptx_sha256]))
            continue
        first.setdefault(k.ptx_sha256, k.entry)
        kept.append(k)
    return shared, kept


def prediction_check(rec: dict) -> dict | None:
    """Whether the program's A/B bears out what tune predicted: only where one kernel was swapped (a program's gain
    from several kernels is not any one kernel's gain). ``inside``: the program's estimate lies in the predicted
    interval; ``overlap``: the two intervals share a point; ``difference``: program minus prediction."""
    measured = next((c for c in rec.get("comparisons", []) if c["arm"] == "tuned" and "ratio" in c), None)
    gains = [k.get("gain") for k in rec.get("kernels", [])]
    if measured is None or len(gains) != 1 or not gains[0]:
        return None
    g = gains[0]
    slack = 1e-9  # two computations of one ratio (a deterministic measure gives zero-width intervals) may differ there
    return {"predicted": {k: g[k] for k in ("ratio", "low", "high")},
            "measured": {k: measured[k] for k in ("ratio", "low", "high", "verdict")},
            "inside": g["low"] - slack <= measured["ratio"] <= g["high"] + slack,
            "overlap": measured["low"] - slack <= g["high"] and g["low"] - slack <= measured["high"],
            "difference": measured["ratio"] - g["ratio"]}


def changes(doc: TunedDocument) -> list[dict]:
    """Every raced kernel's one-line source change (CUDA C++: the symbol and the ptxas release/options)."""
    return [{"kernel": k.kernel, "arch": k.arch, "entry": k.entry, "change": k.change or ""}
            for k in doc.kernels if k.status == TUNED_STATUS]
