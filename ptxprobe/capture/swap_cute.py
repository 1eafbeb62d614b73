"""The capture hook's CuTe DSL half: ptxprobe's cubin loaded, or exported, in place of the DSL's own.

A CuTe DSL compiled function carries its cubin inside compiled host code, which loads it (``cuda_init``) and then
looks each kernel up by the name the DSL gave it (``cuda_load_to_device``). ptxprobe's cubin of a tuned
configuration therefore keeps that name (``binary.symbols.respelled``: the machine code is what ptxas gave under the
chosen name, the symbol the program's own), and is handed over at the two places the DSL lets go of its cubin:

- running (JIT): ``CudaDialectJitCompiledFunction._load_cuda_library`` loads ptxprobe's cubin with
  ``cudaLibraryLoadData`` and then runs the DSL's own ``cuda_load_to_device`` on it, as its ``cuda_init`` would have;
- exporting (AOT): ``JitCompiledFunction.dump_to_object``, which ``export_to_c`` calls, embeds ptxprobe's cubin in
  the object file in place of the DSL's kernel image (``embed_cubin``), so the exported header's own
  ``Kernel_Module_Load`` loads the tuned code.

A compiled function is matched by its kernels' entries and the sha256 of its PTX (``CUTE_DSL_KEEP=ptx``, which the
runs set); without the PTX (a function loaded from a cache) by entry alone, where the plan holds one kernel under
it. One compiled function is one cubin: one replacement per function.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Protocol

from ptxprobe.ptx.text import entries_of


class SwapState(Protocol):
    """What this half needs of the hook's state (``capture.swap._State``, which imports this module)."""

    reps: dict
    mismatched: list

    def choose(self, entry: str | None, ptx: str | None) -> Any: ...

    def count(self, rep: Any) -> None: ...


def _entries(compiled: Any, ptx: str | None) -> list[str]:
    if ptx:
        return entries_of(ptx)
    return list(getattr(compiled, "kernel_info", None) or {})


def replacement_for(state: SwapState, compiled: Any) -> Any:
    """The plan's replacement (a ``capture.swap.Replacement``) for one compiled function, or None (counted as
    mismatched where its entry is in the plan but its PTX is another kernel's)."""
    try:
        ptx = compiled.__ptx__
    except Exception:  # no artifacts kept
        ptx = None
    # the DSL keeps the PTX's path there when it has no file to read (a function loaded from its cache): not PTX
    ptx = ptx if isinstance(ptx, str) and ".entry" in ptx else None
    for entry in _entries(compiled, ptx):
        if entry not in state.reps:
            continue
        rep = state.choose(entry, ptx)
        if rep is None:
            state.mismatched.append(entry)
            continue
        return rep
    return None


def load_cubin(compiled: Any, data: bytes) -> list[Any]:
    """What ``_load_cuda_library`` does, with ``data`` loaded in place of the cubin in the host code: the library
    loaded, then the DSL's ``cuda_load_to_device`` on every device (it looks the kernels up by name, sets their
    attributes and keeps their handles for the launch code)."""
    import cuda.bindings.runtime as cuda_runtime

    err, handle = cuda_runtime.cudaLibraryLoadData(data, None, None, 0, None, None, 0)
    if err != cuda_runtime.cudaError_t.cudaSuccess:
        raise RuntimeError(f"ptxprobe's swap hook: cudaLibraryLoadData refused the tuned cubin: {err}")
    _, cuda_load_to_device = compiled._get_cuda_init_and_load()
    library = ctypes.c_void_p(int(handle))
    pointer_to_library = ctypes.pointer(library)
    device_id, ret = ctypes.c_int32(0), ctypes.c_int32(0)
    args = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.pointer(x), ctypes.c_void_p)
                                   for x in (pointer_to_library, device_id, ret)))
    for dev in range(compiled.num_devices):
        device_id.value = dev
        cuda_load_to_device(args)
        if ret.value != 0:
            raise RuntimeError(f"ptxprobe's swap hook: the DSL's cuda_load_to_device failed on device {dev} with the "
                               f"tuned cubin (cudaError {ret.value}): does it hold the kernels under their own names?")
    return [cuda_runtime.cudaLibrary_t(library.value)]


def patch_executor(module: Any, state: SwapState) -> None:
    """Wrap ``_load_cuda_library`` of an imported ``cutlass.cutlass_dsl.cuda_jit_executor`` (JIT runs)."""
    cls = module.CudaDialectJitCompiledFunction
    if "_ptxprobe_loads" in cls.__dict__:
        return
    original = cls._load_cuda_library

    def _load_cuda_library(self):
        rep = replacement_for(state, self)
        if rep is None:
            return original(self)
        libraries = load_cubin(self, Path(rep.cubin).read_bytes())
        state.count(rep)
        return libraries

    cls._load_cuda_library = _load_cuda_library
    cls._ptxprobe_loads = True


BINARY_MAGIC = (b"\x50\xed\x55\xba", b"\x7fELF")  # a fatbin's, a cubin's: what cudaLibraryLoadData takes


def embed_cubin(export_module: Any, data: bytes) -> str:
    """Put ``data`` in place of the kernel image an export module holds (the DSL lowers it to an LLVM global
    ``<gpu module>_binary``, a fatbin, that the exported ``cuda_init`` hands to ``cudaLibraryLoadData``); the
    global's name. Exactly one such global, or the export is refused rather than left with the DSL's code."""
    from cutlass._mlir import ir

    found = []

    def visit(op):
        if op.name == "llvm.mlir.global" and "value" in op.attributes:
            name, value = op.attributes["sym_name"].value, op.attributes["value"]
            if name.endswith("_binary") and isinstance(value, ir.StringAttr) and value.value_bytes[:4] in BINARY_MAGIC:
                found.append(op)
        return ir.WalkResult.ADVANCE

    export_module.operation.walk(visit)
    if len(found) != 1:
        raise RuntimeError(f"ptxprobe's swap hook: the CuTe DSL export holds {len(found)} kernel images where it "
                           "knows one (an LLVM global <module>_binary): not exported with the tuned code")
    (op,) = found
    with export_module.context:
        op.attributes["value"] = ir.StringAttr.get(data)
        op.attributes["global_type"] = ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{len(data)} x i8>"))
    return op.attributes["sym_name"].value


def patch_export(module: Any, state: SwapState) -> None:
    """Wrap ``dump_to_object`` of an imported ``cutlass.base_dsl.jit_executor`` (AOT exports): for one call, the
    export module it builds (``cutlass.base_dsl.export.get_export_module``) gets ptxprobe's cubin."""
    cls = module.JitCompiledFunction
    if "_ptxprobe_exports" in cls.__dict__:
        return
    original = cls.dump_to_object

    def dump_to_object(self, function_prefix):
        rep = replacement_for(state, self)
        if rep is None:
            return original(self, function_prefix)
        import cutlass.base_dsl.export as export

        build, data = export.get_export_module, Path(rep.cubin).read_bytes()

        def with_tuned_cubin(*args, **kwargs):
            built = build(*args, **kwargs)
            embed_cubin(built, data)
            return built

        export.get_export_module = with_tuned_cubin
        try:
            obj = original(self, function_prefix)
        finally:
            export.get_export_module = build
        state.count(rep)
        return obj

    cls.dump_to_object = dump_to_object
    cls._ptxprobe_exports = True
