"""Launchable kernels from ptxprobe's own cubins: through Triton's launcher, or the CUDA driver API.

The cubin launched is the exact one ptxprobe assembled for that name (emit -> rename ->
assemble, cached), swapped into a Triton ``CompiledKernel`` so Triton's own launcher
passes every implicit argument. Triton's normal compile of the same kernel (under the same
name, its cache isolated) is compared with it: ``aot_matches_launch`` says the static
analysis looked at the code that really runs.
"""

from __future__ import annotations

import copy
import json
import tempfile

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.core.cache import Cache, sha256_bytes
from ptxprobe.ptx.rename import renamed_ptx
from ptxprobe.sources import Emitted
from ptxprobe.sources.triton import Specialization, is_gluon, renamed_fn
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import Tool, triton_ptxas

_COMPILED: dict = {}


def triton_compiled(fn, sp: Specialization, options: dict, name: str | None = None):
    """Triton's own compile for the current GPU, under ``name``, with its cache isolated (memoised per process
    by everything that shapes it, the name included: Triton's own cache ignores ``repr=``)."""
    key = (fn.cache_key, json.dumps(sp.to_json(), sort_keys=True), str(sp.attrs), json.dumps(options, sort_keys=True),
           name)
    if key not in _COMPILED:
        _COMPILED[key] = _compile(fn, sp, options, name)
    return _COMPILED[key]


def _compile(fn, sp: Specialization, options: dict, name: str | None):
    import triton

    if is_gluon(fn):
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource  # noqa: N814
    else:
        from triton.compiler import ASTSource
    src = ASTSource(renamed_fn(fn, name) if name else fn, sp.signature, sp.constexprs, sp.attrs)
    with tempfile.TemporaryDirectory(prefix="ptxprobe-triton-cache-") as d:
        old = triton.knobs.cache.dir
        triton.knobs.cache.dir = d
        try:
            return triton.compile(src, options=options)
        finally:
            triton.knobs.cache.dir = old


def triton_loader(fn, sp: Specialization, options: dict, tool: Tool, arch: str):
    """(load, launched) for running ptxprobe's cubins through Triton's own launcher.

    ``load(name, cubin)`` swaps a cubin into Triton's compiled kernel; ``launched(name)`` is the
    ``.text`` hash of Triton's own compile under that name, or None when ``tool`` is not the
    ptxas Triton uses (then there is no launch to compare with).
    """
    base = triton_compiled(fn, sp, options)

    def load(name: str, cubin: bytes):
        return with_cubin(base, name, cubin)

    def launched(name: str) -> str:
        return read_cubin(triton_compiled(fn, sp, options, name=name).kernel).kernel(name).text_sha256

    return load, (launched if tool.sha256 == triton_ptxas(arch).sha256 else None)


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:  # cuda-python before 12.6
        from cuda import cuda as driver
    return driver


def _check(result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    driver = _driver()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


class CudaKernel:
    """A plain-pointer kernel from a cubin, launched through the CUDA driver API (cuda-bindings).

    Mirrors CompiledKernel's ``kernel[grid](*args)`` so the run stage treats every frontend alike.
    ``ctypes_of`` gives each scalar argument's C type by position (from the entry's PTX
    parameters); without it floats go as float and integers as int.
    """

    def __init__(
        self,
        cubin: bytes,
        name: str,
        shared_bytes: int,
        threads: int | tuple[int, int, int],
        ctypes_of: dict[int, str] | None = None,
    ):
        import ctypes

        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")  # make the primary context current for the driver API
        drv = _driver()
        self.name, self.kernel, self.shared = name, cubin, shared_bytes
        self.block = (threads, 1, 1) if isinstance(threads, int) else tuple(threads)
        self.ctypes_of = dict(ctypes_of or {})
        self.module = _check(drv.cuModuleLoadData(cubin), f"cuModuleLoadData({name})")
        self.function = _check(drv.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        if shared_bytes > 48 * 1024:
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(drv.cuFuncSetAttribute(self.function, attr, shared_bytes), "cuFuncSetAttribute")
        self._ctypes = ctypes

    def _packed(self, args):
        c = self._ctypes
        vals, types = [], []
        for i, a in enumerate(args):
            if hasattr(a, "data_ptr"):
                vals.append(a.data_ptr())
                types.append(c.c_void_p)
            elif i in self.ctypes_of:
                ctype = getattr(c, self.ctypes_of[i])
                vals.append(float(a) if ctype in (c.c_float, c.c_double) else int(a))
                types.append(ctype)
            elif isinstance(a, float):
                vals.append(a)
                types.append(c.c_float)
            elif isinstance(a, (bool, int)):
                vals.append(int(a))
                types.append(c.c_int)
            else:
                raise TypeError(f"cannot pass {type(a).__name__} to a CUDA kernel")
        return tuple(vals), tuple(types)

    def __getitem__(self, grid):
        import torch

        drv = _driver()

        def runner(*args):
            stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
            _check(
                drv.cuLaunchKernel(self.function, *grid, *self.block, self.shared, stream, self._packed(args), 0),
                f"cuLaunchKernel({self.name})",
            )

        return runner


def with_cubin(compiled, name: str, cubin: bytes):
    """A copy of a CompiledKernel that loads ``cubin`` (entry ``name``) instead of its own."""
    k = copy.copy(compiled)
    k.name = name
    k.kernel = cubin
    k.module = k.function = k._run = None
    return k


def cubin_for(emitted: Emitted, name: str, tool: Tool, cache: Cache | None = None,
              ptx: str | None = None) -> tuple[bytes, dict]:
    """ptxprobe's cubin for emitted PTX under ``name``: rename -> assemble (cached); ``ptx``: the text already
    renamed (a module-wide template's, ``rename.template_ptx``)."""
    ptx = renamed_ptx(emitted.ptx, emitted.entry, name) if ptx is None else ptx
    art = assemble(ptx, emitted.arch, tool, cache=cache)
    if not art.ok:
        raise RuntimeError(f"ptxas {art.status} for {emitted.kernel} as {name}: {art.stderr[-500:]}")
    data = art.cubin()
    k = read_cubin(data).kernel(name)
    return data, {
        "registers": k.regcount,
        "text_sha256": k.text_sha256,
        "machine_code_sha256": k.machine_code_sha256,
        "ptxas_version": tool.version,
        "ptxas_sha256": tool.sha256,
        "cubin_sha256": sha256_bytes(data),
    }
