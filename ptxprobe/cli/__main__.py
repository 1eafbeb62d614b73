"""``python -m ptxprobe.cli``: the same as the ``ptxprobe`` command."""

import sys

from ptxprobe.cli import run

sys.exit(run())
