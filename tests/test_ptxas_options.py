"""ptxas options as sweep axes: learnt from each ptxas's --help, control files keyed by content."""

from __future__ import annotations

import json
import os

import pytest

from ptxprobe.core.errors import SpecError
from ptxprobe.static.experiment import load_experiment, override, parse_assignments
from ptxprobe.toolchain.assemble import assembly_key, flag_file_digests, resolve_flag_files
from ptxprobe.toolchain.tools import find_tool, ptxas_options, triton_ptxas, unsupported_flags
from tests.conftest import REPRO_SMALL

pytestmark = pytest.mark.integration


def test_options_come_from_the_binarys_own_help():
    tool = find_tool("ptxas")
    opts = ptxas_options(tool)
    assert len(opts["long"]) > 30
    assert {"--register-usage-level", "--allow-expensive-optimizations", "--gpu-name"} <= set(opts["long"])
    assert "-O" in opts["short"]
    assert unsupported_flags(tool, ("-lineinfo", "-O2", "--register-usage-level=10", "--maxrregcount", "64")) == []
    assert unsupported_flags(tool, ("--no-such-option=1", "-Zzz")) == ["--no-such-option", "-Zzz"]


def test_an_option_a_ptxas_lacks_is_not_applicable_not_a_failure(tmp_path, installed_ptxas_124):
    from ptxprobe.core.cache import Cache
    from ptxprobe.static.sweep import run_sweep

    # ptxas 12.4 has no --split-compile, Triton's 12.8 has: 12.4's rows are not applicable, 12.8's are assembled
    exp = override(load_experiment(REPRO_SMALL), parse_assignments([
        "archs=sm_90a", "repeat=1", "names={base}", f"ptxas=triton,{installed_ptxas_124.path}",
        "flags=-lineinfo;-lineinfo --split-compile=0"]))
    res = run_sweep(exp, tmp_path / "out", cache=Cache(tmp_path / "cache"), progress=False)
    split = [r for r in res.rows if "--split-compile" in r["ptxas_flags"]]
    old = [r for r in split if r["ptxas_version"] == "12.4.131"]
    new = [r for r in split if r["ptxas_version"] != "12.4.131"]
    assert old and all(r["status"] == "unsupported_option" and r["verdict"] == "option_unsupported" for r in old)
    assert "--split-compile" in old[0]["error"] and "--help" in old[0]["error"]
    assert new and all(r["status"] == "ok" for r in new)
    assert res.failed == []  # not a failure: the sweep's exit code is not 3


def test_an_option_no_ptxas_of_the_sweep_has_is_bad_input(tmp_path):
    from ptxprobe.core.cache import Cache
    from ptxprobe.static.sweep import run_sweep

    exp = override(load_experiment(REPRO_SMALL),
                   parse_assignments(["archs=sm_90a", "repeat=1", "flags=-lineinfo --no-such-option=3"]))
    with pytest.raises(SpecError, match="--no-such-option is not an option of any ptxas"):
        run_sweep(exp, tmp_path / "out", cache=Cache(tmp_path / "cache"), progress=False)
    assert not (tmp_path / "out" / "variants.jsonl").exists()


def test_a_control_file_is_keyed_by_its_content_and_recorded(tmp_path, monkeypatch):
    ctl = tmp_path / "controls.acf"
    ctl.write_bytes(b"first")
    monkeypatch.chdir(tmp_path)
    flags = resolve_flag_files(("-lineinfo", "--apply-controls", "controls.acf"))
    assert flags[2] == str(ctl)  # absolute: ptxas runs in a scratch directory
    assert flag_file_digests(flags) == {str(ctl): __import__("hashlib").sha256(b"first").hexdigest()}
    k1 = assembly_key("p" * 64, "sm_90a", "t" * 64, flags, 0)
    ctl.write_bytes(b"second, longer")
    os.utime(ctl, ns=(1, 1))
    k2 = assembly_key("p" * 64, "sm_90a", "t" * 64, flags, 0)
    assert k1 != k2  # an edited control file is a new assembly, never a stale cache hit
    assert assembly_key("p" * 64, "sm_90a", "t" * 64, ("-lineinfo",), 0) == assembly_key(
        "p" * 64, "sm_90a", "t" * 64, ("-lineinfo",), 0)
    eq = resolve_flag_files(("--apply-controls=controls.acf",))
    assert eq == (f"--apply-controls={ctl}",)
    with pytest.raises(SpecError, match="needs an existing file"):
        resolve_flag_files(("--apply-controls", "missing.acf"))


def test_the_sweep_manifest_names_the_control_files(tmp_path, installed_ptxas_135):
    from ptxprobe.core.cache import Cache
    from ptxprobe.static.sweep import run_sweep

    ctl = tmp_path / "c.acf"
    ctl.write_bytes(b"not a real control file")
    exp = override(load_experiment(REPRO_SMALL), parse_assignments([
        "archs=sm_90a", "repeat=1", "names={base},cutlass_{base}", f"ptxas=triton,{installed_ptxas_135.path}",
        f"flags=-lineinfo --apply-controls {ctl}"]))
    res = run_sweep(exp, tmp_path / "out", cache=Cache(tmp_path / "cache"), progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["inputs"]["ptxas_flag_files"] == flag_file_digests(exp.flags[0])
    # Triton's ptxas (12.8 with Triton 3.6, 12.9 with 3.9) has no --apply-controls: not applicable; 13.5 has it and
    # rejects the invalid file in its own words
    by = {r["ptxas_version"]: r for r in res.rows}
    assert by[triton_ptxas("sm_90a").version]["status"] == "unsupported_option"
    assert by["13.5.37"]["status"] == "failed" and "controls file" in by["13.5.37"]["error"]
