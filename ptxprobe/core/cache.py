"""Content-addressed cache: a key is the sha256 of *all* inputs (text, flags, tool hashes).

Writes go to a temporary file and are published with ``os.replace``, so a crash or two
concurrent writers never leave a half-written entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def default_root() -> Path:
    env = os.environ.get("PTXPROBE_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ptxprobe"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(**parts: Any) -> str:
    """Stable key over named inputs (order-independent, JSON-canonical)."""
    return sha256_text(json.dumps(parts, sort_keys=True, default=str))


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, with the mode any other file the process makes gets (mkstemp's temporary
    file is 0600: a run's manifest would be unreadable to the group that reads its other files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: put back at once
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class CacheUsage:
    """What one namespace of the cache holds (a stage's outputs, or the cubins)."""

    namespace: str
    entries: int
    bytes: int


class Cache:
    """Entries live in ``root/<namespace>/<key[:2]>/<key>/<file>``."""

    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True):
        self.root = Path(root) if root is not None else default_root()
        self.enabled = enabled

    def _dir(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key[:2] / key

    def get(self, namespace: str, key: str, name: str) -> bytes | None:
        if not self.enabled:
            return None
        path = self._dir(namespace, key) / name
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def put(self, namespace: str, key: str, name: str, data: bytes) -> Path:
        path = self._dir(namespace, key) / name
        if self.enabled:
            atomic_write(path, data)
        return path

    def usage(self) -> list[CacheUsage]:
        """Entries and bytes per namespace (nothing when the cache does not exist yet)."""
        out = []
        for ns in sorted(p for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else ():
            entries = [e for shard in ns.iterdir() if shard.is_dir() for e in shard.iterdir()]
            size = sum(f.stat().st_size for e in entries for f in e.rglob("*") if f.is_file())
            out.append(CacheUsage(ns.name, len(entries), size))
        return out

    def clear(self, namespaces: list[str] | None = None) -> list[CacheUsage]:
        """Remove these namespaces (default: all of them) and say what they held."""
        gone = [u for u in self.usage() if namespaces is None or u.namespace in namespaces]
        for u in gone:
            shutil.rmtree(self.root / u.namespace)
        return gone

    def get_json(self, namespace: str, key: str, name: str = "record.json") -> Any | None:
        raw = self.get(namespace, key, name)
        return None if raw is None else json.loads(raw)

    def put_json(self, namespace: str, key: str, value: Any, name: str = "record.json") -> None:
        self.put(namespace, key, name, json.dumps(value, sort_keys=True).encode())


def file_store(cache: Cache) -> Cache:
    """Where bytes that must exist as a file go (a cubin for cuobjdump, a library module's text): the cache itself,
    or with the cache off (``--no-cache``) one scratch folder of this process, so nothing is served to a later run
    and nothing is left behind: it is removed when the process exits (pool workers included)."""
    return cache if cache.enabled else _scratch_store()


@functools.cache
def _scratch_store() -> Cache:
    root = tempfile.mkdtemp(prefix="ptxprobe-scratch-")
    # multiprocessing's finalizers run at a pool worker's exit too (atexit handlers do not), and a forked child
    # clears the ones it inherits: each process removes only the folder it made
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(root, True), exitpriority=0)
    return Cache(root)
