"""The processes a command started, read from ``/proc`` (Linux): the tree below a process, and the processes that
name a directory of their own (a Ray node's), to stop all of them and to check that nothing is left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process from /proc, None once it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (int(fields[1]), fields[19])


def proc_argv(pid: int) -> list[str]:
    """A process's command line (Ray workers put their title there), [] once it is gone."""
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def descendants(roots: set[int]) -> set[tuple[int, str]]:
    """(pid, start time) of every live process below ``roots``: a test's own process tree, not the machine's."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := proc_stat(int(d.name))):
            children.setdefault(st[0], []).append(int(d.name))
    found, todo = set(), [c for r in roots for c in children.get(r, [])]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if st := proc_stat(pid):
            found.add((pid, st[1]))
    return found


def alive(procs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those of ``procs`` still running (a pid reused by another process since does not count)."""
    return {(pid, start) for pid, start in procs if (st := proc_stat(pid)) and st[1] == start}


def processes_naming(temp_dir: str) -> set[tuple[int, str]]:
    """(pid, start time) of the processes whose command line names ``temp_dir``, and of their children."""
    own = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
           and any(temp_dir in a for a in proc_argv(int(p.name)))}
    return {(pid, st[1]) for pid in own if (st := proc_stat(pid))} | descendants(own)


def stop(procs: set[tuple[int, str]], grace: float = 3.0) -> None:
    """SIGTERM, and SIGKILL what is left after ``grace`` seconds (Ray's services linger on SIGTERM: a local
    cluster's teardown took the whole 10 s it was given before)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in alive(procs):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while alive(procs) and time.monotonic() < deadline:
            time.sleep(0.1)
