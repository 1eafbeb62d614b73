"""The ``ptxprobe`` command: parses arguments, calls the stages, renders their records.

Exit codes, the same for every command:

    0    success, and nothing differs
    1    ran, and found differences (a name changes the code) or a divergence (repro, rename check)
    2    bad usage or bad input (a message says which)
    3    a tool or an assembly failed (ptxas/nvcc crashed, hung or refused; the message is shown)
    4    internal error (a bug: run with -v for the traceback)
    130  interrupted (Ctrl-C); what finished is kept
    141  the output pipe was closed early (``| head``)
"""

from __future__ import annotations

import logging
import os
import sys

from ptxprobe.core.errors import ClusterError, PtxprobeError, SassParseError, ToolFailed, ToolNotFound

OK, FOUND_DIFFERENCES, USAGE, TOOL_FAILED, INTERNAL, INTERRUPTED, PIPE_CLOSED = 0, 1, 2, 3, 4, 130, 141
_TOOL_ERRORS = (ToolNotFound, ToolFailed, SassParseError, ClusterError)


def exit_code_of(exc: BaseException) -> int:
    """A tool that is missing or failed: 3; any other error ptxprobe raises on purpose is bad input: 2."""
    if isinstance(exc, _TOOL_ERRORS):
        return TOOL_FAILED
    if isinstance(exc, PtxprobeError):
        return USAGE
    return INTERNAL


def build_parser():
    from ptxprobe.cli.parser import build_parser as build

    return build()


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING - 10 * verbosity
    logging.basicConfig(level=max(logging.DEBUG, min(logging.ERROR, level)), format="%(message)s",
                        stream=sys.stderr, force=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    _setup_logging(getattr(args, "verbose", 0) - getattr(args, "quiet_level", 0))
    log = logging.getLogger("ptxprobe")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("ptxprobe: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return PIPE_CLOSED
    except PtxprobeError as exc:
        print(f"ptxprobe: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        for more in str(exc).strip().splitlines()[1:6]:
            print(f"  {more}", file=sys.stderr)
        return exit_code_of(exc)
    except Exception as exc:  # a bug: one line, the traceback with -v
        log.info("traceback", exc_info=True)  # -v shows it
        print(f"ptxprobe: internal error: {type(exc).__name__}: {_one_line(exc)} (run with -v for the traceback)",
              file=sys.stderr)
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
