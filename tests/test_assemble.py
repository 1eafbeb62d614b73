"""ptxas runs for real; crashes, hangs, failures and version mismatches become result rows."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ptxprobe.binary import cubin
from ptxprobe.core import cache as cache_mod
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import CubinError, ToolNotFound
from ptxprobe.toolchain import assemble
from ptxprobe.toolchain import tools as toolchain

pytestmark = pytest.mark.integration


def test_real_ptxas_resources_match_cubin(emitted):
    e = emitted("fp16", "sm_90a")
    tool = toolchain.triton_ptxas("sm_90a")
    art = assemble.assemble(e.ptx, "sm_90a", tool, cache=Cache(enabled=False))
    assert art.ok, art.stderr
    rep = art.reports["attention"]
    facts = cubin.read_cubin(art.cubin())
    k = facts.kernel("attention")
    assert rep.registers == k.regcount and rep.registers > 32
    assert rep.spill_store_bytes == 0 and rep.stack_bytes == 0
    assert k.n_instructions * 16 == k.text_bytes and k.capmerc_bytes == 0
    assert facts.arch == "sm_90"


def test_parse_verbose_old_and_new_wording():
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k1' for 'sm_80'
ptxas info    : Function properties for k1
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, 384 bytes cmem[0], 12 bytes cmem[2]
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]
"""
    r = assemble.parse_verbose(text)
    assert r["k1"].registers == 40 and r["k1"].stack_bytes == 16 and r["k1"].spill_store_bytes == 8
    assert r["k1"].cmem_bytes == {0: 384, 2: 12}
    assert r["k2"].barriers == 1 and r["k2"].smem_bytes == 1024


@pytest.mark.parametrize("behaviour,status", [("crash", "crashed"), ("hang", "timeout"), ("fail", "failed")])
def test_misbehaving_ptxas_is_a_result(emitted, fake_ptxas, behaviour, status):
    tool = toolchain.identify(fake_ptxas(behaviour), "ptxas", "test")
    assert tool.version == "12.8.93"
    art = assemble.assemble(emitted("fp16", "sm_90a").ptx, "sm_90a", tool, timeout=2, cache=Cache(enabled=False))
    assert art.status == status
    assert art.cubin_path is None
    assert "starting" in art.stderr or status == "timeout"
    if status == "timeout":
        assert art.seconds < 30


def test_crash_is_cached_but_timeout_is_not(emitted, fake_ptxas, tmp_path):
    cache = Cache(tmp_path)
    crash = toolchain.identify(fake_ptxas("crash"), "ptxas", "test")
    assemble.assemble(emitted("fp16", "sm_90a").ptx, "sm_90a", crash, cache=cache)
    again = assemble.assemble(emitted("fp16", "sm_90a").ptx, "sm_90a", crash, cache=cache)
    assert again.cached and again.status == "crashed"
    hang = toolchain.identify(fake_ptxas("hang"), "ptxas", "test")
    first = assemble.assemble(emitted("fp16", "sm_90a").ptx, "sm_90a", hang, timeout=1, cache=cache)
    second = assemble.assemble(emitted("fp16", "sm_90a").ptx, "sm_90a", hang, timeout=1, cache=cache)
    assert first.status == second.status == "timeout" and not second.cached


def test_newer_ptx_version_is_lowered_when_possible(emitted):
    tool = toolchain.triton_ptxas("sm_90a")
    top = toolchain.max_ptx_isa(tool)
    ptx = re.sub(r"\.version \d+\.\d+", ".version 9.9", emitted("fp16", "sm_90a").ptx, count=1)
    art = assemble.assemble(ptx, "sm_90a", tool, cache=Cache(enabled=False))
    assert art.ok, art.stderr
    assert art.note == f"lowered .version 9.9 -> {top[0]}.{top[1]} for ptxas {tool.version}"


def test_feature_of_newer_isa_gives_clear_unsupported_status():
    """PTX that really needs ISA 8.6 (sm_100a's tcgen05) cannot be lowered for ptxas 12.4-era ISA."""
    tool = toolchain.triton_ptxas("sm_90a")  # 12.8: max ISA 8.7
    ptx = """.version 9.9
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  prefetch.tensormap.bogus_future_feature [%rd1];
  ret;
}
"""
    art = assemble.assemble(ptx, "sm_90a", tool, cache=Cache(enabled=False))
    assert art.status in ("unsupported_ptx", "failed")
    assert art.note and "lowered .version 9.9" in art.note
    assert art.stderr.strip()


def test_missing_tool_is_a_clear_error(tmp_path):
    with pytest.raises(ToolNotFound):
        toolchain.identify(tmp_path / "no-such-ptxas", "ptxas", "test")
    with pytest.raises(ToolNotFound, match="no ptxas 7.5"):
        toolchain.select_ptxas("sm_90a", "7.5")


def test_wrapper_scripts_are_followed(tmp_path):
    real = toolchain.triton_ptxas("sm_90a")
    wrapper = tmp_path / "ptxas"
    wrapper.write_text(f'#!/bin/sh\nexec "{real.path}" "$@"\n')
    wrapper.chmod(0o755)
    t = toolchain.identify(wrapper, "ptxas", "PATH")
    assert t.path == real.path and t.sha256 == real.sha256 and t.invoked == str(wrapper)


def test_discover_finds_triton_tools():
    tools = toolchain.discover()
    origins = {(t.kind, t.origin) for t in tools}
    assert ("ptxas", "triton") in origins and ("ptxas", "triton-blackwell") in origins
    assert ("nvdisasm", "triton") in origins and ("cuobjdump", "triton") in origins
    bw = toolchain.triton_ptxas("sm_100a")
    assert toolchain.supports_arch(bw, "sm_100a")
    # the release the binary itself reports (Triton 3.6 bundles 12.9.86 for Blackwell, 3.9 13.4.59)
    said = subprocess.run([bw.path, "--version"], capture_output=True, text=True).stdout
    assert re.search(r"V(\d+\.\d+\.\d+)", said).group(1) == bw.version


def test_cubin_eiattr_names_agree_with_cuobjdump(emitted):
    """cuobjdump -elf is the oracle for EIATTR decoding, on Hopper and Blackwell cubins."""
    cuobjdump = toolchain.find_tool("cuobjdump")
    for arch in ("sm_90a", "sm_100a"):
        art = assemble.assemble(emitted("fp8e5", arch).ptx, arch, toolchain.triton_ptxas(arch))
        facts = cubin.read_cubin(art.cubin())
        out = subprocess.run([cuobjdump.path, "-elf", art.cubin_path], capture_output=True, text=True).stdout
        section = out.split("\n.nv.info.attention\n")[1].split("\n.")[0]
        # a record this cuobjdump cannot name ("unknown Attribute", ptxas 13.4 writes some) we name by its code
        oracle = re.findall(r"Attribute:\s+(EIATTR_\w+|unknown Attribute)", section)
        mine = [a.name for a in facts.kernel("attention").attrs]
        assert [("unknown Attribute" if re.fullmatch(r"EIATTR_0x[0-9a-f]+", n) else n) for n in mine] == oracle
        glob = out.split("\n.nv.info\n")[1].split("\n.")[0] if "\n.nv.info\n" in out else ""
        assert [a.name for a in facts.global_attrs] == re.findall(r"Attribute:\s+(EIATTR_\w+)", glob)
        if arch == "sm_100a":
            assert facts.kernel("attention").capmerc_bytes > 0
            assert facts.tkinfo.get("tool") == "ptxas-blackwell"


def test_bad_cubins(tmp_path):
    with pytest.raises(CubinError, match="not an ELF"):
        cubin.read_cubin(b"hello")
    with pytest.raises(CubinError):
        cubin.read_cubin(b"\x7fELF" + b"\x02\x01\x01" + b"\x00" * 20)
    with pytest.raises(CubinError, match="truncated"):
        cubin.parse_eiattrs(bytes([4, 0x2F, 8, 0, 1, 2]))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_is_discovered():
    assert toolchain.find_tool("nvcc").kind == "nvcc"


def test_a_hanging_arch_probe_is_an_error_and_never_cached_as_unsupported(tmp_path):
    from ptxprobe.core.errors import ToolFailed
    from tests.conftest import write_script

    fake = write_script(tmp_path / "ptxas-probe-hang", """
case "$1" in --version) echo "Cuda compilation tools, release 12.8, V12.8.93"; exit 0;; esac
exec sleep 30
""")
    tool = toolchain.identify(fake, "ptxas", "user")
    for _ in range(2):  # asked twice: the hang was not remembered as "unsupported"
        with pytest.raises(ToolFailed, match="could not be asked about sm_90a"):
            toolchain.supports_arch(tool, "sm_90a", timeout=1.0)
    caps = Cache().get_json("ptxas-caps", tool.sha256)
    assert caps is None or "sm_90a" not in caps["archs"]


def test_a_13x_release_installs_from_its_wheel_and_is_identified(installed_ptxas_13, capsys):
    from ptxprobe.cli import main

    rec = installed_ptxas_13
    assert rec.version == "13.0.88" and rec.dist == "nvidia-cuda-nvcc" and len(rec.wheel_sha256) == 64
    tool = toolchain.identify(rec.path, "ptxas", "ptxprobe-cache")
    assert tool.sha256 == rec.sha256 == cache_mod.sha256_file(rec.path)
    assert toolchain.max_ptx_isa(tool) >= (9, 0) and toolchain.supports_arch(tool, "sm_100a")
    assert main(["toolchain", "install", "13.0.88", "--json"]) == 0  # installed already: recorded, not fetched
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["installed"][0]["sha256"] == rec.sha256 and doc["missing"] == []


def test_all_names_every_release_on_pypi():
    assert len(toolchain.RELEASES) == 34 and toolchain.RELEASES[0] == "12.0.76" and toolchain.RELEASES[-1] == "13.5.37"
    assert toolchain.expand_versions(["12.8"]) == ["12.8.61", "12.8.93"]
    assert toolchain.expand_versions(["all", "12.4.131"]) == list(toolchain.RELEASES)


def test_a_version_prefix_means_the_newest_release_of_it():
    """``toolchain install 12.6`` installs 12.6.20 … 12.6.85: ``-s ptxas=12.6`` then means 12.6.85, not the first
    found; a whole version means itself; one release in two places: the first found."""
    def tool(version, origin):
        return toolchain.Tool("ptxas", f"/{origin}/{version}/ptxas", f"/{origin}/{version}/ptxas", origin, version,
                              version.replace(".", "") + origin)

    tools = [tool("12.6.20", "pip"), tool("12.6.85", "pip"), tool("12.6.77", "pip"), tool("12.6.85", "PATH"),
             tool("12.8.93", "triton")]
    assert [t.path for t in toolchain.select_ptxas("sm_90a", "12.6", tools)] == ["/pip/12.6.85/ptxas"]
    assert toolchain.select_ptxas("sm_90a", "12.6.20", tools)[0].version == "12.6.20"
    assert toolchain.select_ptxas("sm_90a", "12", tools)[0].version == "12.8.93"
