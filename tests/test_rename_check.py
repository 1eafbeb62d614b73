"""The independent rename check rejects every planted fault, and accepts the renamer's (and nvcc's) real renames.

Each fault is planted into a correct rename; the check must say no and name the place.
The DWARF cases use nvcc -G PTX, which has no verbose-asm comments to lean on.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from ptxprobe.cli import main
from ptxprobe.ptx import rename
from ptxprobe.ptx.check import check_rename, parse
from tests.ptx_text import normalize
from tests.test_rename import NVCC_STYLE

pytestmark = pytest.mark.integration

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

DEBUG_KERNEL = """
__global__ void my_kernel(float* x, int n) {
  __shared__ float As[32];
  int i = threadIdx.x;
  As[i] = x[i];
  __syncthreads();
  if (i < n) x[i] = As[31 - i] * 2.0f;
}
"""
OLD, NEW = "_Z9my_kernelPfi", "_Z17cutlass_my_kernelPfi"


def _nvcc_debug_ptx(tmp_path, source: str, sub: str) -> str:
    d = tmp_path / sub
    d.mkdir(exist_ok=True)
    (d / "k.cu").write_text(source)
    subprocess.run(["nvcc", "-G", "-ptx", "-arch=compute_90a", "k.cu", "-o", "k.ptx"], cwd=d, check=True)
    return (d / "k.ptx").read_text()


@pytest.fixture
def debug_pair(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    base = _nvcc_debug_ptx(tmp_path, DEBUG_KERNEL, "a")
    return base, rename.rename_entry(base, OLD, NEW).ptx


def test_the_renamers_output_passes_and_its_sites_are_listed(debug_pair):
    base, renamed = debug_pair
    res = check_rename(base, renamed, OLD, NEW)
    assert res.equal, res.detail
    wheres = {s.where for s in res.sites}
    assert "code" in wheres and "dwarf:DW_AT_name" in wheres and "dwarf:DW_AT_MIPS_linkage_name" in wheres
    assert any(s.base == "my_kernel" and s.variant == "cutlass_my_kernel" for s in res.sites)


@needs_nvcc
def test_renamer_equals_nvccs_own_rename_of_the_source(tmp_path):
    """Differential oracle: nvcc compiling the renamed source (same file, same directory) gives the same PTX."""
    base = _nvcc_debug_ptx(tmp_path, DEBUG_KERNEL, "a")
    theirs = _nvcc_debug_ptx(tmp_path, DEBUG_KERNEL.replace("my_kernel", "cutlass_my_kernel"), "a")
    ours = rename.rename_entry(base, OLD, NEW).ptx
    assert normalize(ours) == normalize(theirs)
    assert check_rename(base, theirs, OLD, NEW).equal


def _plant_b32(ptx: str, section: str, index: int, delta: int) -> str:
    """Add ``delta`` to the index-th plain-number .b32 directive of a section."""
    head, sep, rest = ptx.partition(f".section\t{section}")
    body, close, tail = rest.partition("\n\t}")
    k = -1

    def bump(m):
        nonlocal k
        k += 1
        return f".b32 {int(m.group(1)) + delta}" if k == index else m.group(0)

    return head + sep + re.sub(r"\.b32 (\d+)\b", bump, body) + close + tail


def test_a_wrong_unit_length_is_rejected(debug_pair):
    base, renamed = debug_pair
    res = check_rename(base, _plant_b32(renamed, ".debug_info", 0, 8), OLD, NEW)
    assert not res.equal and "unit length" in res.detail


def test_a_wrong_die_reference_is_rejected(debug_pair):
    base, renamed = debug_pair
    res = check_rename(base, _plant_b32(renamed, ".debug_info", 1, 1), OLD, NEW)  # DW_AT_type of the first DIE
    assert not res.equal and ("not to a DIE" in res.detail or "DIE" in res.detail), res.detail


def test_a_dwarf_name_left_unrenamed_is_rejected(debug_pair):
    base, renamed = debug_pair
    new_bytes = ",".join(str(b) for b in b"cutlass_my_kernel")
    other = ",".join(str(b) for b in b"cutlass_my_kernex")  # the same length: the unit still decodes
    res = check_rename(base, renamed.replace(new_bytes, other, 1), OLD, NEW)
    assert not res.equal and "DW_AT_" in res.detail and "kernex" in res.detail
    # the old name left in place (lengths fixed up) is rejected too
    planted = _plant_b32(renamed.replace(new_bytes, ",".join(str(b) for b in b"my_kernel"), 1), ".debug_info", 0, -8)
    assert not check_rename(base, planted, OLD, NEW).equal


def test_a_changed_instruction_is_rejected():
    r = rename.rename_entry(NVCC_STYLE, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf").ptx
    res = check_rename(NVCC_STYLE, r.replace("ld.global.f32", "ld.global.nc.f32"), "_Z9my_kernelPf",
                       "_Z17cutlass_my_kernelPf")
    assert not res.equal and "ld" in res.detail and "line" in res.detail


def test_a_changed_parameter_type_is_rejected():
    r = rename.rename_entry(NVCC_STYLE, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf").ptx
    res = check_rename(NVCC_STYLE, r.replace(".param .u64", ".param .u32", 1), "_Z9my_kernelPf",
                       "_Z17cutlass_my_kernelPf")
    assert not res.equal and "u32" in res.detail


def test_a_mangled_length_prefix_that_is_not_the_rules_is_rejected():
    wrong = "_Z16cutlass_my_kernelPf"  # 17 characters follow, not 16
    planted = NVCC_STYLE.replace("_Z9my_kernelPf", wrong).replace("_ZZ9my_kernelPfE", "_ZZ16cutlass_my_kernelPfE")
    res = check_rename(NVCC_STYLE, planted, "_Z9my_kernelPf", wrong)
    assert not res.equal and "length prefix" in res.detail
    # a consistent name whose *local* has the wrong prefix
    r = rename.rename_entry(NVCC_STYLE, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf").ptx
    bad_local = r.replace("_ZZ17cutlass_my_kernelPfE2As", "_ZZ16cutlass_my_kernelPfE2As")
    res = check_rename(NVCC_STYLE, bad_local, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf")
    assert not res.equal and "_ZZ16" in res.detail


def test_a_missed_param_is_rejected():
    r = rename.rename_entry(NVCC_STYLE, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf").ptx
    planted = r.replace("[_Z17cutlass_my_kernelPf_param_0]", "[_Z9my_kernelPf_param_0]")
    res = check_rename(NVCC_STYLE, planted, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf")
    assert not res.equal and "_param_0" in res.detail and "the rule gives" in res.detail


def test_a_rename_of_something_else_is_rejected():
    plain = NVCC_STYLE.replace("_Z9my_kernelPf", "my_kernel").replace("_ZZ9my_kernelPfE", "_ZZ9my_kernelE")
    r = rename.rename_entry(plain, "my_kernel", "cutlass_my_kernel").ptx
    assert check_rename(plain, r, "my_kernel", "cutlass_my_kernel").equal
    res = check_rename(plain, r.replace("%tid.x", "%tid.y"), "my_kernel", "cutlass_my_kernel")
    assert not res.equal


def test_triton_ptx_with_verbose_comments_passes_and_a_planted_length_fails(emitted):
    base = emitted("fp16", "sm_90a").ptx
    renamed = rename.rename_entry(base, "attention", "cutlass_attention").ptx
    assert check_rename(base, renamed, "attention", "cutlass_attention").equal
    planted = re.sub(r"\.b32 (\d+)(\s+// Length of Unit)", lambda m: f".b32 {int(m.group(1)) + 4}{m.group(2)}",
                     renamed, count=1)
    assert planted != renamed
    assert not check_rename(base, planted, "attention", "cutlass_attention").equal


def test_dwarf_sections_decode_to_bytes_and_labels():
    p = parse(".version 8.0\n.target sm_90a\n.section .debug_str\n{\n$L__s0:\n.b8 104,105,0\n.b32 $L__s0\n}\n")
    data, relocs, _ = p.sections[".debug_str"]
    assert data == b"hi\x00\x00\x00\x00\x00" and relocs == [(0, 0, "$L__s0"), (3, 4, "$L__s0")]


def test_cli_check_rename_exit_codes(tmp_path, capsys):
    a, b = tmp_path / "a.ptx", tmp_path / "b.ptx"
    a.write_text(NVCC_STYLE)
    b.write_text(rename.rename_entry(NVCC_STYLE, "_Z9my_kernelPf", "_Z17cutlass_my_kernelPf").ptx)
    assert main(["check-rename", str(a), str(b)]) == 0
    assert "only name sites differ" in capsys.readouterr().out
    b.write_text(b.read_text().replace("bar.sync", "bar.arrive"))
    assert main(["check-rename", str(a), str(b), "--json"]) == 1
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["equal"] is False and "bar" in doc["detail"]


def test_a_kernel_named_like_an_instruction_is_renamed_and_checked():
    """``add`` is also the start of ``add.s64``: neither the renamer nor the check may take the mnemonic for it."""
    from tests.ptx_text import AXPY_PTX

    ptx = AXPY_PTX.replace("axpy", "add")
    assert "add.s64" in ptx
    renamed = rename.rename_entry(ptx, "add", "cutlass_add")
    assert "add.s64" in renamed.ptx and "cutlass_add.s64" not in renamed.ptx
    res = check_rename(ptx, renamed.ptx, "add", "cutlass_add")
    assert res.equal, res.detail


def test_a_truncated_or_lengthened_variant_is_rejected():
    """Token by token the variant agrees with the base as far as it goes: only the count tells a cut-off text."""
    from tests.ptx_text import AXPY_PTX

    renamed = rename.rename_entry(AXPY_PTX, "axpy", "cutlass_axpy").ptx
    assert check_rename(AXPY_PTX, renamed, "axpy", "cutlass_axpy").equal
    cut = renamed[: renamed.index("\tst.global.f32")]  # the store, the ret and the closing brace gone
    res = check_rename(AXPY_PTX, cut, "axpy", "cutlass_axpy")
    assert not res.equal and "base line" in res.detail
    longer = renamed + "\n.visible .entry extra()\n{\n\tret;\n}\n"
    res = check_rename(AXPY_PTX, longer, "axpy", "cutlass_axpy")
    assert not res.equal and "variant line" in res.detail
