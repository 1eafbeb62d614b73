"""``capture --interpret``: a program's Triton launches recorded under Triton's interpreter, compiled without a GPU.

The program runs with ``TRITON_INTERPRET=1`` on CPU tensors; the ``sitecustomize`` ptxprobe puts first on its
``PYTHONPATH`` installs the recorder. Each launch ``kernel[grid](...)`` is recorded as Triton's launcher would see
it: the function, every argument (a tensor's dtype and address, so its 16-byte alignment; an integer's value, so 1
and multiples of 16 specialise as at launch; constexprs) and the launch options (num_warps, num_stages, ...). By
default the kernel is not executed (``record``; ``execute`` runs the interpreter too, slowly, for a program that reads
a kernel's output before its next launch). An autotuned kernel is recorded at every config its pruning keeps: nothing
can be timed on a CPU. Then a process without the interpreter compiles each distinct specialisation for the target
with Triton's own stages (``sources.triton``); its PTX joins the capture as a GPU capture's would.

Limits, said where they bite: host code that needs CUDA fails under the interpreter; a kernel defined inside a
function cannot be imported again by name; a tensor descriptor (TMA) argument is not replayed.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptxprobe.capture.hooks import when_imported

ENV = "PTXPROBE_LAUNCH_LOG"
EXECUTE_ENV = "PTXPROBE_INTERPRET_EXECUTE"
MODES = ("record", "execute")
VIA = "_ptxprobe_via"  # a keyword the autotune patch hands the launch patch: which config this launch is
RECORD_ONLY = "_ptxprobe_record_only"  # and whether, in execute mode, it is recorded without running
INTERPRETER_MODULE = "triton.runtime.interpreter"
AUTOTUNER_MODULE = "triton.runtime.autotuner"
OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
               "launch_pdl")


# --- inside the program: the recorder ---------------------------------------------------------------------------

def describe(value: Any) -> list:
    """A launch argument as JSON Triton's binder can be replayed on: ``["ptr", dtype, address]``, ``["int", v]``,
    ... or ``["unsupported", type]`` (said at compile time, never guessed)."""
    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", value]
    if isinstance(value, str):
        return ["str", value]
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return ["ptr", str(value.dtype), int(value.data_ptr())]
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton"):
        return ["tl.dtype", value.name]
    if isinstance(value, tuple):
        return ["tuple", [describe(v) for v in value]]
    fn = getattr(value, "fn", None)
    if type(value).__name__ in ("InterpretedFunction", "JITFunction") and fn is not None:
        return ["jit", function_target(fn)]
    return ["unsupported", f"{type(value).__module__}.{type(value).__qualname__}"]


def function_target(fn) -> str:
    """``module:qualname`` of a kernel's Python function, or ``file.py:qualname`` for one in a script run as
    ``__main__`` (the form ``--triton`` and ``sources.triton.import_target`` read)."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__":
        module = str(Path(inspect.getsourcefile(fn) or "?").resolve())
    return f"{module}:{fn.__qualname__}"


@dataclass
class Recorder:
    """Writes each distinct launch to the log the moment it is first seen (a program that fails later keeps them)."""

    log: Path
    execute: bool
    seen: dict[str, int] = field(default_factory=dict)

    def header(self) -> None:
        with self.log.open("a") as f:
            f.write(json.dumps({"kind": "program", "argv": sys.argv, "executable": sys.executable,
                                "sys_path": [p for p in sys.path if p], "cwd": os.getcwd()}) + "\n")

    def record(self, fn, args: tuple, kwargs: dict, via: str) -> None:
        signature = inspect.signature(fn)
        options = {k: kwargs[k] for k in OPTION_KEYS if k in kwargs}
        # a kernel may name a parameter after an option (``num_warps: tl.constexpr``): Triton hands it both
        params = {k: v for k, v in kwargs.items() if k not in OPTION_KEYS or k in signature.parameters}
        launch = {"kind": "launch", "function": function_target(fn), "name": fn.__name__, "options": options,
                  "via": via}
        try:
            bound = signature.bind(*args, **params)
            bound.apply_defaults()
            launch["args"] = [describe(v) for v in bound.arguments.values()]
        except TypeError as exc:  # the program goes on; the replay says why this launch has no kernel
            launch.update(args=[], error=f"its arguments do not bind to its parameters: {exc}")
        key = json.dumps({k: launch.get(k) for k in ("function", "args", "options", "error")}, sort_keys=True,
                         default=repr)
        if key in self.seen:
            self.seen[key] += 1
            return
        self.seen[key] = 1
        with self.log.open("a") as f:
            f.write(json.dumps(launch, default=repr) + "\n")

    def counts(self) -> None:
        with self.log.open("a") as f:
            f.write(json.dumps({"kind": "counts", "launches": list(self.seen.values())}) + "\n")


def patch_interpreter(module, recorder: Recorder) -> None:
    """``InterpretedFunction.run`` records the launch (and, in ``execute`` mode, runs it as before)."""
    cls = module.InterpretedFunction
    original = cls.run

    def run(self, *args, grid, warmup, **kwargs):
        via = kwargs.pop(VIA, "launch")
        record_only = kwargs.pop(RECORD_ONLY, False)
        if not warmup:
            recorder.record(self.fn, args, kwargs, via)
            if not recorder.execute or record_only:
                return None
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    cls.run = run


def patch_autotuner(module, recorder: Recorder) -> None:
    """``Autotuner.run`` records a launch per config its pruning keeps (no timing on a CPU) and runs the first (in
    ``execute`` mode: once, after its pre-hook, as the autotuner would run its choice)."""
    cls = module.Autotuner

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            configs = self.prune_configs(kwargs) if len(self.configs) > 1 else self.configs
        except Exception:  # a pruning that asks the GPU (a perf model): every listed config
            configs = self.configs
        for i, config in enumerate(configs[1:], start=2):  # recorded only: the program's outputs are computed once
            self.fn.run(*args, **kwargs, **config.all_kwargs(), **{VIA: f"autotune {i}/{len(configs)}"},
                        **{RECORD_ONLY: True})
        self.best_config = chosen = configs[0]  # the first stands for the choice a GPU's timing would make
        if chosen.pre_hook is not None and recorder.execute:
            chosen.pre_hook({**self.nargs, **kwargs, **chosen.all_kwargs()})
        self.nargs = None
        return self.fn.run(*args, **kwargs, **chosen.all_kwargs(), **{VIA: f"autotune 1/{len(configs)}"})

    cls.run = run


def install_from_env() -> Recorder | None:
    """Called by the sitecustomize ptxprobe puts on PYTHONPATH; a no-op without ``PTXPROBE_LAUNCH_LOG``."""
    path = os.environ.get(ENV)
    if not path:
        return None
    recorder = Recorder(Path(path), execute=os.environ.get(EXECUTE_ENV) == "1")
    recorder.header()
    when_imported(INTERPRETER_MODULE, lambda m: patch_interpreter(m, recorder))
    when_imported(AUTOTUNER_MODULE, lambda m: patch_autotuner(m, recorder))
    atexit.register(recorder.counts)
    return recorder
