"""Does each Triton release's build of the Gluon Hopper attention still compute attention?

    python experiments/benchmarks/gluon_releases.py build DIR          # no GPU; once per release, in its venv
    python experiments/benchmarks/gluon_releases.py check DIR --out O  # on an H200, with that machine's Triton

The kernels in ``kernels/`` are one source for every Triton from 3.6 on (``kernels/gluon_api.py`` resolves the
names that moved), so the PTX each release emits differs: this checks that every release's code is right.

* build: every dtype x head dim x mask of ``attention_gluon_hopper`` emitted by ptxprobe for sm_90a with the
  installed Triton and assembled by that release's own ptxas; beside each cubin, what a launch needs (the entry's
  parameter list, shared memory, warps, scratch sizes) and the static facts (registers, spills).
* check: the GPU machine has one Triton. For each config Triton's own compile of the same specialisation gives the
  launcher; a release's cubin is swapped into it only where the two agree on every parameter and on warps and
  scratch (the launcher then passes exactly what that release's launcher would); its shared memory is the
  release's. The output (poisoned with NaN first) is compared with float64 attention on the same inputs, with the
  bound tests/test_gpu.py uses. Two controls: the machine's own release, built here, must be the machine code
  Triton compiles there; a planted wrong kernel (the causal cubin launched on a non-causal problem) must fail.

Writes ``O/releases.json`` (every build record and check) and prints one line per release.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

FAMILY = "attention_gluon_hopper"
ARCH = "sm_90a"
DTYPES = ("fp16", "bf16", "fp8e4nv")
HEAD_DIMS = (64, 128)
BATCH, HEADS, SEQ_LEN = 2, 4, 1024
BOUND = {"fp16": 5e-3, "bf16": 5e-3, "fp8e4nv": 6e-2}  # ||out - ref|| / ||ref||, as tests/test_gpu.py


def configs():
    return [(d, h, c) for d in DTYPES for h in HEAD_DIMS for c in (False, True)]


def config_key(dtype: str, head_dim: int, causal: bool) -> str:
    return f"{dtype}-d{head_dim}-{'causal' if causal else 'full'}"


def build(out: Path) -> None:
    """This release's cubins and launch records under ``out/<triton version>/``."""
    import importlib.metadata as md
    import tempfile

    from ptxprobe.api import Cache, RegisteredSource, assemble, entry_params, read_cubin, triton_ptxas

    version = md.version("triton")
    here = out / version
    here.mkdir(parents=True, exist_ok=True)
    tool = triton_ptxas(ARCH)
    cache = Cache(Path(tempfile.mkdtemp(prefix="ptxprobe-releases-")))
    records = []
    for dtype, head_dim, causal in configs():
        e = RegisteredSource(FAMILY, dtype, head_dim, causal, "default", SEQ_LEN).emit(ARCH, cache)
        art = assemble(e.ptx, ARCH, tool, cache=cache)
        key = config_key(dtype, head_dim, causal)
        rec = {"config": key, "dtype": dtype, "head_dim": head_dim, "causal": causal, "entry": e.entry,
               "assembled": art.ok, "ptx_sha256": e.ptx_sha256}
        if art.ok:
            cubin = art.cubin()
            (here / f"{key}.cubin").write_bytes(cubin)
            k = read_cubin(cubin).kernel(e.entry)
            rep = art.reports[e.entry]
            rec.update(
                params=[[p.type, p.count] for p in entry_params(e.ptx, e.entry)],
                launch={m: e.metadata.get(m) for m in ("shared", "num_warps", "num_ctas", "global_scratch_size",
                                                       "profile_scratch_size", "tmem_size")},
                registers=k.regcount, spill_bytes=rep.spill_store_bytes + rep.spill_load_bytes,
                text_sha256=k.text_sha256, machine_code_sha256=k.machine_code_sha256)
        else:
            rec["ptxas_error"] = art.stderr.strip().splitlines()[-1:] if art.stderr else []
        records.append(rec)
    doc = {"triton": version, "ptxas": {"version": tool.version, "sha256": tool.sha256},
           "python": platform.python_version(), "configs": records}
    (here / "build.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"triton {version}: {sum(r['assembled'] for r in records)} of {len(records)} configs assembled "
          f"(ptxas {tool.version}) -> {here}")


def _launcher(fam, spec, problem):
    """Triton's own compile on this machine: (the compiled kernel with its launcher and launch metadata, its PTX's
    parameter list, its machine code's hash)."""
    from ptxprobe.api import entry_params, read_cubin, specialize, triton_compiled

    sp = specialize(fam.fn, fam.launch_args(spec, problem, None))
    base = triton_compiled(fam.fn, sp, fam.compile_options(spec))
    params = [[p.type, p.count] for p in entry_params(base.asm["ptx"], base.name)]
    return base, params, read_cubin(base.kernel).kernel(base.name).text_sha256


def _run(fam, spec, problem, kernel, n_sms: int):
    """Error of one launch against float64 on fresh inputs (output poisoned with NaN), or why not."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = fam.make_inputs(spec, problem, device="cuda", generator=gen)
    kernel[fam.grid(spec, problem, n_sms)](*fam.launch_args(spec, problem, inputs))
    torch.cuda.synchronize()
    out = inputs[fam.output_key]
    ref = fam.reference(spec, inputs)
    nan = int(torch.isnan(out).sum())
    o64 = out.to(torch.float64)
    rel = float(torch.linalg.vector_norm(o64 - ref) / torch.linalg.vector_norm(ref)) if not nan else None
    return {"nan_count": nan, "rel_err_vs_reference": rel, "output_sha": _digest(out)}


def _within_bound(res: dict, dtype: str) -> bool:
    """A launch's output fully written and within its dtype's bound of float64."""
    return res["rel_err_vs_reference"] is not None and res["rel_err_vs_reference"] < BOUND[dtype]


def _digest(t) -> str:
    """sha256 of a tensor's bytes: two launches that agree bitwise have the same digest."""
    import hashlib

    import torch

    return hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes()).hexdigest()


def check(src: Path, out: Path) -> int:
    """Every release's cubins under ``src`` launched and checked; 0 when every check and control holds."""
    import importlib.metadata as md

    from ptxprobe.api import Problem, family, gpu_info

    info = gpu_info(0)
    fam = family(FAMILY)
    problem = Problem(BATCH, HEADS, SEQ_LEN)
    machine_triton = md.version("triton")
    builds = {p.parent.name: json.loads(p.read_text()) for p in sorted(src.glob("*/build.json"))}
    rows, launchers = [], {}
    for dtype, head_dim, causal in configs():
        spec = fam.spec(dtype, head_dim, causal)
        key = config_key(dtype, head_dim, causal)
        base, params, own_text = _launcher(fam, spec, problem)
        launchers[key] = (spec, base, params, own_text)
        own = _run(fam, spec, problem, base, info["sms"])
        rows.append({"release": f"{machine_triton} (this machine's JIT)", "config": key, "ran": True, **own,
                     "within_bound": _within_bound(own, dtype)})
    for release, doc in builds.items():
        for rec in doc["configs"]:
            spec, base, params, own_text = launchers[rec["config"]]
            row = {"release": release, "ptxas": doc["ptxas"]["version"], "config": rec["config"],
                   "registers": rec.get("registers"), "spill_bytes": rec.get("spill_bytes")}
            why = _launch_mismatch(rec, base, params)
            if not rec["assembled"] or why:
                rows.append({**row, "ran": False, "why_not": why or "ptxas failed"})
                continue
            cubin = (src / release / f"{rec['config']}.cubin").read_bytes()
            res = _run(fam, spec, problem, _with_release(base, rec, cubin), info["sms"])
            rows.append({**row, "ran": True, **res, "within_bound": _within_bound(res, rec["dtype"]),
                         "same_machine_code_as_this_machines_jit": rec["text_sha256"] == own_text})
    plant = _plant(fam, problem, launchers, builds.get(machine_triton), src, info["sms"])
    doc = {"question": "Does each Triton release's build of the Gluon Hopper attention compute attention on the GPU?",
           "command": " ".join(sys.argv), "gpu": info, "machine_triton": machine_triton,
           "problem": {"batch": BATCH, "heads": HEADS, "seq_len": SEQ_LEN}, "bound": BOUND,
           "builds": builds, "checks": rows, "plant": plant}
    out.mkdir(parents=True, exist_ok=True)
    (out / "releases.json").write_text(json.dumps(doc, indent=1) + "\n")
    for line in release_lines(doc):
        print(line)
    print(f"plant (causal cubin on a full problem) caught: {plant.get('caught')}")
    good = all(r["ran"] and r["within_bound"] for r in rows) and plant.get("caught") is True
    return 0 if good else 1


def release_lines(doc: dict) -> list[str]:
    """One line per release: configs within the bound, the worst error, and (for a build) how many configs are
    the machine code this machine's Triton compiles."""
    lines = []
    for release in dict.fromkeys(r["release"] for r in doc["checks"]):
        mine = [r for r in doc["checks"] if r["release"] == release]
        ok = sum(r["ran"] and r["within_bound"] for r in mine)
        worst = max((r["rel_err_vs_reference"] or 0 for r in mine if r["ran"]), default=float("nan"))
        same = ("" if release not in doc["builds"] else
                f", {sum(bool(r.get('same_machine_code_as_this_machines_jit')) for r in mine)} the machine code "
                "this machine's JIT compiles")
        lines.append(f"{release:34s} {ok:2d}/{len(mine)} within bound, worst rel err {worst:.2e}{same}")
    return lines


def _launch_mismatch(rec: dict, base, params) -> str | None:
    """Why this machine's launcher cannot pass a release's kernel its arguments, or None when it can."""
    if rec.get("params") != params:
        return f"parameter list differs: {rec.get('params')} vs {params}"
    meta = base.metadata._asdict()
    for m in ("num_warps", "num_ctas", "global_scratch_size", "profile_scratch_size"):
        if rec["launch"].get(m) != meta.get(m):
            return f"{m} differs: {rec['launch'].get(m)} vs {meta.get(m)}"
    return None


def _with_release(base, rec: dict, cubin: bytes):
    """This machine's compiled kernel with a release's cubin and that release's shared memory (the launcher
    reads it from the packed metadata)."""
    from triton.compiler.compiler import make_backend

    from ptxprobe.api import with_cubin

    k = with_cubin(base, rec["entry"], cubin)
    k.metadata = k.metadata._replace(shared=rec["launch"]["shared"])
    k.packed_metadata = make_backend(k.metadata.target).pack_metadata(k.metadata)
    return k


def _plant(fam, problem, launchers, own_build, src: Path, n_sms: int) -> dict:
    """The causal fp16 D64 cubin launched on the full (non-causal) problem must fall outside the bound."""
    if own_build is None:
        return {"caught": None, "why": "this machine's Triton release was not built"}
    rec = next(r for r in own_build["configs"] if r["config"] == config_key("fp16", 64, True))
    spec, base, _, _ = launchers[config_key("fp16", 64, False)]
    cubin = (src / own_build["triton"] / f"{rec['config']}.cubin").read_bytes()
    res = _run(fam, spec, problem, _with_release(base, rec, cubin), n_sms)
    return {**res, "caught": not _within_bound(res, "fp16")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("build", "check"))
    ap.add_argument("dir", type=Path, help="where each release's build goes (build) or is read from (check)")
    ap.add_argument("--out", type=Path, help="check: where releases.json goes")
    a = ap.parse_args(argv)
    if a.mode == "build":
        build(a.dir)
        return 0
    return check(a.dir, a.out or a.dir)


if __name__ == "__main__":
    sys.exit(main())
