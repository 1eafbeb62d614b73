"""The registry index: a warm sweep plans and finds its PTX without importing Triton, and never from a stale index."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ptxprobe.sources import catalog, registry
from ptxprobe.sources.registry import FamilyInfo, KernelConfig

pytestmark = pytest.mark.integration

SWEEP = ["rename-sweep", "-e", "default", "-s", "kernels=attention,attention_cuda", "-s", "archs=sm_90a",
         "-s", "dtypes=fp16", "-s", "head_dims=64", "-s", "causal=false", "-s", "repeat=1", "--no-run", "-q"]

# a ptxprobe run in a fresh process that says which of these it imported, with its rows
_PROBE = """
import json, sys
from ptxprobe.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "imported": sorted({m.split(".")[0] for m in sys.modules} & {"triton", "torch"})}))
"""


def _sweep(out, env) -> tuple[dict, list[dict]]:
    run = subprocess.run([sys.executable, "-c", _PROBE, *SWEEP, "-o", str(out)], env=env, capture_output=True,
                         text=True, timeout=600)
    said = json.loads(run.stdout.strip().splitlines()[-1])
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return said, rows


def _comparable(rows: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k not in ("run_at", "cached")} for r in rows),
                  key=lambda r: r["variant_id"])


def test_a_warm_sweep_of_registered_kernels_never_imports_triton(tmp_path):
    import os

    env = {**os.environ, "PTXPROBE_CACHE": str(tmp_path / "cache")}
    cold, cold_rows = _sweep(tmp_path / "cold", env)
    warm, warm_rows = _sweep(tmp_path / "warm", env)
    assert "triton" in cold["imported"]  # it compiled the Triton kernel
    assert warm["imported"] == [], warm  # planned from the index, its PTX found through the pointer
    assert all(r["cached"] for r in warm_rows) and cold["rc"] == warm["rc"]
    assert _comparable(warm_rows) == _comparable(cold_rows)
    # a Triton knob that changes code generation: another index, so the PTX is Triton's again, not the stale one
    fused = {r["variant_id"]: r["source_ptx_sha256"] for r in cold_rows if r["family"] == "attention"}
    unfused, rows = _sweep(tmp_path / "unfused", {**env, "TRITON_DEFAULT_FP_FUSION": "0"})
    assert "triton" in unfused["imported"]
    changed = {r["source_ptx_sha256"] for r in rows if r["family"] == "attention"}
    assert changed and not changed & set(fused.values())


def test_the_index_key_covers_the_kernel_sources_the_triton_and_its_knobs(monkeypatch):
    base = catalog.index_key()
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    knob = catalog.index_key()
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION")
    monkeypatch.setattr(registry, "installed_triton", lambda: "3.99.0")
    other_triton = catalog.index_key()
    monkeypatch.undo()
    catalog._index_key.cache_clear()  # the kernel files are read once per process
    monkeypatch.setattr(catalog, "kernel_source_hashes", lambda: {"kernels/triton_attention.py": "0" * 64})
    edited = catalog.index_key()
    catalog._index_key.cache_clear()
    assert len({base, knob, other_triton, edited}) == 4


def test_the_index_says_what_the_families_say(monkeypatch):
    infos, refused = catalog.family_catalog()
    fams, why = registry._load()
    assert {n: f.info for n, f in fams.items()} == infos and why == refused
    # a family's record survives the round trip through the cache, every field
    info = FamilyInfo("k", "cuda", ("fp16",), (64,), (KernelConfig(64, 64, 4, 2), KernelConfig(128, 64, 8, 3)),
                      KernelConfig(128, 64, 8, 3), ("sm_90a",))
    assert FamilyInfo.from_json(json.loads(json.dumps(info.to_json()))) == info
    # a Triton outside the Gluon range: the index under that version refuses them, the real one is untouched
    monkeypatch.setattr(registry, "installed_triton", lambda: "3.99.0")
    assert "attention_gluon" in catalog.family_catalog()[1]
    monkeypatch.undo()
    assert "attention_gluon" not in catalog.family_catalog()[1]
