"""The cache key covers ptxprobe's own code: a changed reader recomputes what it derives, an unrelated change does not.

The fault this guards against was seen: after a change to ``INSTRUCTION_BYTES`` in the cubin reader, a sweep over
the same cache kept reporting the old instruction count (``cached: True``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ptxprobe
from ptxprobe.core.stages import STAGES, code_closure, code_fingerprint, stage_key
from tests.ptx_text import AXPY_PTX as PTX

pytestmark = pytest.mark.integration



def _package_copy(tmp_path: Path) -> Path:
    """A copy of the installed ptxprobe sources, importable through PYTHONPATH."""
    dest = tmp_path / "pkg" / "ptxprobe"
    shutil.copytree(Path(ptxprobe.__file__).parent, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def test_the_fingerprint_follows_the_modules_a_stage_imports_and_nothing_else(tmp_path):
    root = _package_copy(tmp_path)
    files = {p.relative_to(root).as_posix() for p in code_closure("ptxprobe.binary.cubin", root)}
    assert {"binary/cubin.py", "core/errors.py"} <= files and "cli/render.py" not in files
    before = code_fingerprint("ptxprobe.binary.cubin", root)
    _edit(root / "cli" / "render.py", "def ", "def _unused():\n    pass\n\n\ndef ")  # not imported by the reader
    code_fingerprint.cache_clear()
    assert code_fingerprint("ptxprobe.binary.cubin", root) == before
    _edit(root / "core" / "errors.py", "class ", "# a changed dependency\nclass ")  # imported: changes the key
    code_fingerprint.cache_clear()
    assert code_fingerprint("ptxprobe.binary.cubin", root) != before
    code_fingerprint.cache_clear()


def test_every_stage_but_assembly_is_keyed_on_its_code():
    for stage in STAGES.values():
        inputs = dict.fromkeys(stage.inputs, "x")
        keyed = stage_key(stage.name, **inputs)
        if stage.code is None:
            assert stage.name == "assemble"  # ptxas's output; what ptxprobe reads from it is derived on read
        else:
            assert code_fingerprint(stage.code) and keyed


def _sweep(pkg: Path, cache: Path, ptx: Path, out: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(pkg), "PTXPROBE_CACHE": str(cache)}
    argv = [sys.executable, "-m", "ptxprobe", "rename-sweep", "--ptx", str(ptx), "-s", "names={base},cutlass_{base}",
            "-s", "archs=sm_90a", "-s", "ptxas=triton", "-s", "repeat=1", "-o", str(out), "-j", "1", "-q", "--json"]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=pkg.parent)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return [json.loads(line) for line in (out / "variants.jsonl").read_text().splitlines()]


def test_a_changed_cubin_reader_recomputes_what_it_derives_from_a_cached_assembly(tmp_path):
    pkg = _package_copy(tmp_path).parent
    ptx, cache = tmp_path / "axpy.ptx", tmp_path / "cache"
    ptx.write_text(PTX)
    first = _sweep(pkg, cache, ptx, tmp_path / "a")
    _edit(pkg / "ptxprobe" / "binary" / "cubin.py", "INSTRUCTION_BYTES = 16", "INSTRUCTION_BYTES = 8")
    second = _sweep(pkg, cache, ptx, tmp_path / "b")
    by_name = {r["name_template"]: r for r in first}
    for row in second:
        was = by_name[row["name_template"]]
        assert row["cached"], "the assembly itself is keyed on PTX, ptxas and flags alone: it stays cached"
        assert row["n_instructions"] == 2 * was["n_instructions"], "the reader's change must reach the row"


def test_cache_info_and_clear_say_what_each_stage_holds(tmp_path, monkeypatch, capsys):
    from ptxprobe.cli import main
    from ptxprobe.core.cache import Cache

    monkeypatch.setenv("PTXPROBE_CACHE", str(tmp_path / "c"))
    cache = Cache()
    cache.put_json("rename", "ab" * 32, {"ptx": "x"})
    cache.put_json("cubin-facts", "cd" * 32, {"n": 1})
    cache.put_json("cubin-facts", "ef" * 32, {"n": 2})
    assert main(["cache", "info", "--json"]) == 0
    held = {n["namespace"]: n["entries"] for n in json.loads(capsys.readouterr().out)["namespaces"]}
    assert held == {"rename": 1, "cubin-facts": 2}
    assert main(["cache", "clear", "--stage", "cubin-facts", "--json"]) == 0
    capsys.readouterr()
    assert [u.namespace for u in cache.usage()] == ["rename"]
    assert main(["cache", "clear", "--stage", "no-such-stage"]) == 2
    assert "no stage no-such-stage" in capsys.readouterr().err
    assert [u.namespace for u in cache.usage()] == ["rename"], "a refused clear removes nothing"
