"""A CuTe DSL kernel on a GPU with and without the trigger in its name, without the DSL on the GPU machine.

    python experiments/external/cute_aot.py prepare --out aot --ptxas 12.8.93 [--case hopper_gemm_fp16 ...]
    python experiments/external/cute_aot.py run --dir aot --out result.json            (on the GPU machine)

prepare (CPU, the CuTe DSL installed): compiles each case of cute_dsl_compile.py for sm_90a, keeps its
PTX, and exports the compiled host function three times (``export_to_c``: a header and an object file
each) - one copy per name: the kernel's own name with ``cutlass`` spelled ``xutlass`` (the baseline),
the name as the DSL gave it (``cutlass``: the trigger) and ``zutlass`` (the control). The PTX is renamed
by ptxprobe and assembled by one ptxas for all three, so the cubins differ by the name alone. A C++ shim
is generated from each header's wrapper signature; the link wraps the DSL runtime's
``_cudaLibraryLoadData``/``_cudaLibraryGetKernel`` so each object loads its own cubin and looks its
kernel up under its own name (each object keeps its kernel handle in its own statics).

run (GPU): builds the shim with nvcc into one shared library, loads every copy, checks that the three
names give bitwise-identical outputs and that the output matches a float64 reference on sampled
entries, then times them through ``ptxprobe.api.compare`` (``design="rounds"``, a fixed number of rounds):
every round the three in a fresh random order, each sample a CUDA graph of launches lasting >= 10 ms;
paired log ratios per round against the baseline, Hodges-Lehmann with its signed-rank interval (the stored
run of 2026-12-03 used BCa), the ±0.5 % TOST decision.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROLES = (("baseline", "{base_untriggered}"), ("trigger", "{base}"), ("control", "{base_control}"))
CASES = ("ampere_fa2_fp16_full", "hopper_fmha_fp16_full", "hopper_gemm_fp16")
WRAPPER = re.compile(r"static inline int32_t (cute_dsl_\w+_wrapper)\(([^)]*)\)")


def prepare(out: Path, cases: list[str], ptxas: str, external: Path) -> dict:
    """Compile, export three copies, rename and assemble; write the shim and manifest.json."""
    dump = out / "dump"  # the DSL reads its knobs when it is imported, and writes only into a directory that exists
    dump.mkdir(parents=True, exist_ok=True)
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump))
    sys.path.insert(0, str(HERE))
    import cutlass.cute as cute
    from cute_dsl_compile import CASES as BUILDERS
    from cutlass.runtime import make_fake_stream

    from ptxprobe.core.cache import Cache, sha256_text
    from ptxprobe.ptx.rename import apply_template, rename_entry
    from ptxprobe.ptx.text import entries_of
    from ptxprobe.toolchain.assemble import assemble
    from ptxprobe.toolchain.tools import select_ptxas

    tool = select_ptxas("sm_90a", ptxas)[0]
    builders = {name: (fn, param) for name, fn, param in BUILDERS["hopper"]}
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"ptxas": {"version": tool.version, "sha256": tool.sha256}, "arch": "sm_90a", "cases": {},
                "sources": json.loads((external / "sources.json").read_text())}
    for case in cases:
        before = set(dump.glob("*.ptx")) if dump.exists() else set()
        fn, param = builders[case]
        obj, args, shape = fn(external, param)
        compiled = cute.compile(obj, *args, make_fake_stream())
        new = sorted(set(dump.glob("*.ptx")) - before)
        if len(new) != 1:
            raise SystemExit(f"{case}: expected one new PTX from the DSL, found {len(new)}")
        ptx = new[0].read_text()
        entry = entries_of(ptx)[0]
        variants = {}
        for role, template in ROLES:
            prefix = f"{case}__{role}"
            compiled.export_to_c(str(out), prefix, function_prefix=prefix)
            name = apply_template(template, entry)
            text = ptx if name == entry else rename_entry(ptx, entry, name).ptx
            art = assemble(text, "sm_90a", tool, cache=Cache())
            if not art.ok:
                raise SystemExit(f"ptxas {tool.version} failed on {case} as {role}: {art.stderr[-400:]}")
            cubin = out / f"{prefix}.cubin"
            cubin.write_bytes(art.cubin())
            variants[role] = {"prefix": prefix, "name": name, "cubin": cubin.name, "ptx_sha256": sha256_text(text),
                              "registers": _regs(art)}
        manifest["cases"][case] = {"entry": entry, "shape": shape, "variants": variants,
                                   "ptx_sha256": sha256_text(ptx)}
    (out / "shim.cpp").write_text(shim(out, manifest))
    runtime = next(Path(sys.modules["cutlass"].__file__).resolve().parents[2].glob("cu*/lib/"
                                                                                    "libcuda_dialect_runtime_static.a"))
    (out / runtime.name).write_bytes(runtime.read_bytes())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _regs(art) -> int | None:
    reps = list(getattr(art, "reports", {}).values()) if isinstance(getattr(art, "reports", None), dict) else []
    return reps[0].registers if reps and hasattr(reps[0], "registers") else None


def shim(out: Path, manifest: dict) -> str:
    """C++ glue: per copy, load() and run(tensor pointers, scalars, stream); the two runtime wraps."""
    lines = ["#include <cuda_runtime.h>", "#include <cstring>", "#include <string>"]
    body = []
    for case in manifest["cases"].values():
        for v in case["variants"].values():
            p = v["prefix"]
            lines.append(f'#include "{p}.h"')
            sig = WRAPPER.search((out / f"{p}.h").read_text())
            params = [x.strip() for x in sig.group(2).split(",")]
            call, n_t, n_s = [f"&m_{p}"], 0, 0
            decls = []
            for prm in params[1:]:
                ty, name = prm.replace("*", " * ").rsplit(" ", 1)
                ty = ty.strip()
                if ty.endswith("*"):  # a tensor: a struct holding its data pointer
                    decls.append(f"    {ty.rstrip(' *')} t_{name}{{ptrs[{n_t}]}};")
                    call.append(f"&t_{name}")
                    n_t += 1
                elif ty == "cudaStream_t":
                    call.append("(cudaStream_t)stream")
                else:
                    call.append(f"({ty})scalars[{n_s}]")
                    n_s += 1
            body += [f"static {p}_Kernel_Module_t m_{p};",
                     f'extern "C" int load_{p}() {{ {p}_Kernel_Module_Load(&m_{p}); return (int)cudaGetLastError(); }}',
                     f'extern "C" int run_{p}(void** ptrs, double* scalars, void* stream) {{',
                     *decls, f"    return {sig.group(1)}({', '.join(call)});", "}"]
    lines += ["", "static const void* g_cubin = nullptr;", "static std::string g_old, g_new;",
              'extern "C" void ptxprobe_select(const void* cubin, const char* old_name, const char* new_name) {',
              "    g_cubin = cubin; g_old = old_name ? old_name : \"\"; g_new = new_name ? new_name : \"\"; }",
              'extern "C" cudaError_t __real__cudaLibraryLoadData(cudaLibrary_t*, const void*, cudaJitOption*, '
              'void**, unsigned int, cudaLibraryOption*, void**, unsigned int);',
              'extern "C" cudaError_t __wrap__cudaLibraryLoadData(cudaLibrary_t* lib, const void* code, '
              'cudaJitOption* o, void** ov, unsigned int no, cudaLibraryOption* lo, void** lov, unsigned int nlo) {',
              "    return __real__cudaLibraryLoadData(lib, g_cubin ? g_cubin : code, o, ov, no, lo, lov, nlo); }",
              'extern "C" cudaError_t __real__cudaLibraryGetKernel(cudaKernel_t*, cudaLibrary_t, const char*);',
              'extern "C" cudaError_t __wrap__cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t lib, '
              'const char* name) {',
              "    const char* n = (!g_old.empty() && g_old == name) ? g_new.c_str() : name;",
              "    return __real__cudaLibraryGetKernel(k, lib, n); }", "", *body, ""]
    return "\n".join(lines)


def build(d: Path) -> Path:
    lib = d / "libcuteab.so"
    objs = sorted(str(p) for p in d.glob("*__*.o"))
    # libcuda is not linked: run() loads the driver's with RTLD_GLOBAL first (no stub library needed here)
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-O2", "-o", str(lib), str(d / "shim.cpp"), *objs,
           str(d / "libcuda_dialect_runtime_static.a"), "-Xlinker", "--wrap=_cudaLibraryLoadData",
           "-Xlinker", "--wrap=_cudaLibraryGetKernel", "-I", str(d)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return lib


def _inputs(case: str, shape: dict, torch, gen):
    if case.startswith("hopper_gemm"):
        m, n, k = shape["m"], shape["n"], shape["k"]
        a = torch.randn(m, k, device="cuda", generator=gen).half()
        b = torch.randn(n, k, device="cuda", generator=gen).half()
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.half)
        return [a, b, c], [], 2
    b_, s, h, d = shape["b"], shape["s"], shape["h"], shape["d"]
    q, k, v = (torch.randn(b_, s, h, d, device="cuda", generator=gen).half() for _ in range(3))
    o = torch.full((b_, s, h, d), float("nan"), device="cuda", dtype=torch.half)
    scale = d**-0.5
    if case.startswith("ampere_fa2"):
        return [q, k, v, o], [scale], 3
    lse = torch.empty(b_, s, h, device="cuda", dtype=torch.float32)
    return [q, k, v, o, lse], [scale * 1.4426950408889634, scale, 1.0], 3


def _reference_error(case: str, t: list, out, torch, gen) -> float:
    """Relative error against float64 on sampled outputs (64 GEMM entries; 8 attention rows of one head)."""
    if case.startswith("hopper_gemm"):
        a, b = t[0].double(), t[1].double()
        i = torch.randint(0, a.shape[0], (64,), device="cuda", generator=gen)
        j = torch.randint(0, b.shape[0], (64,), device="cuda", generator=gen)
        ref = (a[i] * b[j]).sum(1)
        got = out[i, j].double()
    else:
        q, k, v = (x[0, :, 0].double() for x in t[:3])
        rows = torch.randint(0, q.shape[0], (8,), device="cuda", generator=gen)
        p = torch.softmax(q[rows] @ k.T * q.shape[-1] ** -0.5, dim=-1)
        ref, got = p @ v, out[0, rows, 0].double()
    return float((got - ref).norm() / ref.norm())


def run(d: Path, out: Path, rounds: int, seed: int) -> dict:
    import ctypes

    import numpy as np
    import torch

    from ptxprobe.api import compare

    manifest = json.loads((d / "manifest.json").read_text())
    torch.cuda.init()
    ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)  # the driver API the DSL's host code calls
    lib = ctypes.CDLL(str(build(d)))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    result = {"manifest": manifest, "gpu": torch.cuda.get_device_name(), "cases": {}}
    for case, spec in manifest["cases"].items():
        keep = []
        for v in spec["variants"].values():
            data = (d / v["cubin"]).read_bytes()
            keep.append(ctypes.create_string_buffer(data, len(data)))
            lib.ptxprobe_select(keep[-1], spec["entry"].encode(), v["name"].encode())
            rc = getattr(lib, f"load_{v['prefix']}")()
            if rc:
                raise SystemExit(f"{case} {v['prefix']}: load failed with CUDA error {rc}")
        lib.ptxprobe_select(None, None, None)
        tensors, scalars, out_index = _inputs(case, spec["shape"], torch, gen)
        ptrs = (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])
        sc = (ctypes.c_double * max(1, len(scalars)))(*scalars)
        # the stream at call time: inside a graph capture torch runs on its capture stream
        calls = {role: (lambda f=getattr(lib, f"run_{v['prefix']}"), p=ptrs, s=sc:
                        f(p, s, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
                 for role, v in spec["variants"].items()}
        outs, errors = {}, {}
        out_t = tensors[out_index]
        for role, call in calls.items():
            out_t.fill_(float("nan"))
            rc = call()
            torch.cuda.synchronize()
            if rc:
                raise SystemExit(f"{case} {role}: launch returned {rc}")
            outs[role] = out_t.clone()
            errors[role] = _reference_error(case, tensors, out_t, torch, gen)
        bitwise = {role: bool(torch.equal(outs[role], outs["baseline"])) for role in outs}
        # every round the three in a fresh random order, one sample each (the design the stored results used)
        block = compare(calls, baseline="baseline", rounds=rounds, design="rounds", min_sample_ms=10.0, seed=seed,
                        warmup_s=0.5)
        times = {role: list(t.times_ms) for role, t in block.timings.items()}
        k = block.timings["baseline"].launches_per_sample
        comps = {}
        for role in ("trigger", "control"):
            c = block.comparison(role)
            comps[role] = {"ratio": c.ratio, "low": c.low, "high": c.high, "verdict": c.verdict, "p_value": c.p_value}
        result["cases"][case] = {"launches_per_sample": k, "times_ms": times, "rel_error": errors,
                                 "bitwise_equal_to_baseline": bitwise, "comparisons": comps,
                                 "median_ms": {r: float(np.median(t)) for r, t in times.items()}}
        print(f"{case}: median ms " + ", ".join(f"{r} {np.median(t):.4f}" for r, t in times.items())
              + " | " + ", ".join(f"{r} {c['ratio']:.4f} [{c['low']:.4f}, {c['high']:.4f}] {c['verdict']}"
                                  for r, c in comps.items())
              + f" | bitwise {bitwise} | rel err {max(errors.values()):.2e}", flush=True)
    out.write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", default="aot")
    p.add_argument("--case", action="append", default=[])
    p.add_argument("--ptxas", default="12.8.93")
    p.add_argument("--external", default="external")
    r = sub.add_parser("run")
    r.add_argument("--dir", default="aot")
    r.add_argument("--out", default="cute_aot.json")
    r.add_argument("--rounds", type=int, default=30)
    r.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        m = prepare(Path(a.out), a.case or list(CASES), a.ptxas, Path(a.external).resolve())
        for case, c in m["cases"].items():
            print(case, {r: v["name"][:40] for r, v in c["variants"].items()})
        return 0
    run(Path(a.dir), Path(a.out), a.rounds, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
