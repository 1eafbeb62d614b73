"""The launches ``capture --interpret`` recorded, compiled for a target in a process without the interpreter.

The recorded arguments are replayed through Triton's own launch binder (``sources.triton.specialize``) on stand-ins
(a tensor becomes a ``PointerArg`` of its dtype at its recorded address), so each launch gets the signature,
constants and divisibility it had; Triton's stages then give its PTX (cached by everything that shapes it). The
compile runs in a child process: importing a library runs its import-time code, which must not run in ptxprobe's
own process, and the program's ``TRITON_INTERPRET`` must not reach Triton's compiler.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ptxprobe.core.cache import Cache, atomic_write, sha256_text
from ptxprobe.core.errors import PtxprobeError, SpecError, ToolFailed
from ptxprobe.core.proc import run_tool
from ptxprobe.ptx.text import entry_of
from ptxprobe.sources.offline import offline_target
from ptxprobe.sources.registry import PointerArg
from ptxprobe.sources.triton import (
    compile_failure,
    import_target,
    run_file_module,
    specialize,
    triton_ptx,
    unwrapped,
)

REPLAYED = "replayed.json"


@dataclass(frozen=True)
class RecordedLaunch:
    """One distinct launch of the program: what Triton's launcher was handed."""

    function: str  # module:qualname, or file.py:qualname
    name: str
    args: tuple  # ``interpret.describe`` of each parameter, in order, defaults applied
    options: dict  # num_warps, num_stages, ...
    via: str  # "launch", or "autotune i/n" (the autotuner's i-th config of n)
    launches: int = 1  # how often the program made it
    error: str | None = None  # why it could not be recorded (its arguments did not bind)


@dataclass(frozen=True)
class ReplayedLaunch:
    """A recorded launch compiled (``ptx`` set) or not (``error`` says why, in the words of what refused it)."""

    launch: RecordedLaunch
    ptx: str | None = None  # path, relative to the capture directory
    ptx_sha256: str | None = None
    entry: str | None = None
    metadata: dict | None = None  # what Triton's stages said of it (name, num_warps, shared, specialization, ...)
    error: str | None = None


def read_log(path: Path) -> tuple[dict, list[RecordedLaunch]]:
    """(the program's header: its sys.path and cwd; its distinct launches, with their counts when it exited)."""
    header: dict = {}
    launches, counts = [], None
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "program":
            header = rec
        elif rec["kind"] == "launch":
            launches.append(rec)
        elif rec["kind"] == "counts":
            counts = rec["launches"]
    return header, [RecordedLaunch(r["function"], r["name"], tuple(r["args"]), r["options"], r["via"],
                                   counts[i] if counts and i < len(counts) else 1, r.get("error"))
                    for i, r in enumerate(launches)]


def stand_in(desc: list, resolve) -> Any:
    """The value Triton's binder sees for one described argument (``resolve`` loads a ``jit`` argument)."""
    kind = desc[0]
    if kind == "none":
        return None
    if kind in ("bool", "int", "float", "str"):
        return desc[1]
    if kind == "ptr":
        return PointerArg(desc[1], desc[2])
    if kind == "tl.dtype":
        import triton.language as tl

        return tl.dtype(desc[1])
    if kind == "tuple":
        return tuple(stand_in(d, resolve) for d in desc[1])
    if kind == "jit":
        return resolve(desc[1])
    raise SpecError(f"an argument of type {desc[1]} cannot be replayed (capture --interpret records tensors, "
                    "numbers, strings, dtypes, tuples and jit functions)")


class _Loader:
    """Each kernel's module imported once (offline: its import-time device questions answered for the arch)."""

    def __init__(self, arch: str, argv: list[str] | None = None):
        self.arch, self.argv, self.loaded = arch, argv or [], {}
        self.scripts: dict[Path, Any] = {}
        self.script_errors: dict[Path, str] = {}

    def __call__(self, target: str):
        if target not in self.loaded:
            if "<locals>" in target:
                raise SpecError(f"{target}: defined inside a function, so it cannot be imported again by name")
            module, _, qualname = target.rpartition(":")
            first, *rest = qualname.split(".")
            with offline_target(self.arch):
                if module.endswith(".py"):
                    obj = getattr(self.script(Path(module)), first, None)
                else:
                    obj = import_target(f"{module}:{first}", "capture --interpret")
            for part in rest:
                obj = getattr(obj, part, None)
            fn, _ = unwrapped(obj)
            if fn is None or not hasattr(fn, "params"):
                after = self.script_errors.get(Path(module))
                raise SpecError(f"{target}: not a triton.jit function when imported without the interpreter"
                                + (f" (running the script again stopped at {after})" if after else ""))
            self.loaded[target] = fn
        return self.loaded[target]

    def script(self, path: Path):
        """The program's own script, run again to define its kernels: its launches do nothing (no GPU is asked) and
        an error after the definitions (host code that needed the kernels' results) leaves them defined."""
        if path not in self.scripts:
            argv = sys.argv
            sys.argv = [str(path), *self.argv]
            try:
                with launches_do_nothing():
                    self.scripts[path], raised = run_file_module(path, "capture --interpret")
            finally:
                sys.argv = argv
            if raised is not None:
                self.script_errors[path] = f"{type(raised).__name__}: {raised}"
        return self.scripts[path]


@contextlib.contextmanager
def launches_do_nothing():
    """While a script is run again for its definitions, ``kernel[grid](...)`` (autotuned or not) returns at once."""
    from triton.runtime import autotuner, jit

    saved = jit.JITFunction.run, autotuner.Autotuner.run
    jit.JITFunction.run = lambda self, *args, **kwargs: None
    autotuner.Autotuner.run = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        jit.JITFunction.run, autotuner.Autotuner.run = saved


def compile_launch(launch: RecordedLaunch, arch: str, load: _Loader, cache, out: Path) -> ReplayedLaunch:
    """One recorded launch to PTX for ``arch``; a refusal is kept with its reason, never raised."""
    if launch.error:
        return ReplayedLaunch(launch, error=f"{launch.function}: {launch.error}")
    try:
        fn = load(launch.function)
        args = [stand_in(d, load) for d in launch.args]
        spec = specialize(fn, args)
        try:
            rec = triton_ptx(fn, spec, arch, dict(launch.options), cache)
        except PtxprobeError:
            raise
        except Exception as exc:  # Triton's CompilationError and its kin: one line in the user's terms
            raise compile_failure(fn, exc) from exc
    except PtxprobeError as exc:
        return ReplayedLaunch(launch, error=str(exc))
    ptx = rec["ptx"]
    digest = sha256_text(ptx)
    entry = entry_of(ptx)
    path = out / "ptx" / f"{entry[:80]}-{digest[:12]}.ptx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ptx)
    return ReplayedLaunch(launch, str(path.relative_to(out)), digest, entry, rec["metadata"])


def replay_here(log: Path, arch: str, out: Path) -> list[ReplayedLaunch]:
    """Every recorded launch compiled, in this process (the child's job), and ``replayed.json`` written."""
    header, launches = read_log(log)
    for p in reversed(header.get("sys_path", [])):  # the program's imports resolve as they did for it
        if p not in sys.path:
            sys.path.insert(0, p)
    load = _Loader(arch, header.get("argv", [])[1:])
    cache = Cache()
    done = [compile_launch(launch, arch, load, cache, out) for launch in launches]
    atomic_write(out / REPLAYED, json.dumps([asdict(r) for r in done], indent=1, default=repr).encode())
    return done


def replay(log: Path, arch: str, out: Path, timeout: float) -> list[ReplayedLaunch]:
    """``replay_here`` in a child process without ``TRITON_INTERPRET``, run by the program's own Python (a library
installed in its environment alone is importable there, as ptxprobe is: its hook ran there); records read back."""
    header, _ = read_log(log)
    python = header.get("executable") or sys.executable
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = run_tool([python, "-m", "ptxprobe.capture.replay", str(log), "--arch", arch, "--out", str(out)],
                   timeout=timeout, env=env)
    if not run.ok:
        raise ToolFailed(f"compiling the recorded launches failed: {run.describe()}")
    rows = json.loads((out / REPLAYED).read_text())
    return [ReplayedLaunch(**{**r, "launch": RecordedLaunch(**{**r["launch"], "args": tuple(r["launch"]["args"])})})
            for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptxprobe.capture.replay",
                                     description="compile the launches capture --interpret recorded")
    parser.add_argument("log")
    parser.add_argument("--arch", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    replay_here(Path(args.log), args.arch, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
