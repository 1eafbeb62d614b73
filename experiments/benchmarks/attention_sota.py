"""The Hopper attention kernels against torch SDPA (cuDNN, flash) on one GPU: correctness, then throughput.

    python experiments/benchmarks/attention_sota.py --out DIR [--quick] [--only TEXT ...]

Every kernel is launched as a user would launch it (Triton's JIT; the family's own inputs, launch
arguments and float64 reference from ``ptxprobe.sources.registry``). Each dtype group runs in a child
process with a time limit, so a kernel that hangs costs that group, not the run.

* check: float64 reference at small problems, several grids (persistent, a deliberately short
  persistent grid that makes every program loop over many tiles, the classic one-program-per-tile
  grid); output poisoned with NaN first, so an unwritten element fails.
* bench: batch x N = 16k, 32 heads, N 1k..16k (the shape of the reference numbers in
  ``../shared/README.md``); one round per repetition times every label once in a random order,
  each sample a CUDA-graph replay of k launches lasting >= 10 ms (``ptxprobe.api.time_callables``);
  the median per label is kept with every raw sample. TFLOPS = 4 B H N^2 D (halved for causal) / time.

Writes ``DIR/sota.json`` (environment, every check and sample) and prints a short table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

DTYPES = ("fp16", "bf16", "fp8e4nv")
HEAD_DIMS = (128, 64)
SEQ_LENS = (1024, 2048, 4096, 16384)
TOKENS = 16384
HEADS = 32
TOLERANCE = {"fp16": 5e-3, "bf16": 2e-2, "fp8e4nv": 8e-2, "fp8e5": 1.5e-1}  # ||out - ref|| / ||ref||


def variants(dtype: str, head_dim: int, causal: bool = False) -> list[dict]:
    """The Gluon Hopper kernel's variants worth timing: block config x schedule knobs (see its KNOBS)."""
    if dtype.startswith("fp8"):
        knob_sets = [("m128n128w4s2", {"p_smem": True, "overlap": True}),
                     ("m128n128w4s2", {"p_smem": True, "overlap": True, "pingpong": True}),
                     ("m128n128w4s2", {"p_smem": False, "overlap": False}),
                     ("m128n256w4s2", {"p_smem": True, "overlap": True}),
                     ("m128n256w4s2", {"p_smem": True, "overlap": True, "pingpong": True})]
    else:
        knob_sets = [("m128n128w4s2", {"overlap": True}),
                     ("m128n128w4s2", {"overlap": True, "pingpong": True}),
                     ("m128n128w4s2", {"overlap": False, "pingpong": True})]
    if head_dim == 64 or causal:  # the wide tile spills at D64; causal with BLOCK_N > BLOCK_M is not checked
        knob_sets = [k for k in knob_sets if k[0] != "m128n256w4s2"]
    return [{"family": "attention_gluon_hopper", "config": c, "knobs": k} for c, k in knob_sets]


def variant_label(v: dict) -> str:
    on = [k for k, val in sorted(v["knobs"].items()) if val]
    return f"gluon_hopper/{v['config']}/{'+'.join(on) or 'plain'}"


def _problem(seq_len: int, small: bool = False):
    from ptxprobe.api import Problem

    if small:  # batch x heads a multiple of 16, as in the timed problems: one specialisation, compiled once
        return Problem(batch=2, heads=8, seq_len=seq_len)
    return Problem(batch=max(1, TOKENS // seq_len), heads=HEADS, seq_len=seq_len)


def _launcher(family: str, spec, problem, inputs, grid_mode: str, knobs: dict | None, sms: int):
    """A zero-argument launch of the family's kernel on ``inputs`` (grid: persistent, short, classic)."""
    from ptxprobe.api import family as get_family

    fam = get_family(family)
    args = fam.launch_args(spec, problem, inputs, **knobs) if knobs else fam.launch_args(spec, problem, inputs)
    opts = fam.compile_options(spec)
    if family.startswith("attention_gluon_hopper") or family == "attention_persistent":
        tiles = (problem.seq_len // spec.config.block_m) * problem.batch * problem.heads
        grid = {"persistent": (min(sms, tiles),), "short": (min(5, tiles),), "classic": (tiles,)}[grid_mode]
    else:
        grid = fam.grid(spec, problem, sms)
    kernel = fam.fn[grid]
    return lambda: kernel(*args, **opts)


def _sdpa(backend: str, inputs: dict, causal: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    q, k, v = inputs["q"], inputs["k"], inputs["v_logical"]

    def run():
        with sdpa_kernel([be]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def rel_error(out, ref) -> float:
    import torch

    o = out.to(torch.float64)
    if not torch.isfinite(o).all():
        return float("inf")
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


def check_group(dtype: str, quick: bool) -> list[dict]:
    """Correctness of every variant of one dtype against float64, at small problems and several grids."""
    import torch

    from ptxprobe.api import family

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            for v in variants(dtype, head_dim, causal)[: 2 if quick else None]:
                fam = family(v["family"])
                spec = fam.spec(dtype, head_dim, causal, v["config"])
                for seq_len in (512, 1024):
                    problem = _problem(seq_len, small=True)
                    gen = torch.Generator(device="cuda").manual_seed(seq_len + head_dim)
                    inputs = fam.make_inputs(spec, problem, device="cuda", generator=gen)
                    ref = fam.reference(spec, inputs)
                    for grid in ("persistent", "short", "classic"):
                        inputs["out"].fill_(float("nan"))
                        t0 = time.time()
                        row = {"dtype": dtype, "head_dim": head_dim, "causal": causal, "seq_len": seq_len,
                               "grid": grid, "label": variant_label(v), **v}
                        try:
                            _launcher(v["family"], spec, problem, inputs, grid, v["knobs"], sms)()
                            torch.cuda.synchronize()
                            err = rel_error(inputs["out"], ref)
                            row.update(rel_error=err, ok=err <= TOLERANCE[dtype])
                        except Exception as exc:  # a compile or launch failure is a result, not a crash
                            row.update(rel_error=None, ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                        row["seconds"] = round(time.time() - t0, 3)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    return rows


def bench_group(dtype: str, quick: bool, only: list[str], rounds: int, seq_lens=SEQ_LENS) -> list[dict]:
    """Throughput of every variant and of the baselines, per (head dim, causal, N), rounds in random order."""
    import torch

    from ptxprobe.api import family

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rng = random.Random(0)
    rows = []
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            for seq_len in seq_lens if head_dim == 128 and not quick else seq_lens[::3]:
                problem = _problem(seq_len)
                labels: dict = {}
                gen = torch.Generator(device="cuda").manual_seed(seq_len)
                base_spec = family("attention").spec(dtype, head_dim, causal, "m128n64w8s3")
                inputs = family("attention").make_inputs(base_spec, problem, device="cuda", generator=gen)
                for v in variants(dtype, head_dim, causal)[: 2 if quick else None]:
                    spec = family(v["family"]).spec(dtype, head_dim, causal, v["config"])
                    for grid in ("persistent", "classic"):
                        labels[f"{variant_label(v)}/{grid}"] = _launcher(v["family"], spec, problem, inputs, grid,
                                                                         v["knobs"], sms)
                for fam_name in ("attention", "attention_persistent"):
                    spec = family(fam_name).spec(dtype, head_dim, causal, "m128n64w8s3")
                    labels[f"triton/{fam_name}"] = _launcher(fam_name, spec, problem, inputs, "persistent", None,
                                                             sms)
                if dtype in ("fp16", "bf16"):
                    for be in ("cudnn", "flash"):
                        labels[f"sdpa_{be}"] = _sdpa(be, inputs, causal)
                if only:
                    labels = {k: f for k, f in labels.items() if any(o in k for o in only) or k.startswith("sdpa")}
                flops = 4.0 * problem.batch * problem.heads * seq_len * seq_len * head_dim / (2 if causal else 1)
                rows.extend(_time_labels(labels, rounds, rng, dict(dtype=dtype, head_dim=head_dim, causal=causal,
                                                                    seq_len=seq_len, batch=problem.batch,
                                                                    heads=problem.heads, flops=flops)))
                del inputs
                torch.cuda.empty_cache()
    return rows


def _time_labels(labels: dict, rounds: int, rng, common: dict) -> list[dict]:
    """Every label once per round in a random order (``ptxprobe.api.time_callables``); a label that fails to compile
    or launch is a result (its error), not a crash."""
    import torch

    from ptxprobe.api import time_callable, time_callables

    runnable, errors = {}, {}
    for name, fn in labels.items():
        try:
            fn()
            torch.cuda.synchronize()
            runnable[name] = fn
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    seed = rng.randrange(2**31)
    plan = {"rounds": rounds, "seed": seed, "warmup_s": 0.5 / max(1, len(runnable)), "card_warmup_s": 0.0}
    try:
        timings = time_callables(runnable, **plan) if runnable else {}
    except Exception:  # one label that cannot be captured in a graph: time the others alone, keep its error
        timings = {}
        for name, fn in runnable.items():
            try:
                timings[name] = time_callable(fn, label=name, **plan)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    out = []
    for name in labels:
        row = {**common, "label": name}
        if name in errors:
            row["error"] = errors[name]
        else:
            t = timings[name]
            row.update(ms=t.median_ms, tflops=common["flops"] / t.median_ms / 1e9, samples_ms=list(t.times_ms),
                       launches_per_sample=t.launches_per_sample)
        out.append(row)
        print(json.dumps(row), flush=True)  # with the raw samples: the parent keeps what the child prints
    return out


def environment() -> dict:
    import torch
    import triton

    props = torch.cuda.get_device_properties(0)
    env = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
           "triton": triton.__version__, "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        env["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return env


def worker(job: dict) -> None:
    """One dtype group in a child process: prints one JSON line per result."""
    global HEAD_DIMS
    HEAD_DIMS = tuple(job["head_dims"])
    if job["what"] == "check":
        check_group(job["dtype"], job["quick"])
    else:
        bench_group(job["dtype"], job["quick"], job["only"], job["rounds"], tuple(job["seq_lens"]))


def _run_child(job: dict, timeout: float) -> tuple[list[dict], str]:
    """Run one job in a child; its JSON lines are the results (kept even when it hangs and is killed)."""
    cmd = [sys.executable, __file__, "--worker", json.dumps(job)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, status = p.stdout, f"exit {p.returncode}"
        tail = p.stderr[-2000:] if p.returncode else ""
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        status, tail = f"killed after {timeout:.0f} s (hang?)", ""
    rows = []
    for line in out.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows, status + (f"\n{tail}" if tail else "")


def summary(checks: list[dict], bench: list[dict]) -> str:
    bad = [c for c in checks if not c.get("ok")]
    lines = [f"checks: {len(checks) - len(bad)} of {len(checks)} within tolerance"]
    for c in bad[:12]:
        lines.append(f"  FAIL {c['dtype']} d{c['head_dim']} causal={c['causal']} N={c['seq_len']} {c['label']} "
                     f"{c['grid']}: {c.get('error') or c.get('rel_error')}")
    groups: dict = {}
    for r in bench:
        groups.setdefault((r["dtype"], r["head_dim"], r["causal"], r["seq_len"]), []).append(r)
    lines.append("dtype   D   causal     N  best gluon (TFLOPS, label)                        cudnn  flash  triton")
    for (dt, d, c, n), rows in groups.items():
        ok = [r for r in rows if "tflops" in r]
        gl = max((r for r in ok if r["label"].startswith("gluon")), key=lambda r: r["tflops"], default=None)
        get = {r["label"]: r["tflops"] for r in ok}
        tri = max(get.get("triton/attention", 0), get.get("triton/attention_persistent", 0))
        lines.append(f"{dt:7} {d:3} {c!s:6} {n:6}  {gl['tflops'] if gl else 0:6.0f} {gl['label'] if gl else '-':42} "
                     f"{get.get('sdpa_cudnn', 0):6.0f} {get.get('sdpa_flash', 0):6.0f} {tri:6.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/attention-sota")
    ap.add_argument("--quick", action="store_true", help="fewer variants and sizes")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--head-dims", default="128,64")
    ap.add_argument("--seq-lens", default=",".join(map(str, SEQ_LENS)), help="timed N values (D128)")
    ap.add_argument("--only", action="append", default=[], help="time only labels containing TEXT (and SDPA)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per dtype group")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(json.loads(a.worker))
        return 0
    try:
        import torch
    except ImportError:
        print("attention_sota: needs torch with CUDA (pip install '.[gpu]')", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("attention_sota: no CUDA GPU here", file=sys.stderr)
        return 3
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"command": sys.argv, "environment": environment(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "tolerance": TOLERANCE, "checks": [], "bench": [], "status": {}}
    dtypes = a.dtypes.split(",")
    for what in ("check", "bench"):
        if (what == "check" and a.no_check) or (what == "bench" and a.no_bench):
            continue
        for dt in dtypes:
            job = {"what": what, "dtype": dt, "quick": a.quick, "only": a.only, "rounds": a.rounds,
                   "head_dims": [int(d) for d in a.head_dims.split(",")],
                   "seq_lens": [int(n) for n in a.seq_lens.split(",")]}
            rows, status = _run_child(job, a.timeout)
            record["checks" if what == "check" else "bench"].extend(rows)
            record["status"][f"{what}/{dt}"] = status
            print(f"{what} {dt}: {status.splitlines()[0]} ({len(rows)} rows)", file=sys.stderr, flush=True)
            (out / "sota.json").write_text(json.dumps(record, indent=1))
    print(summary(record["checks"], record["bench"]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
