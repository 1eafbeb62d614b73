"""``python -m ptxprobe.cli``: the same as the ``ptxprobe`` command."""

import sys

from ptxprobe.cli import main

sys.exit(main())
