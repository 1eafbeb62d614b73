"""GPU smoke check of the CUDA C++ attention: every (dtype, D, causal) once, vs float64.

python experiments/benchmarks/cuda_smoke.py     (on a GPU machine; prints one line per variant)
"""

from __future__ import annotations

import torch

from ptxprobe.api import Cache, CudaKernel, Problem, RegisteredSource, cubin_for, device_arch, family, triton_ptxas

if __name__ == "__main__":
    fam = family("attention_cuda")
    arch = device_arch()
    for dt in fam.dtypes:
        for d in fam.head_dims:
            for causal in (False, True):
                spec = fam.spec(dt, d, causal)
                p = Problem(batch=1, heads=4, seq_len=512)
                e = RegisteredSource(fam.name, dt, d, causal, "default", p.seq_len).emit(arch, Cache())
                cubin, facts = cubin_for(e, fam.extra["entry"](spec), triton_ptxas(arch), Cache())
                k = CudaKernel(cubin, fam.extra["entry"](spec), fam.extra["shared_bytes"](spec), fam.extra["threads"])
                inp = fam.make_inputs(spec, p, device="cuda")
                k[fam.grid(spec, p, 132)](*fam.launch_args(spec, p, inp))
                torch.cuda.synchronize()
                ref = fam.reference(spec, inp)
                out = inp["out"].double()
                rel = float((out - ref).norm() / ref.norm())
                nan = int(torch.isnan(out).sum())
                print(f"{spec.key:40s} regs={facts['registers']:4d} nan={nan:6d} rel_err={rel:.2e}", flush=True)
