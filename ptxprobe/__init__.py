"""ptxprobe: what does ptxas do differently depending on a kernel's entry symbol name?

Pipeline, one module per stage, data flowing one way::

    registry -> emit -> rename -> toolchain -> assemble -> cubin -> sass -> diff -> run
             -> sweep / report / repro / cli
"""

__version__ = "0.1.0"

_API = ("sweep", "make_experiment", "open_run", "compare", "time_callable", "time_callables")


def __getattr__(name: str):
    """The public API (``ptxprobe.api``), imported on first use: ``import ptxprobe`` stays cheap for the CLI."""
    if name in _API:
        from ptxprobe import api

        return getattr(api, name)
    raise AttributeError(f"module 'ptxprobe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
