"""Fetch the third-party kernel sources of sources.toml into external/ (git-ignored), checked by sha256.

    python experiments/external/fetch.py [--mirror OWNER/NAME=GIT_DIR ...] [--out external]

From GitHub (raw.githubusercontent.com at the pinned commit) by default; ``--mirror`` reads a
repository from a local git directory instead (``git show COMMIT:PATH``), for machines without
network. A file whose sha256 differs from the pinned one is refused (exit 3). Prints one line per
source; writes ``external/sources.json`` with what was fetched from where.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent


def fetch_one(src: dict, mirrors: dict[str, str]) -> bytes:
    if src["repo"] in mirrors:
        return subprocess.run(["git", "--git-dir", mirrors[src["repo"]], "show", f"{src['commit']}:{src['path']}"],
                              check=True, capture_output=True).stdout
    url = f"https://raw.githubusercontent.com/{src['repo']}/{src['commit']}/{src['path']}"
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", action="append", default=[], metavar="OWNER/NAME=GIT_DIR")
    ap.add_argument("--out", default="external")
    ap.add_argument("--only", action="append", default=[], help="fetch only these sources")
    a = ap.parse_args(argv)
    mirrors = dict(m.split("=", 1) for m in a.mirror)
    sources = tomllib.loads((HERE / "sources.toml").read_text())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    listing = out / "sources.json"
    record, bad = (json.loads(listing.read_text()) if listing.exists() else {}), 0
    for key, src in sources.items():
        if a.only and key not in a.only:
            continue
        try:
            data = fetch_one(src, mirrors)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"{key}: cannot fetch {src['repo']}@{src['commit'][:12]}:{src['path']} ({exc})", file=sys.stderr)
            bad += 1
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != src["sha256"]:
            print(f"{key}: sha256 {digest} is not the pinned {src['sha256']}; refused", file=sys.stderr)
            bad += 1
            continue
        dest = out / src.get("dest", f"{key}.py")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.parent != out:  # a package directory (helpers/): importable as the example expects
            (dest.parent / "__init__.py").touch()
        dest.write_bytes(data)
        record[key] = {**src, "file": str(dest), "via": "mirror" if src["repo"] in mirrors else "github"}
        print(f"{key}: {src['repo']}@{src['commit'][:12]}:{src['path']} -> {dest}")
    listing.write_text(json.dumps(record, indent=1))
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
