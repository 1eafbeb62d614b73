"""One definition of "the same machine code" (``KernelFacts.machine_code_sha256``): launch metadata, constant-bank
contents and the callees' code count, the name does not, and ``diff`` and the static verdict decide with it."""

from __future__ import annotations

import io
import json

import pytest
from elftools.elf.elffile import ELFFile

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.binary.diff import DATA_PARTS, IDENTICAL, METADATA_ONLY, diff_cubins
from ptxprobe.core.cache import sha256_bytes
from ptxprobe.ptx.rename import rename_entry
from ptxprobe.static.verdicts import DIFFERS, SAME_CODE, derive
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import select_ptxas
from tests.ptx_text import AXPY_PTX as PTX
from tests.ptx_text import calling_ptx, module_with_trigger

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cubins():
    tool = select_ptxas("sm_90a", "triton")[0]
    texts = {"plain": PTX, "bounded": PTX.replace(")\n{", ")\n.maxntid 256, 1, 1\n{", 1),
             "renamed": rename_entry(PTX, "axpy", "xutlass_axpy").ptx}
    out = {}
    for label, text in texts.items():
        art = assemble(text, "sm_90a", tool, ("-lineinfo",))
        assert art.ok, art.message
        out[label] = art.cubin()
    return out


def test_launch_bounds_change_the_machine_code_though_the_instructions_are_the_same(cubins):
    plain, bounded = read_cubin(cubins["plain"]).kernel("axpy"), read_cubin(cubins["bounded"]).kernel("axpy")
    assert plain.code_sha256 == bounded.code_sha256, "the same instructions"
    assert plain.machine_code_sha256 != bounded.machine_code_sha256, ".maxntid changes what the GPU launches"
    d = diff_cubins(cubins["plain"], cubins["bounded"], "axpy", "axpy")
    assert d.verdict == METADATA_ONLY and d.cubin_deltas["same_machine_code"] is False
    assert d.differing == plain.differing_parts(bounded) and "records" in d.differing
    assert not set(d.differing) & set(DATA_PARTS)


def test_a_name_alone_leaves_the_machine_code_the_same(cubins):
    plain, renamed = read_cubin(cubins["plain"]).kernel("axpy"), read_cubin(cubins["renamed"]).kernel("xutlass_axpy")
    assert plain.machine_code_sha256 == renamed.machine_code_sha256
    assert diff_cubins(cubins["plain"], cubins["renamed"], "axpy", "xutlass_axpy").verdict == IDENTICAL


def test_the_static_verdict_reads_the_same_definition(cubins):
    def row(name, label):
        k = read_cubin(cubins[label]).kernel(None)
        return {"kernel": "axpy", "arch": "sm_90a", "ptxas_version": "x", "ptxas_sha256": "x",
                "ptxas_flags": "-lineinfo", "baseline_name": "axpy", "name": name, "name_template": name,
                "status": "ok", "registers": 8, "capmerc_bytes": 0, "text_sha256": k.text_sha256,
                "code_sha256": k.code_sha256, SAME_CODE: k.machine_code_sha256}

    rows = {r["name"]: r for r in derive([row("axpy", "plain"), row("bounded", "bounded"), row("x", "renamed")])}
    assert rows["bounded"]["same_code_as_baseline"] is False and rows["bounded"]["verdict"] in DIFFERS
    assert rows["x"]["same_code_as_baseline"] is True and rows["x"]["verdict"] not in DIFFERS


RELOCATABLE = ("-lineinfo", "-c")  # -c: each function its own .text, called through a relocation


@pytest.fixture(scope="module")
def calling():
    """name -> KernelFacts of axpy (or xutlass_axpy) under each variant; whole-program and relocatable (-c)."""
    tool = select_ptxas("sm_90a", "triton")[0]
    variants = {
        "plain": calling_ptx(),
        "constant": calling_ptx(coeffs="10, 20, 31, 40"),
        "callee": calling_ptx(scale="0f40400000"),
        "renamed": rename_entry(calling_ptx(), "axpy", "xutlass_axpy").ptx,
    }
    out = {}
    for flags in (("-lineinfo",), RELOCATABLE):
        for label, text in variants.items():
            art = assemble(text, "sm_90a", tool, flags)
            assert art.ok, art.message
            facts = read_cubin(art.cubin())
            out[label, flags] = facts.kernel("xutlass_axpy" if label == "renamed" else "axpy")
    return out


@pytest.mark.parametrize("flags", [("-lineinfo",), RELOCATABLE], ids=["whole-program", "relocatable"])
def test_a_constant_alone_changes_the_machine_code(calling, flags):
    plain, changed = calling["plain", flags], calling["constant", flags]
    assert plain.code_sha256 == changed.code_sha256, "the same instructions: only constant bank 3's bytes differ"
    assert plain.machine_code_sha256 != changed.machine_code_sha256
    assert changed.differing_parts(plain) == ("module data",) and plain.differing_parts(plain) == ()
    assert calling["renamed", flags].differing_parts(plain) == ()


def test_diff_names_a_changed_const_initialiser_as_data_the_kernel_reads(tmp_path, capsys):
    """The same instructions reading another .const initialiser: not ``metadata_only`` (the kernel computes
    another result) but ``different_data``, with what differs named; ``ptxprobe diff`` says it and exits 1.
    (Planted: the verdict back to metadata_only for every hash difference fails here.)"""
    from ptxprobe.binary.diff import DIFFERENT_DATA
    from ptxprobe.cli import main

    tool = select_ptxas("sm_90a", "triton")[0]
    a, b = (assemble(text, "sm_90a", tool, ("-lineinfo",)).cubin() for text in
            (calling_ptx(), calling_ptx(coeffs="10, 20, 31, 40")))
    d = diff_cubins(a, b, "axpy", "axpy")
    assert d.verdict == DIFFERENT_DATA and d.differing == ("module data",) and d.counts["same"] > 0
    (tmp_path / "a.cubin").write_bytes(a)
    (tmp_path / "b.cubin").write_bytes(b)
    assert main(["diff", str(tmp_path / "a.cubin"), str(tmp_path / "b.cubin")]) == 1
    said = "".join(capsys.readouterr())
    assert "different_data" in said and "differ in: module data (data the kernel reads" in said


@pytest.mark.parametrize("flags", [("-lineinfo",), RELOCATABLE], ids=["whole-program", "relocatable"])
def test_a_callee_alone_changes_the_machine_code(calling, flags):
    plain, changed = calling["plain", flags], calling["callee", flags]
    assert plain.machine_code_sha256 != changed.machine_code_sha256


def test_a_relocatable_callee_is_reached_through_the_entrys_relocations(calling):
    """With -c the callee is its own .text.scale: the entry's own bytes are the same, only the walk sees it."""
    plain, changed = calling["plain", RELOCATABLE], calling["callee", RELOCATABLE]
    assert plain.code_sha256 == changed.code_sha256
    assert [f["function"] for f in json.loads(plain.reach)["functions"]] == ["<entry>", "<callee 1>"]


@pytest.mark.parametrize("flags", [("-lineinfo",), RELOCATABLE], ids=["whole-program", "relocatable"])
def test_a_rename_of_a_calling_kernel_leaves_the_machine_code_the_same(calling, flags):
    assert calling["plain", flags].machine_code_sha256 == calling["renamed", flags].machine_code_sha256
    assert "axpy" not in calling["plain", flags].reach


@pytest.mark.parametrize("flags", [("-lineinfo",), RELOCATABLE], ids=["whole-program", "relocatable"])
def test_renaming_one_kernel_of_two_leaves_the_other_alone(flags):
    tool = select_ptxas("sm_90a", "triton")[0]
    two = calling_ptx(other=True)
    facts = {}
    for label, text in {"plain": two, "renamed": rename_entry(two, "axpy", "xutlass_axpy").ptx}.items():
        art = assemble(text, "sm_90a", tool, flags)
        assert art.ok, art.message
        facts[label] = read_cubin(art.cubin())
    plain, renamed = facts["plain"], facts["renamed"]
    assert set(renamed.kernels) >= {"xutlass_axpy", "bxpy"}
    assert plain.kernel("bxpy").machine_code_sha256 == renamed.kernel("bxpy").machine_code_sha256
    assert plain.kernel("axpy").machine_code_sha256 == renamed.kernel("xutlass_axpy").machine_code_sha256
    assert plain.kernel("axpy").machine_code_sha256 != plain.kernel("bxpy").machine_code_sha256


def test_the_code_hash_covers_capmerc():
    """From sm_100 on a kernel's code is .text plus .nv.capmerc.text: code_sha256 hashes both, read here apart."""
    tool = select_ptxas("sm_100a", "triton")[0]
    art = assemble(PTX.replace("sm_90a", "sm_100a").replace(".version 8.0", ".version 8.7"), "sm_100a", tool)
    assert art.ok, art.message
    k = read_cubin(art.cubin()).kernel("axpy")
    elf = ELFFile(io.BytesIO(art.cubin()))
    text, cap = elf.get_section_by_name(".text.axpy").data(), elf.get_section_by_name(".nv.capmerc.text.axpy").data()
    assert k.capmerc_bytes == len(cap) > 0
    assert k.code_sha256 == sha256_bytes(text + cap) != k.text_sha256


@pytest.mark.parametrize("flags", [("-lineinfo",), RELOCATABLE], ids=["whole-program", "relocatable"])
def test_a_module_wide_respelling_leaves_the_machine_code_and_the_diff_the_same(flags):
    """{module_untriggered} respells the callee and the data the entry reads: the code is the same, so neither the
    machine-code hash (which keeps data symbols' names) nor diff's instruction text (which names callees) may
    call it different."""
    from ptxprobe.ptx.check import check_renames
    from ptxprobe.ptx.rename import module_respellings, rename_entries

    tool = select_ptxas("sm_90a", "triton")[0]
    given = module_with_trigger()
    names = {"axpy": "axpy", **module_respellings(given, {"axpy"})}
    assert names == {"axpy": "axpy", "cutlass_scale": "xutlass_scale", "cutlass_coeffs": "xutlass_coeffs"}
    respelled = rename_entries(given, names).ptx
    assert respelled == module_with_trigger("xutlass") and check_renames(given, respelled, names).equal
    cubins = {}
    for label, text in (("given", given), ("respelled", respelled)):
        art = assemble(text, "sm_90a", tool, flags)
        assert art.ok, art.message
        cubins[label] = art.cubin()
    a, b = (read_cubin(cubins[k]).kernel("axpy") for k in ("given", "respelled"))
    assert a.machine_code_sha256 == b.machine_code_sha256
    assert diff_cubins(cubins["given"], cubins["respelled"], "axpy", "axpy").verdict == IDENTICAL


def test_diff_of_a_renamed_kernel_whose_callee_is_kept_in_its_code_is_identical():
    """Whole-program ptxas names a callee it keeps inside the entry ``$axpy$scale``: renamed, ``$xutlass_axpy$scale``
    is the same call, not an instruction added and one removed."""
    tool = select_ptxas("sm_90a", "triton")[0]
    arts = [assemble(t, "sm_90a", tool, ("-lineinfo",))
            for t in (calling_ptx(), rename_entry(calling_ptx(), "axpy", "xutlass_axpy").ptx)]
    assert all(a.ok for a in arts)
    assert diff_cubins(arts[0].cubin(), arts[1].cubin(), "axpy", "xutlass_axpy").verdict == IDENTICAL


def test_the_shared_alignment_is_hashed_and_runs_recorded_before_it_are_met_on_their_own_definition():
    """Version 2 of "the same machine code" hashes the static shared section's alignment; a kernel that differs in
    it alone differs (``differing_parts`` names it), and rows recorded under version 1 (no machine_code_version)
    are compared with new rows' version-1 hash (repro), and a sweep resumed across the change derives on version 1."""
    from dataclasses import replace

    from ptxprobe.binary.cubin import MACHINE_CODE_VERSION, KernelFacts
    from ptxprobe.runs.rundir import same_code_columns, with_machine_code
    from ptxprobe.static.verdicts import CODE_VERSION, SAME_CODE, SAME_CODE_V1

    k = KernelFacts("k", 16, "t", 1, 0, 0, (), 1024, 0, code_sha256="c", shared_align=16)
    wider = replace(k, shared_align=128)
    assert k.machine_code_sha256 != wider.machine_code_sha256 and MACHINE_CODE_VERSION == 2
    assert k.machine_code_v1_sha256 == wider.machine_code_v1_sha256 and k.differing_parts(wider) == (
        "shared alignment",)
    old = [{"status": "ok", SAME_CODE: "v1-a"}]
    new = [{"status": "ok", SAME_CODE: "v2-a", CODE_VERSION: 2, SAME_CODE_V1: "v1-a"}]
    assert same_code_columns(old, new) == (SAME_CODE, SAME_CODE_V1)
    assert same_code_columns(new, new) == (SAME_CODE, SAME_CODE)
    resumed = with_machine_code(old + new)
    assert {r[SAME_CODE] for r in resumed} == {"v1-a"}  # one definition across the resumed log
    assert with_machine_code(new) == new
