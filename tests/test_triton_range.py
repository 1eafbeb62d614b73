"""The Triton releases ptxprobe installs beside are the ones a recorded check found working.

experiments/results/2026-12-03-cpu-triton-range/summary.json holds, per Triton release, what the static tests and a
real sweep did in a fresh venv (docs/development.md says how to run it again). pyproject.toml's Triton requirement
admits exactly the releases whose record passed; the registry refuses the Gluon families on exactly the releases
where the record found them broken; CI installs the release the committed results were made with.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from ptxprobe.sources import catalog, registry

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "experiments/results/2026-12-03-cpu-triton-range"


def _summary() -> dict:
    return json.loads((STUDY / "summary.json").read_text())


def _declared(pyproject: str | None = None):
    deps = tomllib.loads(pyproject or (ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "triton"]
    return req.specifier


def admitted(spec, versions: dict) -> set[str]:
    return {v for v in versions if spec.contains(Version(v), prereleases=False)}


def test_the_declared_range_admits_exactly_the_releases_that_passed():
    versions = _summary()["versions"]
    passed = {v for v, r in versions.items() if r["passed"]}
    spec = _declared()
    assert admitted(spec, versions) == passed, f"pyproject says triton{spec}; the record passed {sorted(passed)}"
    # a release past the newest one checked is not admitted on trust
    newest = max(map(Version, versions))
    assert not spec.contains(Version(f"{newest.major}.{newest.minor + 1}.0"))


def test_a_wider_range_is_caught():
    """The planted fault: the lowest release the record failed, admitted by a wider range, fails the check above."""
    versions = _summary()["versions"]
    failed = sorted((v for v, r in versions.items() if not r["passed"]), key=Version)
    assert failed, "the record has no failing release to plant"
    text = (ROOT / "pyproject.toml").read_text()
    wider = re.sub(r'"triton[^"]*"', f'"triton>={failed[0]},<99"', text, count=1)
    assert wider != text
    assert admitted(_declared(wider), versions) != {v for v, r in versions.items() if r["passed"]}


def test_the_installed_triton_is_inside_the_range():
    assert _declared().contains(Version(md.version("triton")), prereleases=False)


def test_ci_installs_the_release_the_committed_results_used():
    pins = [Requirement(line) for line in (ROOT / "requirements-cpu.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    (pin,) = [r for r in pins if r.name == "triton"]
    (exact,) = [s.version for s in pin.specifier if s.operator == "=="]
    results = ROOT / "experiments/results"
    committed = {json.loads(p.read_text()).get("triton") for p in results.glob("*/manifest.json")}
    assert _summary()["reference"] == exact and exact in committed
    assert _summary()["versions"][exact]["passed"] and _declared().contains(exact)


def test_the_gluon_families_are_refused_where_the_record_found_their_api_gone():
    versions = _summary()["versions"]
    lo, hi = registry.GLUON_TRITON
    builds = {v for v in versions if lo <= Version(v).release[:2] < hi}
    assert builds == {v for v, r in versions.items() if r["gluon"] == "ok"}


def test_a_gluon_family_outside_its_triton_says_what_it_needs(monkeypatch):
    from ptxprobe.sources import registered_sources
    from ptxprobe.static.experiment import load_experiment

    monkeypatch.setattr(registry, "installed_triton", lambda: "3.99.0")
    with pytest.raises(registry.KernelUnavailable, match=r"attention_gluon needs Triton >=3\.\d+,<3\.\d+ .*3\.99\.0"):
        registry.family("attention_gluon")
    assert "attention" in registry.families() and "attention_gluon_ws" in catalog.family_catalog()[1]
    exp = load_experiment("default")
    kernels = {s.family_name for s in registered_sources(exp)}
    assert kernels == {"attention", "attention_cuda"}  # the Gluon ones left out (with a warning), the rest kept


# Gluon names a later Triton renamed or removed: the kernels reach them through kernels/gluon_api.py only
MOVED_GLUON_NAMES = ("thread_barrier(", "get_tmem_reg_layout", "async_copy_global_to_shared", "async_load(")


def moved_names_outside_the_api(root: Path) -> dict[str, list[str]]:
    """Per kernel source, the moved Gluon names it spells itself instead of taking them from gluon_api."""
    found = {}
    for p in sorted(root.glob("gluon_*.py")):
        if p.name == "gluon_api.py":
            continue
        text = p.read_text()
        hits = [n for n in MOVED_GLUON_NAMES if re.search(r"(?<![\w])(?:gl|tma|blackwell)\." + re.escape(n), text)
                or (n == "get_tmem_reg_layout" and n in text)]
        if hits:
            found[p.name] = hits
    return found


def test_the_gluon_kernels_spell_moved_names_only_through_gluon_api(tmp_path):
    assert moved_names_outside_the_api(ROOT / "kernels") == {}
    # the planted fault: one kernel calling gl.thread_barrier() itself (what broke it on Triton 3.7) is caught
    src = (ROOT / "kernels/gluon_attention.py").read_text()
    assert "    thread_barrier()" in src
    (tmp_path / "gluon_attention.py").write_text(src.replace("    thread_barrier()", "    gl.thread_barrier()", 1))
    assert moved_names_outside_the_api(tmp_path) == {"gluon_attention.py": ["thread_barrier("]}
