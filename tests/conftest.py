"""Shared fixtures: an isolated cache per test session, emitted PTX reused across tests, no network.

The extra ptxas releases some tests use are installed before the run (``.ci/run`` installs the ones listed in
``requirements-toolchains.txt`` into ``TEST_TOOLCHAINS``); a test whose release is not there skips and says how to
install it. Nothing downloads while the tests run: pip is pointed at no index, ``toolchain.install``'s download
raises :class:`NetworkUsed`, and so does a TCP connection from this process to anything but this machine.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# a study experiment the tool's tests sweep, named by its path: the tool's tests never import the study package
REPRO_SMALL = ROOT / "experiments" / "definitions" / "repro_small.toml"
TEST_TOOLCHAINS = Path(os.environ.get("PTXPROBE_TEST_TOOLCHAINS")
                       or Path.home() / ".cache" / "ptxprobe-test-toolchains")
NO_INDEX = "http://ptxprobe-tests-have-no-network.invalid/simple"

# The tests start hundreds of Python processes (the CLI, pool workers, programs). Where the machine sets
# PYTHONDONTWRITEBYTECODE each of them compiles ptxprobe's modules from source again (a fifth of a CLI test's
# CPU): Python's bytecode is kept for the run, outside the tree (a wheel built from the checkout never sees it).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path.home() / ".cache" / "ptxprobe-test-pycache"))
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]


def wheel_nvcc() -> Path | None:
    """nvcc from the pip wheels ``.ci/run`` installs (the ``cuda`` extra: nvidia-cuda-nvcc, with nvidia-nvvm's cicc
    and nvidia-cuda-crt's and nvidia-cuda-runtime's headers beside it), on a machine without a CUDA toolkit."""
    for entry in sys.path:
        for nvcc in sorted(Path(entry or ".").glob("nvidia/cu*/bin/nvcc")):
            root = nvcc.parent.parent
            if (root / "nvvm" / "bin" / "cicc").is_file() and (root / "include" / "cuda_runtime.h").is_file():
                return nvcc
    return None


# the --cu tests run wherever an nvcc is: one on PATH, else the wheels' (put on PATH for the tests and the
# processes they start, which look for "nvcc" as a user's shell would)
if shutil.which("nvcc") is None and (_nvcc := wheel_nvcc()) is not None:
    os.environ["PATH"] = f"{_nvcc.parent}{os.pathsep}{os.environ.get('PATH', '')}"


class NetworkUsed(AssertionError):
    """A test reached for the network: what it needs must be installed before the run (see .ci/run)."""


def _local(host) -> bool:
    if host in ("localhost", "") or str(host).endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False  # a name to resolve: somewhere else
    return addr.is_loopback or addr.is_unspecified


TIERS = ("unit", "integration", "e2e", "gpu", "study")  # registered in pyproject.toml
# each tier's per-test limit (seconds): a hung unit test fails in two minutes, not in the suite's fifteen
TIER_TIMEOUT_S = {"unit": 120, "integration": 600, "e2e": 900, "gpu": 900, "study": 600}
# the files that take longest on a 2-core machine (seconds summed over their tests, --durations), dealt out first:
# xdist hands each worker whole files (--dist loadfile, without its reordering by test count), so a long file dealt
# last would leave the other worker idle at the end; the rest keep their order after these
LONGEST_FIRST = ("test_ray_executor", "test_repro", "test_tune_program", "test_module_assembly",
                 "test_committed_runs", "test_user_kernels", "test_tune", "test_design_stats",
                 "test_self_contained_runs", "test_notebook", "test_capture", "test_sweep_lifecycle",
                 "test_user_journey")


@pytest.hookimpl(tryfirst=True)  # before -m selects: a module's TIER is a mark by then
def pytest_collection_modifyitems(config, items):
    """Every test has exactly one tier: its own mark, its module's ``pytestmark``, or (for a module whose tests
    differ) its module's ``TIER`` where the test has no mark of its own. None or several stop the run (a unit
    module's GPU test must not run under ``-m unit``). Each tier's timeout applies where a test sets none."""
    problems = []
    for item in items:
        tiers = {m.name for m in item.iter_markers() if m.name in TIERS}
        if not tiers and getattr(item.module, "TIER", None) in TIERS:
            tiers = {item.module.TIER}
            item.add_marker(getattr(pytest.mark, item.module.TIER))
        if len(tiers) != 1:
            problems.append(f"{item.nodeid}: {', '.join(sorted(tiers)) or 'no tier'}")
        elif item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUT_S[next(iter(tiers))]))
    if problems:
        raise pytest.UsageError(f"every test has exactly one tier ({', '.join(TIERS)}): " + "; ".join(problems[:10]))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(getattr(item.module, "__name__", "").rsplit(".", 1)[-1], len(rank)))  # stable


def pytest_configure(config):
    """Ctrl-C reaches the programs the tests start as it does from a terminal. A suite started in the background by
    a shell without job control (``pytest &`` in a script) inherits SIGINT ignored, and an ignored signal stays
    ignored through exec: every ptxprobe a test then interrupts would finish its work instead (the tests that press
    Ctrl-C failed so, each after running to its end). A handler set here is reset to the default in children."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def no_network():
    """pip finds no index (children included), ptxprobe's wheel download and outbound TCP from here raise."""
    from ptxprobe.toolchain import tools

    real_run_tool, real_connect, real_connect_ex = tools.run_tool, socket.socket.connect, socket.socket.connect_ex

    def run_tool(argv, *a, **kw):
        if "pip" in map(str, argv) and "download" in map(str, argv):
            raise NetworkUsed(f"a test tried to download {argv[-1]}: install it before the run (.ci/run does)")
        return real_run_tool(argv, *a, **kw)

    def guard(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM \
                and not _local(address[0]):
            raise NetworkUsed(f"a test opened a connection to {address[0]}:{address[1]}")

    def connect(sock, address):
        guard(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        guard(sock, address)
        return real_connect_ex(sock, address)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIP_NO_INDEX", "1")
        mp.setenv("PIP_INDEX_URL", NO_INDEX)
        mp.delenv("PIP_EXTRA_INDEX_URL", raising=False)
        mp.delenv("PIP_FIND_LINKS", raising=False)
        mp.setattr(tools, "run_tool", run_tool)
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        yield


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """One cache for the test run, shared by the xdist workers (content-addressed, written by atomic replace, so
    concurrent sweeps may share it: test_sweep_lifecycle): a kernel one worker emitted or assembled is not done
    again by the other. Tests that count what a run assembled give their runs a cache of their own."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "ptxprobe-cache"
    root.mkdir(exist_ok=True)
    old = os.environ.get("PTXPROBE_CACHE")
    os.environ["PTXPROBE_CACHE"] = str(root)
    yield root
    if old is None:
        os.environ.pop("PTXPROBE_CACHE", None)
    else:
        os.environ["PTXPROBE_CACHE"] = old


@pytest.fixture(scope="session")
def emitted():
    """emitted(dtype, arch, causal=False, name=None) -> Emitted, memoised for the session."""
    memo = {}

    def get(dtype="fp16", arch="sm_90a", causal=False, name=None, kernel="attention", head_dim=128):
        key = (dtype, arch, causal, name, kernel, head_dim)
        if key not in memo:
            memo[key] = emit_registered(kernel, dtype, arch, causal=causal, name=name, head_dim=head_dim)
        return memo[key]

    return get


def emit_registered(kernel="attention", dtype="fp16", arch="sm_90a", causal=False, name=None, head_dim=128,
                    config="default", seq_len=4096, cache=None):
    """A registered kernel's PTX for one target (through its KernelSource)."""
    from ptxprobe.core.cache import Cache
    from ptxprobe.sources import RegisteredSource

    src = RegisteredSource(kernel, dtype, head_dim, causal, config, seq_len)
    return src.emit(arch, cache or Cache(), name=name) if name else src.emit(arch, cache or Cache())


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def fake_ptxas(tmp_path):
    """A ptxas that identifies itself as 12.8.93 and then misbehaves as told: crash | hang | fail."""

    def make(behaviour: str) -> Path:
        action = {
            "crash": "kill -SEGV $$",
            "hang": "exec sleep 60",
            "fail": 'echo "ptxas fatal   : something went wrong" >&2; exit 255',
        }[behaviour]
        return write_script(
            tmp_path / f"ptxas-{behaviour}",
            f"""
case "$1" in --version) echo "Cuda compilation tools, release 12.8, V12.8.93"; exit 0;; esac
echo "ptxas info    : starting" >&2
{action}
""",
        )

    return make


def _installed(version: str):
    """A release's ptxas, installed before the run into TEST_TOOLCHAINS (PTXPROBE_TOOLCHAINS points there meanwhile);
    skips, saying how to install it, when it is not there. Never downloads."""
    from ptxprobe.toolchain import tools as toolchain

    dist = toolchain.WHEELS["ptxas"][0 if version.startswith("12.") else 1]
    if not (TEST_TOOLCHAINS / f"{dist}-{version}" / "installed.json").exists():
        pytest.skip(f"ptxas {version} is not installed in {TEST_TOOLCHAINS}: run .ci/run, or "
                    f"PTXPROBE_TOOLCHAINS={TEST_TOOLCHAINS} ptxprobe toolchain install {version}")
    old = os.environ.get("PTXPROBE_TOOLCHAINS")
    os.environ["PTXPROBE_TOOLCHAINS"] = str(TEST_TOOLCHAINS)
    rec = toolchain.install(version, ("ptxas",))[0]  # installed already: read from its record
    yield rec
    if old is None:
        os.environ.pop("PTXPROBE_TOOLCHAINS", None)
    else:
        os.environ["PTXPROBE_TOOLCHAINS"] = old


@pytest.fixture(scope="session")
def installed_ptxas_124():
    """A real extra ptxas (12.4.131, from the nvidia-cuda-nvcc-cu12 wheel) as a Tool."""
    from ptxprobe.toolchain import tools as toolchain

    for rec in _installed("12.4.131"):
        yield toolchain.identify(rec.path, "ptxas", "ptxprobe-cache")


def make_experiment(**overrides):
    """A small experiment for tests: fp8 attention, D=128, non-causal, sm_90a + sm_100a, three names."""
    from ptxprobe.static.experiment import experiment_from_dict

    base = dict(
        name="test",
        kernels=["attention"],
        dtypes=["fp8e5"],
        head_dims=[128],
        causal=[False],
        archs=["sm_90a", "sm_100a"],
        names=["{base}", "cutlass_{base}", "xutlass_{base}"],
        repeat={"default": 1},
    )
    base.update(overrides)
    return experiment_from_dict(base)


@pytest.fixture(scope="session")
def installed_ptxas_13():
    """ptxas 13.0.88 from the nvidia-cuda-nvcc wheel (the 13.x layout), as its install record."""
    yield from _installed("13.0.88")


@pytest.fixture(scope="session")
def installed_ptxas_135():
    """ptxas 13.5.37, the newest release on PyPI (it has --apply-controls), as a Tool."""
    from ptxprobe.toolchain import tools as toolchain

    for rec in _installed("13.5.37"):
        yield toolchain.identify(rec.path, "ptxas", "ptxprobe-cache")


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """ptxprobe's wheel, built once per session without the network from a copy of what the build reads (a
    build/ left in the checkout would leak into it)."""
    root = Path(__file__).resolve().parent.parent
    src, out = tmp_path_factory.mktemp("wheel-src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, src / name)
    for name in ("ptxprobe", "kernels"):
        shutil.copytree(root / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    (wheel,) = out.glob("ptxprobe-*.whl")
    return wheel
