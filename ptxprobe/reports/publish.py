"""A report's files appear together or not at all: they are written into a folder beside the output directory and
moved into it at the end, so a full disk or a Ctrl-C leaves the earlier report (or nothing), never part of one."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from ptxprobe.core.errors import output_failure

RECORD = "report.json"  # every report writes it: a folder holding it is an earlier report


class ReportFiles:
    """The files of one report, staged in ``.<out>.*`` beside ``out`` (same file system: moving them is a rename)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".part"))
        except OSError as exc:
            raise output_failure(out, _without_name(exc), "output directory ") from None
        umask = os.umask(0)
        os.umask(umask)
        self.staging.chmod(0o777 & ~umask)  # mkdtemp's folder is private; the report's directory is not

    def write(self, name: str, text: str) -> None:
        """``text`` as ``name`` of the report; a failure names the file the user asked for, not the staged one."""
        try:
            (self.staging / name).write_text(text)
        except OSError as exc:
            raise output_failure(self.out / name, _without_name(exc)) from None

    def publish(self) -> None:
        """Put the staged report in place; a Ctrl-C waits. A new or empty ``out``, or an earlier report (it holds
        ``RECORD``), is replaced as a whole folder (the earlier one back in place if that fails, and none of its
        files left to mix with the new ones); a folder of other files gets the report's files beside them."""
        with _no_interrupt():
            try:
                if not self.out.exists() or (self.out.is_dir() and not any(self.out.iterdir())):
                    os.replace(self.staging, self.out)
                    return
                if (self.out / RECORD).is_file():
                    self._swap()
                    return
                for f in sorted(self.staging.iterdir()):
                    os.replace(f, self.out / f.name)
                self.staging.rmdir()
            except OSError as exc:
                self.discard()
                raise output_failure(self.out, _without_name(exc), "output directory ") from None

    def _swap(self) -> None:
        """The earlier report folder set aside, the new one renamed into place, the earlier one removed."""
        old = self.staging.with_name(self.staging.name.removesuffix(".part") + ".old")
        os.replace(self.out, old)
        try:
            os.replace(self.staging, self.out)
        except OSError:
            os.replace(old, self.out)  # the earlier report, whole, as it was
            raise
        shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def __enter__(self) -> ReportFiles:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.publish()
        else:
            self.discard()


def _without_name(exc: OSError) -> OSError:
    """The error's reason without the staged path it carries (``output_failure`` then names the user's path)."""
    return OSError(exc.errno, exc.strerror or str(exc))


@contextlib.contextmanager
def _no_interrupt():
    """SIGINT ignored while the report is moved into place (only the main thread may set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
