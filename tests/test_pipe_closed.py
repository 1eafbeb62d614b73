"""A reader that closes the pipe early (``| head``) ends a command with 141, never with an answer's exit code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("argv", [["kernels"], ["cache", "info"]])
def test_a_closed_pipe_is_141(argv, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "ptxprobe", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PTXPROBE_CACHE": str(tmp_path / "c")})
    proc.stdout.close()  # closed before the command writes its answer (it takes a while to start)
    assert proc.wait(timeout=120) == 141
