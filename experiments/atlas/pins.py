"""A pinned file of the atlas's corpus, fetched once by pip and checked against the sha256 corpus.toml pins."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path


def fetch_pinned(pip: str, file: str, sha256: str, downloads: Path) -> Path:
    """``downloads/file`` (pip downloads ``pip`` there when missing), refused when its sha256 is not ``sha256``."""
    path = downloads / file
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(downloads), pip],
                       check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{path}: sha256 {digest}, corpus.toml pins {sha256}")
    return path
