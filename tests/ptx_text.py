"""Test helper: two emissions of one kernel compared as text, what may differ between them left out."""

import re

_COMMENT_RE = re.compile(r"//.*$", re.MULTILINE)
_FILE_RE = re.compile(r'^(\s*\.file\s+\d+\s+)"[^"]*"(.*)$', re.MULTILINE)


def normalize(ptx: str) -> str:
    """Drop what may differ between two emissions of one kernel: comments, ``.file`` paths, blank space."""
    text = _COMMENT_RE.sub("", ptx)
    text = _FILE_RE.sub(lambda m: f'{m.group(1)}"<file>"', text)
    return "\n".join(ln.rstrip() for ln in text.splitlines() if ln.strip())
