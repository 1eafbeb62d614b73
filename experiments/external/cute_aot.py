"""A CuTe DSL kernel on a GPU with and without the trigger in its name, without the DSL on the GPU machine.

    python experiments/external/cute_aot.py prepare --out aot --ptxas 12.8.93 [--case hopper_gemm_fp16 ...]
    python experiments/external/cute_aot.py prepare --out aot-fa4 --ptxas 12.9.86 --case fa4_hopper_fwd_fp16_causal
    python experiments/external/cute_aot.py run --dir aot --out result.json            (on the GPU machine)

prepare (CPU, the CuTe DSL installed): compiles each case of cute_dsl_compile.py for sm_90a, keeps its
PTX, and exports the compiled host function three times (``export_to_c``: a header and an object file
each) - one copy per name: the kernel's own name with ``cutlass`` spelled ``xutlass`` (the baseline),
the name as the DSL gave it (``cutlass``: the trigger) and ``zutlass`` (the control). The PTX is renamed
by ptxprobe and assembled by one ptxas for all three, so the cubins differ by the name alone. A C++ shim
is generated from each header's wrapper signature; the link wraps the DSL runtime's
``_cudaLibraryLoadData``/``_cudaLibraryGetKernel`` so each object loads its own cubin and looks its
kernel up under its own name (each object keeps its kernel handle in its own statics).

FlashAttention-4's Hopper forward (cases ``fa4_hopper_fwd_*`` of cute_dsl_compile.py) needs ``flash-attn-4``
installed for prepare only (its version goes into the manifest); its PTX is ``.version 8.8``: a ptxas of CUDA
12.9 or later takes it as it is. Its tensors have dynamic shapes and strides: the shim fills them from what
run passes (``meta``), q, k, v, out as torch's contiguous (b, s, h, d).

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
TENSOR_T = re.compile(r"typedef struct \{([^}]*)\} (\w+);")
DYNAMIC = re.compile(r"(?:int32_t|int64_t) (dynamic_shapes|dynamic_strides)\[(\d+)\];")
PACKAGES = ("nvidia-cutlass-dsl", "flash-attn-4", "quack-kernels", "apache-tvm-ffi", "torch")


def prepare(out: Path, cases: list[str], ptxas: str, external: Path) -> dict:
    """Compile, export three copies, rename and assemble; write the shim and manifest.json."""
    dump = out / "dump"  # the DSL reads its knobs when it is imported, and writes only into a directory that exists
    dump.mkdir(parents=True, exist_ok=True)
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx", CUTE_DSL_DUMP_DIR=str(dump))
    sys.path.insert(0, str(HERE))
    import cutlass.cute as cute
    from cute_dsl_compile import CASES as BUILDERS
    from cutlass.runtime import make_fake_stream

    from ptxprobe.api import (
        Cache,
        apply_template,
        assemble,
        entries_of,
        read_cubin,
        rename_entry,
        select_ptxas,
        sha256_text,
    )

    tool = select_ptxas("sm_90a", ptxas)[0]
    builders = {name: (fn, param) for family in ("hopper", "fa4") for name, fn, param in BUILDERS[family]}
    unknown = [c for c in cases if c not in builders]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; sm_90a cases: {sorted(builders)}")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"ptxas": {"version": tool.version, "sha256": tool.sha256}, "arch": "sm_90a", "cases": {},
                "sources": json.loads((external / "sources.json").read_text()), "packages": _versions()}
    for case in cases:
        before = {f: f.stat().st_mtime_ns for f in dump.glob("*.ptx")}  # a re-run rewrites a PTX of the same name
        fn, param = builders[case]
        obj, args, shape = fn(external, param)
        compiled = cute.compile(obj, *args, make_fake_stream())
        new = sorted(f for f in dump.glob("*.ptx") if before.get(f) != f.stat().st_mtime_ns)
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
            facts = read_cubin(art.cubin()).kernel(name)  # ptxprobe's one "same machine code"
            variants[role] = {"prefix": prefix, "name": name, "cubin": cubin.name, "ptx_sha256": sha256_text(text),
                              "registers": _regs(art), "machine_code_sha256": facts.machine_code_sha256,
                              "n_instructions": facts.n_instructions}
        manifest["cases"][case] = {"entry": entry, "shape": shape, "variants": variants,
                                   "ptx_sha256": sha256_text(ptx), "ptx_version": _ptx_directive(ptx, "version"),
                                   "ptx_target": _ptx_directive(ptx, "target"),
                                   "tensor_meta": _tensor_meta(out / f"{case}__baseline.h")}
    (out / "shim.cpp").write_text(shim(out, manifest))
    runtime = next(Path(sys.modules["cutlass"].__file__).resolve().parents[2].glob("cu*/lib/"
                                                                                    "libcuda_dialect_runtime_static.a"))
    (out / runtime.name).write_bytes(runtime.read_bytes())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _ptx_directive(ptx: str, name: str) -> str | None:
    m = re.search(rf"^\.{name}\s+(\S+)", ptx, re.M)
    return m.group(1) if m else None


def _tensor_meta(header: Path) -> list[list[int]]:
    """Per tensor argument of the wrapper, in order: [dynamic shapes, dynamic strides] its struct holds."""
    text = header.read_text()
    structs = {name: body for body, name in TENSOR_T.findall(text)}
    sig = WRAPPER.search(text)
    meta = []
    for prm in [x.strip() for x in sig.group(2).split(",")][1:]:
        ty = prm.replace("*", " * ").rsplit(" ", 1)[0].strip()
        if ty.endswith("*"):
            fields = dict(DYNAMIC.findall(structs.get(ty.rstrip(" *"), "")))
            meta.append([int(fields.get("dynamic_shapes", 0)), int(fields.get("dynamic_strides", 0))])
    return meta


def _regs(art) -> int | None:
    reps = list(getattr(art, "reports", {}).values()) if isinstance(getattr(art, "reports", None), dict) else []
    return reps[0].registers if reps and hasattr(reps[0], "registers") else None


def shim(out: Path, manifest: dict) -> str:
    """C++ glue: per copy, load() and run(tensor pointers, scalars, meta, stream); the two runtime wraps.

    ``meta`` holds, tensor after tensor, the dynamic shapes then the dynamic strides (in elements) that the
    tensor's struct in the header has (none for a static layout); run() sends them, _tensor_meta counts them.
    """
    lines = ["#include <cuda_runtime.h>", "#include <cstring>", "#include <string>"]
    body = []
    for case in manifest["cases"].values():
        for v in case["variants"].values():
            p = v["prefix"]
            lines.append(f'#include "{p}.h"')
            header = (out / f"{p}.h").read_text()
            sig = WRAPPER.search(header)
            structs = {name: body for body, name in TENSOR_T.findall(header)}
            params = [x.strip() for x in sig.group(2).split(",")]
            call, n_t, n_s, n_m = [f"&m_{p}"], 0, 0, 0
            decls = []
            for prm in params[1:]:
                ty, name = prm.replace("*", " * ").rsplit(" ", 1)
                ty = ty.strip()
                if ty.endswith("*"):  # a tensor: a struct holding its data pointer (and a dynamic layout's numbers)
                    decls.append(f"    {ty.rstrip(' *')} t_{name}{{ptrs[{n_t}]}};")
                    for field, count in DYNAMIC.findall(structs.get(ty.rstrip(" *"), "")):
                        cast = "int32_t" if field == "dynamic_shapes" else "int64_t"
                        decls += [f"    t_{name}.{field}[{i}] = ({cast})meta[{n_m + i}];" for i in range(int(count))]
                        n_m += int(count)
                    call.append(f"&t_{name}")
                    n_t += 1
                elif ty == "cudaStream_t":
                    call.append("(cudaStream_t)stream")
                else:
                    call.append(f"({ty})scalars[{n_s}]")
                    n_s += 1
            body += [f"static {p}_Kernel_Module_t m_{p};",
                     f'extern "C" int load_{p}() {{ {p}_Kernel_Module_Load(&m_{p}); return (int)cudaGetLastError(); }}',
                     f'extern "C" int run_{p}(void** ptrs, double* scalars, long long* meta, void* stream) {{',
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
    """(tensors, scalars, index of the output) in the order of the exported function's arguments."""
    if case.startswith("fa4_"):  # FA4: (q, k, v, out, softmax_scale); no LSE (FA4's inference call)
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[shape["dtype"]]
        dims = (shape["b"], shape["s"], shape["h"], shape["d"])
        q, k, v = (torch.randn(*dims, device="cuda", generator=gen).to(dt) for _ in range(3))
        o = torch.full(dims, float("nan"), device="cuda", dtype=dt)
        return [q, k, v, o], [shape["softmax_scale"]], 3
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


def _meta(tensors: list, counts: list) -> list[int]:
    """The dynamic shapes and strides (elements) of each tensor, as the shim's structs take them."""
    meta = []
    if len(counts) != len(tensors):
        raise SystemExit(f"{len(tensors)} tensors for {len(counts)} tensor arguments")
    for t, (n_shape, n_stride) in zip(tensors, counts, strict=True):
        if n_shape:
            if n_shape != t.dim():
                raise SystemExit(f"a tensor of rank {t.dim()} with {n_shape} dynamic shapes: not handled")
            meta += list(t.shape)
        if n_stride:  # every stride but the unit one of the last mode (FA4's leading_dim), in mode order
            if n_stride != t.dim() - 1 or t.stride(-1) != 1:
                raise SystemExit(f"a tensor of strides {t.stride()} with {n_stride} dynamic strides: not handled")
            meta += list(t.stride()[:-1])
    return meta


def _flops(case: str, shape: dict) -> float:
    """Useful FLOPs of one call: 2mnk for a GEMM, 4 b h s^2 d for attention (half of it causal)."""
    if "m" in shape:
        return 2.0 * shape["m"] * shape["n"] * shape["k"]
    return 4.0 * shape["b"] * shape["h"] * shape["s"] ** 2 * shape["d"] / (2 if shape.get("causal") else 1)


def _reference_error(case: str, shape: dict, t: list, out, torch, gen) -> float:
    """Relative error against float64 on sampled outputs (64 GEMM entries; 8 attention rows of one head)."""
    if case.startswith("fa4_"):  # a random batch and head; the causal mask of FA4 (query i sees keys <= i)
        bi = int(torch.randint(0, shape["b"], (1,), generator=gen, device="cuda"))
        hi = int(torch.randint(0, shape["h"], (1,), generator=gen, device="cuda"))
        q, k, v = (x[bi, :, hi].double() for x in t[:3])
        rows = torch.randint(0, q.shape[0], (8,), device="cuda", generator=gen)
        scores = q[rows] @ k.T * shape["softmax_scale"]
        if shape["causal"]:
            keys = torch.arange(k.shape[0], device=scores.device)
            scores = scores.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
        ref, got = torch.softmax(scores, dim=-1) @ v, out[bi, rows, hi].double()
        return float((got - ref).norm() / ref.norm())
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
        meta = _meta(tensors, spec.get("tensor_meta", [[0, 0]] * len(tensors)))
        mt = (ctypes.c_longlong * max(1, len(meta)))(*meta)
        # the stream at call time: inside a graph capture torch runs on its capture stream
        calls = {role: (lambda f=getattr(lib, f"run_{v['prefix']}"), p=ptrs, s=sc, m=mt:
                        f(p, s, m, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))
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
            errors[role] = _reference_error(case, spec["shape"], tensors, out_t, torch, gen)
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
        flops = _flops(case, spec["shape"])
        result["cases"][case] = {"launches_per_sample": k, "times_ms": times, "rel_error": errors,
                                 "bitwise_equal_to_baseline": bitwise, "comparisons": comps, "flops": flops,
                                 "median_ms": {r: float(np.median(t)) for r, t in times.items()},
                                 "tflops": {r: flops / float(np.median(t)) / 1e9 for r, t in times.items()}}
        print(f"{case}: median ms " + ", ".join(f"{r} {np.median(t):.4f}" for r, t in times.items())
              + f" ({flops / float(np.median(times['baseline'])) / 1e9:.0f} TFLOPS baseline)"
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
