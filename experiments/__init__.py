"""Our own study of the name effect: experiment definitions, committed results, analysis, findings.

Not part of the installed tool: the tool never imports it. Tests, the notebook and the findings generator do.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


DEFINITIONS = HERE / "definitions"


def definition(name: str) -> Path:
    """The study's experiment file ``experiments/definitions/<name>.toml``."""
    return DEFINITIONS / f"{name}.toml"
