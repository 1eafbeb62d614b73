"""A throwaway Ray cluster on 127.0.0.1 for tests and benchmarks, started with ``ray start`` as a user would.

It lives in its own temporary directory, and stopping it stops the processes of that directory and their
children alone: ``ray stop --force`` would stop every Ray node of the host, another run's too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ptxprobe.core.cluster import require_ray
from ptxprobe.core.errors import ClusterError
from tests.conftest import alive, descendants, proc_argv, proc_stat


def _processes_of(temp_dir: str) -> set[tuple[int, str]]:
    """(pid, start time) of the processes whose command line names ``temp_dir``, and of their children."""
    own = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
           and any(temp_dir in a for a in proc_argv(int(p.name)))}
    return {(pid, st[1]) for pid in own if (st := proc_stat(pid))} | descendants(own)


def _stop(procs: set[tuple[int, str]], grace: float = 3.0) -> None:
    """SIGTERM, and SIGKILL what is left after ``grace`` seconds (Ray's services linger on SIGTERM: the test
    cluster's teardown took the whole 10 s it was given before)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in alive(procs):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while alive(procs) and time.monotonic() < deadline:
            time.sleep(0.1)


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus_per_node: int = 1, gpus_per_node: int = 0, timeout: float = 120.0):
    """``nodes`` Ray nodes on 127.0.0.1 (token authentication off); yields the head's address."""
    temp_dir = tempfile.mkdtemp(prefix="ptxprobe-ray-")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    old = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this process joins it too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = [f"--num-cpus={cpus_per_node}", f"--num-gpus={gpus_per_node}", "--disable-usage-stats",
            "--object-store-memory=100000000", "--node-ip-address=127.0.0.1"]

    def ray_cli(*args: str) -> None:
        run = subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], env=env, capture_output=True,
                             text=True, timeout=timeout)
        if run.returncode != 0:
            raise ClusterError(f"ray {args[0]} failed: {(run.stderr or run.stdout).strip().splitlines()[-1:]}")

    try:
        ray_cli("start", "--head", f"--port={port}", f"--temp-dir={temp_dir}", "--include-dashboard=false", *node)
        for _ in range(nodes - 1):
            ray_cli("start", f"--address=127.0.0.1:{port}", *node)
        yield f"127.0.0.1:{port}"
    finally:
        ray = require_ray()
        if ray.is_initialized():
            ray.shutdown()
        _stop(_processes_of(temp_dir))
        if old is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old
