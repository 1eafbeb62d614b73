"""ptxas-scan on real ptxas binaries (triton's and a pip-wheel release), and on bad inputs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ptxprobe.cli import main
from ptxprobe.toolchain import scan
from ptxprobe.toolchain import tools as toolchain

pytestmark = pytest.mark.integration


def _bytes_at(path: str, address: int, n: int) -> bytes:
    """``n`` bytes of the file at a virtual address, through its program headers (pyelftools, not scan's reader)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        (seg,) = [g for g in elf.iter_segments() if g["p_type"] == "PT_LOAD"
                  and g["p_vaddr"] <= address < g["p_vaddr"] + g["p_filesz"]]
        f.seek(seg["p_offset"] + address - seg["p_vaddr"])
        return f.read(n)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])  # triton's ptxas and ptxas-blackwell
def test_cutlass_strstr_site_is_found(arch):
    tool = toolchain.triton_ptxas(arch)
    r = scan.scan(tool.path)
    cut = [s for s in r.sites if s.literal == "cutlass"]
    assert cut, r.literals
    site = cut[0]
    assert site.function == "strstr" and site.argument == 1  # strstr(name, "cutlass")
    assert site.reference_address < site.call_address <= site.reference_address + 16
    assert site.context[-1].endswith(f"call {r.imports['strstr']}")
    assert any(hex(site.literal_address) in line for line in site.context)
    # the literal really is there in the file at that address, NUL-terminated (ptxas 13.3 packs it right after
    # other data, so no NUL before it)
    assert _bytes_at(tool.path, site.literal_address, 8) == b"cutlass\0"
    assert r.seconds < 20


def test_scan_of_a_pip_wheel_ptxas(installed_ptxas_124):
    r = scan.scan(installed_ptxas_124.path)
    assert "cutlass" in r.literals
    assert {"strstr", "strcmp"} <= set(r.imports)


def test_across_versions_and_templates(installed_ptxas_124):
    results = [(t.version, scan.scan(t.path)) for t in (installed_ptxas_124, toolchain.triton_ptxas("sm_100a"))]
    table = {row["literal"]: row for row in scan.across_versions(results)}
    assert table["cutlass"]["first"] == installed_ptxas_124.version
    tmpl = scan.name_templates(["cutlass", "cub", "Hash:", ".nv.constant0", "x"])
    assert tmpl == ["cub_{base}", "cutlass_{base}"]


def test_bad_inputs(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(scan.ScanError, match="not an ELF"):
        scan.scan(text)
    wrapper = tmp_path / "ptxas"
    wrapper.write_text('#!/bin/sh\nexec /nonexistent/ptxas "$@"\n')
    wrapper.chmod(0o755)
    with pytest.raises(scan.ScanError, match="shell script"):
        scan.scan(wrapper)
    real = toolchain.triton_ptxas("sm_90a").path
    good_wrapper = tmp_path / "ptxas-wrapped"
    good_wrapper.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
    good_wrapper.chmod(0o755)
    assert "cutlass" in scan.scan(good_wrapper).literals
    truncated = tmp_path / "ptxas-truncated"
    truncated.write_bytes(open(real, "rb").read()[: 1 << 20])
    with pytest.raises(scan.ScanError, match="truncated|malformed"):
        scan.scan(truncated)
    with pytest.raises(scan.ScanError, match="no such file"):
        scan.scan(tmp_path / "missing")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_binary_without_compare_imports_gives_a_note(tmp_path):
    src = tmp_path / "p.c"
    src.write_text("int main(void){return 0;}\n")
    exe = tmp_path / "p"
    subprocess.run(["gcc", "-O1", "-s", str(src), "-o", str(exe)], check=True)
    r = scan.scan(exe)
    assert r.sites == () and "no PLT imports" in r.note


def test_cli_scan_json(capsys):
    assert main(["ptxas-scan", toolchain.triton_ptxas("sm_90a").path, "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert any(s["literal"] == "cutlass" and s["function"] == "strstr" for s in out[0]["sites"])
