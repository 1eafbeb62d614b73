"""The user's input files a run used, kept in its run directory by content, and laid out again to re-run it.

A sweep of a user's kernel reads files: a PTX file or cubin, a ``.cu`` and the headers of its own it includes,
a Triton module and the modules it imports from its own folder, a spec (and the reference module it names).
Each is copied once per content to ``inputs/<sha256>/<original name>`` and recorded in the manifest beside its
source (``manifest["inputs"][label]["files"]``: original absolute path, sha256, the kept copy, and its place in
the source's tree: its path relative to the folder all of that source's files share). ``stage`` lays each
source's files out again in that tree, so relative ``#include``s and sibling imports find each other, and gives
the experiment's user axes pointing at the copies: ``repro`` re-runs from them, in any directory, on any
machine with a copy of the run directory alone. Registered families are identified by ``kernel_sources``. A library
(``--lib``: a .so, fatbin or wheel, often hundreds of MB) is not copied: its sources keep no files, and the manifest
records its path and sha256 (``LibraryModuleSource.identity``); ``stage`` then gives None and the run is re-run from
the recorded paths.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ptxprobe.core.cache import Cache, sha256_file
from ptxprobe.core.items import KernelItem

INPUTS = "inputs"
AXIS_OF_KIND = {"ptx": "ptx_files", "cubin": "cubin_files", "cuda": "cu_files", "lib": "lib_files",
                "triton": "triton_functions"}


def keep_inputs(out: Path, sources: list, archs: tuple[str, ...], cache: Cache) -> dict[str, dict]:
    """Copy every user source's files into ``out/inputs`` (once per content); label -> what the manifest records."""
    kept: dict[str, dict] = {}
    for src in sources:
        files = list(dict.fromkeys(p.resolve() for p in src.input_files(archs, cache) if p.is_file()))
        if not files:
            continue
        root = Path(os.path.commonpath([p.parent for p in files]))
        spec = Path(src.spec_path).resolve() if getattr(src, "spec_path", None) else None
        records = []
        for i, p in enumerate(files):
            sha = sha256_file(p)
            role = "source" if i == 0 else "spec" if p == spec else "include"
            records.append({"role": role, "path": str(p), "sha256": sha, "kept": _keep(out, p, sha),
                            "tree": p.relative_to(root).as_posix()})
        target = src.path.rpartition(":") if src.kind == "triton" else (src.path, ":", src.entry or "")
        kept[src.label] = {"files": records, "entry": target[2] or None}
    return kept


def kept_contents(out: Path) -> set[str]:
    """The contents ``out/inputs`` holds now (their sha256 folders)."""
    folder = out / INPUTS
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def drop_kept_since(out: Path, had: set[str]) -> None:
    """Remove what ``keep_inputs`` added since ``had`` (a sweep refused before any work leaves its run as it was)."""
    for name in kept_contents(out) - had:
        shutil.rmtree(out / INPUTS / name, ignore_errors=True)
    if not had and (out / INPUTS).is_dir() and not any((out / INPUTS).iterdir()):
        (out / INPUTS).rmdir()


def _keep(out: Path, path: Path, sha: str) -> str:
    """``inputs/<sha256>/<name>``: a content already kept (under any name) is not copied again."""
    folder = out / INPUTS / sha
    there = sorted(folder.iterdir()) if folder.is_dir() else []
    if there:
        return there[0].relative_to(out).as_posix()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{path.name}.part"
    shutil.copyfile(path, tmp)
    os.replace(tmp, folder / path.name)
    return (folder / path.name).relative_to(out).as_posix()


@dataclass
class Staged:
    """The recorded experiment's user axes pointing at laid-out copies, and what changed at the original paths."""

    axes: dict[str, list[KernelItem]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # a copy's path (as the staged source names it) -> label
    notes: list[str] = field(default_factory=list)


def recorded_files(manifest: dict) -> dict[str, dict]:
    """label -> kept-input record of the sources whose files the run kept (none in runs made before it did)."""
    return {label: rec for label, rec in (manifest.get("inputs") or {}).items()
            if isinstance(rec, dict) and rec.get("files")}


def stage(run_dir: Path, manifest: dict, dest: Path) -> Staged | None:
    """Lay the kept inputs out under ``dest``; None when the run kept none (it is re-run from its recorded paths)."""
    recorded = recorded_files(manifest)
    users = [rec for rec in (manifest.get("inputs") or {}).values() if isinstance(rec, dict)
             and rec.get("kind") in AXIS_OF_KIND]
    if not recorded or len(recorded) < len(users):  # an older run, or one input it could not keep: as recorded
        return None
    out = Staged()
    for n, (label, rec) in enumerate(sorted(recorded.items())):
        tree = dest / str(n)
        placed = {}
        for f in rec["files"]:
            copy = run_dir / f["kept"]
            if not copy.is_file():
                raise FileNotFoundError(f"{copy}: the kept copy of {f['path']} is missing from the run directory")
            placed[f["role"], f["path"]] = target = tree / f["tree"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(copy, target)
            out.notes += _original_changed(f)
        main = next(p for (role, _), p in placed.items() if role == "source")
        spec = next((p for (role, _), p in placed.items() if role == "spec"), None)
        kind = rec.get("kind")
        spec = str(spec) if spec else None
        item = (KernelItem(f"{main}:{rec['entry']}", None, spec) if kind == "triton"
                else KernelItem(str(main), rec.get("entry"), spec))
        out.labels[item.path] = label
        out.axes.setdefault(AXIS_OF_KIND[kind], []).append(item)
    return out


def _original_changed(f: dict) -> list[str]:
    """A note when the file the run read is no longer at its path, or has other content now."""
    p = Path(f["path"])
    if not p.is_file():
        return [f"{p} is no longer there: re-ran with the copy kept in the run directory"]
    if sha256_file(p) != f["sha256"]:
        return [f"{p} now has other content than the run used: re-ran with the copy kept in the run directory"]
    return []
