"""``python -m ptxprobe.cli``: the same as the ``ptxprobe`` command."""

import sys

from . import main

sys.exit(main())
