"""The one subprocess wrapper: argument lists (never a shell), timeouts, captured stderr.

A tool that crashes or hangs is a *result* (``ToolRun.status``), not an exception,
so a sweep can record it and carry on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ptxprobe.core.errors import ToolNotFound

OK, FAILED, CRASHED, TIMEOUT = "ok", "failed", "crashed", "timeout"


@dataclass(frozen=True)
class ToolRun:
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    status: str  # ok | failed | crashed | timeout

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def describe(self) -> str:
        """One line for error messages: what ran and how it ended."""
        how = {
            OK: "succeeded",
            FAILED: f"exited {self.returncode}",
            TIMEOUT: f"timed out after {self.seconds:.0f}s",
            CRASHED: f"crashed ({self.signal_name})",
        }[self.status]
        tail = _without_python_warnings(self.stderr.strip().splitlines())[-3:]
        return f"{Path(self.argv[0]).name} {how}" + (": " + " | ".join(tail) if tail else "")


_PY_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")


def _without_python_warnings(lines: list[str]) -> list[str]:
    """stderr lines less Python's warnings (``file:line: XWarning: text`` and the indented source line after it):
    a program that imports Triton 3.9 prints one before anything else, and it is never why the program failed."""
    out, skip_source = [], False
    for line in lines:
        if _PY_WARNING.match(line):
            skip_source = True
            continue
        if skip_source and line.startswith((" ", "\t")):
            skip_source = False
            continue
        skip_source = False
        out.append(line)
    return out


def run_tool(
    argv: Sequence[str | os.PathLike],
    *,
    timeout: float = 300.0,
    cwd: str | os.PathLike | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> ToolRun:
    """Run one external tool; never raises for the tool's own failure, only if it is missing."""
    args = tuple(str(a) for a in argv)
    start = time.perf_counter()
    # a stop signal that arrives while the child is being started is acted on once it is registered
    _STOP["spawning"] = True
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
        _LIVE.add(proc.pid)
    except FileNotFoundError as exc:
        raise ToolNotFound(f"{args[0]}: not found") from exc
    except PermissionError as exc:
        raise ToolNotFound(f"{args[0]}: not executable") from exc
    finally:
        _STOP["spawning"] = False
        if _STOP["signal"] is not None:
            _stop_now(_STOP["signal"])
    try:
        return _finish(proc, args, stdin, timeout, start)
    finally:
        _LIVE.discard(proc.pid)


_LIVE: set[int] = set()  # process groups of tools running now (each tool leads its own session)
_STOP: dict = {"spawning": False, "signal": None}


def install_stop_handler(signum: int = signal.SIGTERM) -> None:
    """For worker processes: on ``signum``, kill every running tool's process group and exit at once.

    A signal that lands while a tool is being started waits until the tool is registered, so it is killed too.
    """

    def handler(sig, frame):
        if _STOP["spawning"]:
            _STOP["signal"] = sig
            return
        _stop_now(sig)

    signal.signal(signum, handler)


def _stop_now(sig: int) -> None:
    kill_running_tools()
    os._exit(128 + sig)


def kill_running_tools() -> None:
    """Kill the process group of every tool this process is running (a stop signal's last act)."""
    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _finish(proc: subprocess.Popen, args: tuple, stdin: bytes | None, timeout: float, start: float) -> ToolRun:
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return ToolRun(args, None, _text(out), _text(err), time.perf_counter() - start, TIMEOUT)
    except BaseException:  # Ctrl-C, SIGTERM turned into an exception: never leave the tool running
        _kill_group(proc)
        proc.wait()
        raise
    seconds = time.perf_counter() - start
    rc = proc.returncode
    if rc == 0:
        status = OK
    elif (
        rc < 0
        or rc >= 128 + 1
        and rc - 128 in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGKILL)
    ):
        status = CRASHED
    else:
        status = FAILED
    return ToolRun(args, rc, _text(out), _text(err), seconds, status)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
