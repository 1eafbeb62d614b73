"""One Ray session per command: join the cluster at ``--ray-address``, or start a local one and stop it after.

Ray is an optional extra (``pip install 'ptxprobe[ray]'``); without it ``--executor ray`` is a
clear error, never an ImportError.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile

from ptxprobe.core.errors import ClusterError, SpecError
from ptxprobe.core.processes import processes_naming, stop


def require_ray():
    try:
        import ray
    except ImportError as exc:
        raise ClusterError("--executor ray needs Ray: pip install 'ptxprobe[ray]'") from exc
    return ray


class RaySession:
    """Connected on ``open()``; ``close()`` stops the instance only if this session started it."""

    def __init__(self, address: str | None, num_cpus: int | None = None):
        self.address, self.num_cpus = address, num_cpus
        self.started_here = False

    def open(self):
        ray = require_ray()
        if ray.is_initialized():  # a command-level session is open: use it, leave it to its owner
            return ray
        kwargs = {"log_to_driver": False, "include_dashboard": False, "configure_logging": False}
        # the workers must import the same ptxprobe: on a cluster it is installed on every node
        try:
            if self.address:
                _check_reachable(self.address)
                ray.init(address=self.address, **kwargs)
            else:
                # "local": a new instance even when `ray start` left a cluster running on this host
                ray.init(address="local", num_cpus=self.num_cpus, object_store_memory=_local_store_bytes(), **kwargs)
                self.started_here = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or "a local instance"
            raise ClusterError(f"cannot start Ray at {where}: {str(exc).strip().splitlines()[0]}") from exc
        return ray

    def close(self) -> None:
        """Stop Ray if this session started it (a cluster joined at an address keeps running)."""
        ray = require_ray()
        if ray.is_initialized() and (self.started_here or self.address):
            ray.shutdown()
        self.started_here = False

    def __enter__(self) -> RaySession:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def nodes(self) -> list[dict]:
        ray = require_ray()
        return [n for n in ray.nodes() if n.get("Alive")]


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not after Ray's own minutes of retries, when nothing listens at ``address``."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise SpecError(f"--ray-address must be host:port or ray://host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from exc


def _local_store_bytes() -> int:
    """A small object store: cubins are kilobytes, and CI machines are small."""
    return int(os.environ.get("PTXPROBE_RAY_STORE_BYTES", 200 * 1024 * 1024))


def worker_identity() -> str:
    """Which node ran a job (host and Ray node id): recorded so a cluster run says where each piece ran."""
    node = f"pid{os.getpid()}"
    try:
        import ray

        if ray.is_initialized():  # (asking for the context outside a session would start one)
            node = ray.get_runtime_context().get_node_id()[:12]
    except ImportError:
        pass
    return f"{socket.gethostname()}/{node}"


@contextlib.contextmanager
def session_for(executor: str, address: str | None, jobs: int | None):
    """One Ray session around a whole command (bisect and repro run several sweeps in it); nothing for local."""
    if executor != "ray":
        if address:
            raise SpecError("--ray-address goes with --executor ray")
        yield None
        return
    session = RaySession(address, num_cpus=None if address else jobs)
    with session:
        yield session


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus_per_node: int = 1, gpus_per_node: int = 0, timeout: float = 120.0):
    """A throwaway cluster of ``nodes`` Ray nodes on 127.0.0.1 (token authentication off), started with ``ray
    start`` as a user would, in a temporary directory of its own; yields the head's address (``--ray-address``).
    Stopping it stops that directory's processes and their children alone (``ray stop --force`` would stop every Ray
    node of the host, another run's too). For trying ``--executor ray`` on one machine, and for its tests."""
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
        stop(processes_naming(temp_dir))
        if old is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old
