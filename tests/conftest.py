"""Shared fixtures: an isolated cache per test session, emitted PTX reused across tests."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("ptxprobe-cache")
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
    """A release's ptxas from its wheel, kept across test runs (PTXPROBE_TOOLCHAINS points there meanwhile)."""
    from ptxprobe.toolchain import tools as toolchain

    keep = Path.home() / ".cache" / "ptxprobe-test-toolchains"
    old = os.environ.get("PTXPROBE_TOOLCHAINS")
    os.environ["PTXPROBE_TOOLCHAINS"] = str(keep)
    try:
        rec = toolchain.install(version, ("ptxas",))[0]
    except Exception as exc:  # no network to PyPI: say so rather than fail obscurely
        pytest.skip(f"cannot install ptxas {version} from its wheel: {exc}")
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
