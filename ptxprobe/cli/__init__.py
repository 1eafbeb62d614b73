"""The ``ptxprobe`` command: parses arguments, calls the stages, renders their records.

Exit codes, the same for every command:

    0    success, and nothing differs
    1    ran, and found differences (a name changes the code) or a divergence (repro, rename check)
    2    bad usage or bad input, in the words of whatever rejected it: a bad option or spec value (the key, the
         value and what is expected), a kernel of yours that does not compile (the compiler's reason and the
         source line), an output path that cannot be written (read-only, not a directory, an existing file)
    3    a tool or the environment failed: ptxas/nvcc crashed, hung or refused, a tool is missing, the disk is
         full (the path is named; what was written is kept and a re-run resumes)
    4    internal error: only a ptxprobe bug (run with -v for the traceback)
    5    tune and apply: the race's choice was not confirmed on fresh rounds (yours stays; tuned.json says why)
    6    tune and apply: the choice was measured slower than yours on fresh rounds
    130  interrupted (Ctrl-C); what finished is kept
    141  the output pipe was closed early (``| head``)
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import sys

from ptxprobe.core.errors import (
    ClusterError,
    DiskFull,
    PtxprobeError,
    SassParseError,
    ToolFailed,
    ToolNotFound,
    output_failure,
)

OK, FOUND_DIFFERENCES, USAGE, TOOL_FAILED, INTERNAL, INTERRUPTED, PIPE_CLOSED = 0, 1, 2, 3, 4, 130, 141
CHOICE_UNCONFIRMED, CHOICE_SLOWER = 5, 6  # tune, apply: fresh rounds did not confirm the choice, or found it slower
_TOOL_ERRORS = (ToolNotFound, ToolFailed, SassParseError, ClusterError, DiskFull)


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


def _as_reported(exc: BaseException) -> BaseException:
    """An OSError that names its file (or a full disk) is the environment or the input, not a bug: said as such."""
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError) and (
            exc.filename or exc.errno in (errno.ENOSPC, errno.EDQUOT)):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return output_failure(exc.filename or "the output", exc)
        return PtxprobeError(f"{exc.filename}: {exc.strerror or exc}")
    return exc


def _fail(message: str, code: int, kind: str, as_json: bool) -> int:
    """One line on stderr; under --json also the one JSON document on stdout that says the same."""
    print(f"ptxprobe: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": message, "exit_code": code, "kind": kind}), flush=True)
    return code


FLAG_VALUED = ("--flags", "--options")  # options whose value is ptxas's own options: it starts with "-"


def _flag_values_joined(words: list[str]) -> list[str]:
    """``--flags -O2`` read as ``--flags=-O2``: argparse would take ``-O2`` for an option of its own."""
    out, i = [], 0
    while i < len(words):
        if words[i] in FLAG_VALUED and i + 1 < len(words) and words[i + 1].startswith("-"):
            out.append(f"{words[i]}={words[i + 1]}")
            i += 2
            continue
        out.append(words[i])
        i += 1
    return out


def _parse(parser, argv: list[str] | None):
    """The parsed arguments, or the exit code of --help (0) or a usage error (2; one JSON document under --json)."""
    words = list(sys.argv[1:] if argv is None else argv)
    program = None
    if "--" in words:  # what follows -- is a program's command line, never ptxprobe's options
        cut = words.index("--")
        words, program = words[:cut], words[cut + 1:]
    words = _flag_values_joined(words)
    as_json = "--json" in words
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err) if as_json else contextlib.nullcontext():
            args = parser.parse_args(words)
            if program is not None:
                if not hasattr(args, "program"):
                    parser.error(f"unrecognized arguments: -- {' '.join(program)}".rstrip())
                if args.program:
                    parser.error(f"give the program once, after -- (also got {' '.join(args.program)!r} before it)")
                args.program = program
            return args, None
    except SystemExit as exc:
        if not as_json:
            return None, int(exc.code or 0)
        sys.stderr.write(err.getvalue())
        if not exc.code:
            return None, 0

        text = err.getvalue().strip()
        print(json.dumps({"error": text.splitlines()[-1] if text else "bad usage", "exit_code": USAGE,
                          "kind": "UsageError"}), flush=True)
        return None, USAGE


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, code = _parse(parser, argv)
    if args is None:
        return code
    _setup_logging(getattr(args, "verbose", 0) - getattr(args, "quiet_level", 0))
    log = logging.getLogger("ptxprobe")
    as_json = bool(getattr(args, "json", False))
    try:
        try:
            return args.func(args)
        except OSError as exc:
            reported = _as_reported(exc)
            if reported is exc:
                raise
            raise reported from exc
    except KeyboardInterrupt:
        return _fail("interrupted", INTERRUPTED, "KeyboardInterrupt", as_json)
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return PIPE_CLOSED
    except PtxprobeError as exc:
        log.debug("traceback", exc_info=True)  # -vv shows where it was raised
        code = _fail(f"{type(exc).__name__}: {_one_line(exc)}", exit_code_of(exc), type(exc).__name__, as_json)
        for more in str(exc).strip().splitlines()[1:6]:
            print(f"  {more}", file=sys.stderr)
        return code
    except Exception as exc:  # a bug: one line, the traceback with -v
        log.info("traceback", exc_info=True)  # -v shows it
        return _fail(f"internal error: {type(exc).__name__}: {_one_line(exc)} (run with -v for the traceback)",
                     INTERNAL, type(exc).__name__, as_json)


def run() -> int:
    """The ``ptxprobe`` command: ``main``, then what is still buffered written out while the pipe is known to be
    open or closed (a reader that stops early, ``| head``, makes it 141, not the exit code of the answer)."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(devnull, stream.fileno())
        return PIPE_CLOSED
    return code


if __name__ == "__main__":
    sys.exit(run())
