"""A user's kernel as an experiment holds it: the file (or Triton function), the entry chosen in it, the spec that
says how it launches. Typed inside the tool; the ``file[:entry][=spec]`` spelling of the command line (``-s
ptx_files=...``), of experiment files and of recorded manifests is read (``KernelItem.parse``) and written
(``KernelItem.spelled``) here alone, so an entry or a path is never split again on its way through."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# the experiment axes that hold a user's kernels, by the kind of input
USER_AXES = ("ptx_files", "cubin_files", "cu_files", "lib_files", "triton_functions")


@dataclass(frozen=True)
class KernelItem:
    """One user kernel input. ``path``: a PTX, cubin, ``.cu`` or library file; for a Triton function its
    ``module.py:function`` (a module path and a function, never an entry)."""

    path: str
    entry: str | None = None  # the kernel chosen in the file (a name, a mangled symbol or a glob); None: every one
    spec: str | None = None  # the launch spec (TOML or JSON) that goes with it

    @classmethod
    def parse(cls, axis: str, text: str) -> KernelItem:
        """The spelling ``target[=spec]`` of ``axis``; the target is ``file[:entry]``, or for ``triton_functions``
        ``module:function``."""
        target, spec = split_spec(text)
        if axis == "triton_functions":
            return cls(target, None, spec)
        path, entry = split_entry(target)
        return cls(path, entry, spec)

    @classmethod
    def of(cls, axis: str, value: KernelItem | str) -> KernelItem:
        return value if isinstance(value, KernelItem) else cls.parse(axis, str(value))

    def spelled(self) -> str:
        """As the command line and experiment files spell it (what manifests record)."""
        return self.path + (f":{self.entry}" if self.entry else "") + (f"={self.spec}" if self.spec else "")

    def __str__(self) -> str:
        return self.spelled()


def split_spec(item: str) -> tuple[str, str | None]:
    """``target=spec.toml`` -> (target, spec path); a bare target has no spec."""
    target, eq, spec = item.rpartition("=")
    return (target, spec) if eq else (item, None)


def _is_path(text: str, file: bool = False) -> bool:
    """Whether ``text`` names an existing path (a file): a text the OS cannot take as a path (a mangled entry of
    thousands of characters after the colon, longer than a file name may be) names none."""
    try:
        return Path(text).is_file() if file else Path(text).exists()
    except OSError:
        return False


def split_entry(target: str) -> tuple[str, str | None]:
    """``file.cu:entry`` -> (file, entry). The path is the first prefix before a colon that is a file, so an entry
    may hold colons itself (``tile::ffma_tile<float, 128>``); for a path that does not exist (said later as such), a
    colon-free, Windows-free path has no entry."""
    if _is_path(target):
        return target, None
    for i, ch in enumerate(target):
        if ch == ":" and i and _is_path(target[:i], file=True):
            return target[:i], target[i + 1 :] or None
    path, sep, entry = target.rpartition(":")
    if sep and path and not entry.endswith((".ptx", ".cu", ".cubin", ".cuh")) and "/" not in entry:
        return path, entry
    return target, None
