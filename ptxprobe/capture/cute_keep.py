"""Every PTX the CuTe DSL keeps while a program is captured, kept apart compile by compile.

The DSL names a kept PTX after the host function and its arguments as printed, so two compiles that differ only in
a kernel object's own fields (quack-kernels' rotary forward and backward, its ``conjugate``) write one file, the
second over the first, and the first kernel is lost before ``capture`` reads the folder. The sitecustomize that
``capture`` puts first on the program's path installs this hook: after each ``cute.compile`` the PTX files it left
at the top of ``CUTE_DSL_DUMP_DIR`` move into a folder of their own, which ``capture`` reads with the rest.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from ptxprobe.capture.hooks import when_imported

ENV = "PTXPROBE_CUTE_KEEP"  # "1": the hook is on (capture sets it with the DSL's dump folder)
COMPILER = "cutlass.base_dsl.compiler"  # where the DSL's ``cute.compile`` callable lives (``CompileCallable``)
_COMPILES = itertools.count(1)


def keep_apart(dump: Path) -> Path | None:
    """Move the PTX files at the top of ``dump`` into a new folder of their own; the folder (None: nothing moved)."""
    files = sorted(p for p in dump.glob("*.ptx") if p.is_file()) if dump.is_dir() else []
    if not files:
        return None
    apart = dump / f"compile-{os.getpid()}-{next(_COMPILES):05d}"
    apart.mkdir(parents=True, exist_ok=True)
    for f in files:
        os.replace(f, apart / f.name)
    return apart


def patch_compiler(module, dump: Path) -> bool:
    """Wrap ``module.CompileCallable.__call__`` (every ``cute.compile``, with or without options) so that each
    compile's PTX is kept apart, failed compiles' too; False where the DSL has no such class (nothing patched)."""
    cls = getattr(module, "CompileCallable", None)
    if cls is None or getattr(cls, "_ptxprobe_keeps_apart", False):
        return False
    compile_ = cls.__call__

    def compile_and_keep(self, *args, **kwargs):
        try:
            return compile_(self, *args, **kwargs)
        finally:
            keep_apart(dump)

    cls.__call__ = compile_and_keep
    cls._ptxprobe_keeps_apart = True
    return True


def install_from_env() -> None:
    """Called by the sitecustomize ptxprobe puts on PYTHONPATH; a no-op unless ``PTXPROBE_CUTE_KEEP`` is set."""
    dump = os.environ.get("CUTE_DSL_DUMP_DIR")
    if os.environ.get(ENV) == "1" and dump:
        when_imported(COMPILER, lambda module: patch_compiler(module, Path(dump)))
