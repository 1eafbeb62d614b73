"""SASS parsing and control codes checked against independent oracles; diffs on real cubins."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from ptxprobe.binary import diff, sass
from ptxprobe.binary.cubin import read_cubin
from ptxprobe.core.errors import SassParseError
from ptxprobe.ptx import rename
from ptxprobe.toolchain import assemble
from ptxprobe.toolchain import tools as toolchain
from tests.recorded_env import recorded_triton, triton_version

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cubins(emitted):
    """(arch, name) -> cubin bytes, assembled with the ptxas Triton uses."""
    out = {}
    for arch in ("sm_90a", "sm_100a", "sm_120a"):
        e = emitted("fp8e5", arch, causal=True)
        tool = toolchain.triton_ptxas(arch)
        for name in ("attention", "cutlass_attention"):
            ptx = e.ptx if name == "attention" else rename.rename_entry(e.ptx, "attention", name).ptx
            art = assemble.assemble(ptx, arch, tool)
            assert art.ok, art.stderr
            out[arch, name] = art.cubin()
    return out


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_120a"])
def test_reuse_mask_matches_reuse_markers(cubins, arch):
    lst = sass.disassemble(cubins[arch, "attention"])["attention"]
    assert len(lst.instructions) > 500
    for ins in lst.instructions:
        assert bin(ins.control.reuse).count("1") == sum(op.count(".reuse") for op in ins.operands), ins.text
        # bit 0 flags the first source register (operand slot A), after the destinations
        if ins.control.reuse == 1 and ins.base in ("FFMA", "IMAD", "LOP3", "IADD3", "FMUL", "FADD"):
            sources = [op for op in ins.operands[1:] if re.match(r"^[-|!]*R\d+", op)]
            assert ".reuse" in sources[0], ins.text


def test_control_fields_agree_with_nvdisasm_annotations_on_sm120(cubins, tmp_path):
    """On sm_120 nvdisasm prints its own barrier/wait/stall notes: an independent check of the bit positions."""
    lst = sass.disassemble(cubins["sm_120a", "attention"])["attention"]
    checked = 0
    for ins in lst.instructions:
        notes = " ".join(ins.annotations)
        if not notes:
            continue
        wr = re.search(r"&wr=0x(\d)", notes)
        rd = re.search(r"&rd=0x(\d)", notes)
        req = re.search(r"&req=\{([\d,]*)\}", notes)
        st = re.search(r"\?(?:trans|WAIT)(\d+)", notes)
        assert ins.control.write_barrier == (int(wr.group(1)) if wr else None), ins.text
        assert ins.control.read_barrier == (int(rd.group(1)) if rd else None), ins.text
        assert ins.control.wait_mask == (sum(1 << int(x) for x in req.group(1).split(",") if x) if req else 0)
        if st:
            assert ins.control.stall == int(st.group(1)), ins.text
        checked += 1
    if checked == 0 and not _nvdisasm_prints_notes(cubins["sm_120a", "attention"], tmp_path):
        pytest.skip(f"nvdisasm {toolchain.find_tool('nvdisasm').version} prints no control notes on sm_120 (12.8's "
                    "did): no oracle to check against")
    assert checked > 500


def _nvdisasm_prints_notes(cubin: bytes, tmp_path) -> bool:
    """Whether nvdisasm's own raw listing carries barrier/wait notes (read without ptxprobe's parser)."""
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    out = subprocess.run([toolchain.find_tool("nvdisasm").path, "-hex", str(path)], capture_output=True, text=True)
    return "&wr=" in out.stdout or "&req=" in out.stdout


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_opcodes_and_operands_agree_with_nvdisasm_json(cubins, arch):
    tool = toolchain.find_tool("nvdisasm")
    cubin = cubins[arch, "attention"]
    lst = sass.disassemble(cubin)["attention"]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.cubin"
        p.write_bytes(cubin)
        out = subprocess.run([tool.path, "-json", "-c", str(p)], capture_output=True, text=True, check=True).stdout
    funcs = json.loads(out)[1]
    # on sm_100 nvdisasm lists internal subroutines (tcgen05 guardrail traps) of the section as functions of their own
    ref = [i for f in sorted(funcs, key=lambda f: f["start"]) for i in f["sass-instructions"]]
    assert len(ref) == len(lst.instructions)
    for ins, r in zip(lst.instructions, ref, strict=True):
        opcode = r["opcode"]
        assert ins.opcode == opcode, (ins.text, r)

        # nvdisasm's JSON writes memory operands without a comma and sometimes last ("desc[UR20][R10.64],P0[R19]"):
        # compare the operand tokens as multisets
        def tokens(text):
            return sorted(re.findall(r"\[[^\]]*\]|[^\s,\[\]]+", text.replace(" ", "")))

        # branch targets: our label, resolved through the parsed label table, must be nvdisasm's address
        # (a call's symbol is printed bare there)
        def resolve(m):
            return hex(lst.labels[m.group(1)]) if m.group(1).startswith(".L_") else m.group(1)

        ours = [re.sub(r"`\(([^)]+)\)", resolve, op) for op in ins.operands]
        theirs = r.get("operands", "")
        pred = r.get("predicate")
        if pred and not pred.startswith("@"):  # nvdisasm's JSON files P2R's "PR" operand under "predicate"
            theirs, pred = f"{pred},{theirs}", None
        assert tokens(",".join(ours)) == tokens(theirs), (ins.text, r)
        assert ins.predicate == pred, (ins.text, r)


def test_blocks_and_loops(cubins):
    lst = sass.disassemble(cubins["sm_90a", "attention"])["attention"]
    blocks = sass.basic_blocks(lst)
    assert blocks[0].start == 0 and blocks[-1].end == len(lst.instructions)
    assert all(b.start < b.end for b in blocks)
    lps = sass.loops(lst)
    big = [lp for lp in lps if len(lp.body) > 100]
    assert len(big) == 2  # causal: the unmasked loop and the diagonal loop
    for lp in big:
        assert any(lst.instructions[i].base == "HGMMA" or lst.instructions[i].base == "QGMMA" for i in lp.body)


def test_diff_with_itself_is_empty(cubins):
    d = diff.diff_cubins(cubins["sm_100a", "attention"], cubins["sm_100a", "attention"])
    assert d.verdict == diff.IDENTICAL
    assert d.counts["same"] == d.a.instructions and not d.opcode_delta
    assert d.cubin_deltas["same_text"]


def test_renamed_blackwell_kernel_is_found_and_classified(cubins):
    d = diff.diff_cubins(cubins["sm_100a", "attention"], cubins["sm_100a", "cutlass_attention"])
    assert d.verdict in (diff.SCHEDULING_ONLY, diff.DIFFERENT_CODE)
    assert d.counts["changed"] + d.counts["moved"] + d.counts["added"] > 0
    regs = d.cubin_deltas["registers"]
    if recorded_triton() == triton_version():  # its ptxas-blackwell (12.9.86) gives the renamed kernel other registers;
        assert regs[0] != regs[1]  # Triton 3.9's (13.4.59) keeps them
    main = max(d.loop_deltas, key=lambda x: x["instructions"][0] or 0)
    assert main["instructions"][0] > 100


def test_renamed_hopper_kernel_with_identical_text_diffs_identical(cubins, emitted):
    """The kernel's own name appears in RET targets: it must not count as a difference."""
    e = emitted("fp16", "sm_90a")
    tool = toolchain.triton_ptxas("sm_90a")
    a = assemble.assemble(e.ptx, "sm_90a", tool).cubin()
    b = assemble.assemble(rename.rename_entry(e.ptx, "attention", "xutlass_attention").ptx, "sm_90a", tool).cubin()
    assert read_cubin(a).kernel().text_sha256 == read_cubin(b).kernel().text_sha256
    assert diff.diff_cubins(a, b).verdict == diff.IDENTICAL


def test_malformed_disassembly_and_unknown_opcode():
    with pytest.raises(SassParseError, match="no .text sections"):
        sass.parse_nvdisasm("garbage\nmore garbage\n")
    broken = (
        "//--------------------- .text.k --------------------------\n"
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;   /* 0x00000a0000017a02 */\n"
    )
    with pytest.raises(SassParseError, match="second encoding word"):
        sass.parse_nvdisasm(broken)
    with pytest.raises(SassParseError, match="not an instruction"):
        sass.parse_instruction_text("mov r1 ;")
    # an opcode nobody has seen yet still parses: the model does not whitelist mnemonics
    _, op, ops = sass.parse_instruction_text("FUTUREOP.X.Y R1, R2 ;")
    assert op == "FUTUREOP.X.Y" and ops == ("R1", "R2")


def test_compact_control_format():
    c = sass.Control(stall=7, yield_bit=0, write_barrier=1, read_barrier=0, wait_mask=0b000100, reuse=0)
    assert c.compact() == "B--2---:R0:W1:Y:S07"


def test_uniform_predicate_branches_are_conditional_and_persistent_loops_found(emitted):
    """Blackwell listings branch with ``BRA.U !UP0, , target``: the fall-through must stay in the CFG."""
    from ptxprobe.toolchain import tools as tc

    e = emitted("fp16", "sm_100a", causal=True, kernel="attention_gluon")
    art = assemble.assemble(e.ptx, "sm_100a", tc.triton_ptxas("sm_100a"))
    lst = sass.disassemble(art.cubin())[e.entry]
    assert any(i.base == "BRA" and sass._predicate_operand(i) for i in lst.instructions)
    big = [lp for lp in sass.loops(lst) if len(lp.body) > 200]
    assert len(big) >= 2  # the persistent tile loop and the key loop inside it
    outer, inner = sorted(big, key=lambda lp: len(lp.body), reverse=True)[:2]
    assert set(inner.body) < set(outer.body) and inner.depth == outer.depth + 1
    assert any(lst.instructions[i].base == "UTCHMMA" or "MMA" in lst.instructions[i].base for i in inner.body)


def test_cuobjdump_fallback_gives_the_same_listing(cubins):
    from ptxprobe.toolchain import tools as tc

    a = sass.disassemble(cubins["sm_90a", "attention"])["attention"]
    b = sass.disassemble(cubins["sm_90a", "attention"], tool=tc.find_tool("cuobjdump"))["attention"]
    assert [i.encoding for i in a.instructions] == [i.encoding for i in b.instructions]
    assert [i.opcode for i in a.instructions] == [i.opcode for i in b.instructions]
    assert [len(lp.body) for lp in sass.loops(a)] == [len(lp.body) for lp in sass.loops(b)]


def test_per_block_summaries_add_up(cubins):
    d = diff.diff_cubins(cubins["sm_90a", "attention"], cubins["sm_90a", "cutlass_attention"])
    for side in (d.a, d.b):
        assert sum(b["instructions"] for b in side.blocks) == side.instructions
        assert sum(b["stall_cycles"] for b in side.blocks) == side.stall_cycles


def _listing(blocks: list[tuple[str, list[str]]], kernel: str = "k") -> sass.Listing:
    """A synthetic nvdisasm -hex listing: (label, instructions) blocks, a control word with stall 1."""
    lines = [f"//--------------------- .text.{kernel} --------------------------"]
    off = 0
    for label, body in blocks:
        if label:
            lines.append(f"{label}:")
        for text in body:
            lines.append(f"        /*{off:04x}*/                   {text} ;   /* 0x{off:016x} */")
            lines.append(f"                                                    /* 0x{1 << 41:016x} */")
            off += 16
    return sass.parse_nvdisasm("\n".join(lines))[kernel]


LOOP_A = [".L_x_0", ["FFMA R1, R2, R3, R1", "FFMA R4, R5, R6, R4", "IADD3 R7, R7, 0x1, RZ",
                     "ISETP.GE.AND P0, PT, R7, 0x40, PT", "@!P0 BRA `(.L_x_0)"]]
LOOP_B = [".L_x_1", ["HADD2 R8, R8, R9", "LDS R10, [R11]", "IADD3 R12, R12, 0x2, RZ",
                     "ISETP.GE.AND P1, PT, R12, 0x80, PT", "@!P1 BRA `(.L_x_1)"]]
TAIL = ["", ["EXIT"]]


def test_a_changed_immediate_is_a_code_change_not_scheduling():
    a = _listing([LOOP_A, TAIL])
    changed = [LOOP_A[0], [t.replace("0x40", "0x48") for t in LOOP_A[1]]]
    b = _listing([changed, TAIL])
    assert diff.diff_listings(a, b).verdict == diff.DIFFERENT_CODE
    const = [LOOP_A[0], [t.replace("R2, R3", "R2, c[0x0][0x210]") for t in LOOP_A[1]]]
    const2 = [LOOP_A[0], [t.replace("R2, R3", "R2, c[0x0][0x218]") for t in LOOP_A[1]]]
    assert diff.diff_listings(_listing([const, TAIL]), _listing([const2, TAIL])).verdict == diff.DIFFERENT_CODE
    renamed_regs = [LOOP_A[0], [t.replace("R4", "R14").replace("R5", "R15") for t in LOOP_A[1]]]
    assert diff.diff_listings(a, _listing([renamed_regs, TAIL])).verdict == diff.SCHEDULING_ONLY


def test_loops_are_paired_by_what_they_contain_not_their_position():
    a = _listing([LOOP_A, LOOP_B, TAIL])
    b = _listing([LOOP_B, LOOP_A, TAIL])  # the same two loops, in the other order
    d = diff.diff_listings(a, b)
    pairs = {(lp["loop_a"], lp["loop_b"]) for lp in d.loop_deltas}
    la, lb = sass.loops(a), sass.loops(b)
    first_a = next(k for k, lp in enumerate(la) if a.instructions[lp.head].offset == 0)
    second_b = next(k for k, lp in enumerate(lb) if b.instructions[lp.head].offset != 0)
    assert (first_a, second_b) in pairs  # LOOP_A (first in A) pairs with LOOP_A (second in B)
    # a loop only one side has stays unpaired
    d2 = diff.diff_listings(_listing([LOOP_A, TAIL]), _listing([LOOP_A, LOOP_B, TAIL]))
    assert any(lp["loop_a"] is None for lp in d2.loop_deltas)


def test_diff_ptx_assembles_each_name_as_often_as_a_sweep_and_exit_codes_match(tmp_path, capsys):
    from ptxprobe.cli import main
    from tests.test_rename import NVCC_STYLE

    ptx = tmp_path / "k.ptx"
    ptx.write_text(NVCC_STYLE)
    rc = main(["diff", "--ptx", str(ptx), "--rename", "xutlass_{base}", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["noise"]["runs"] == 2 and doc["noise"]["verdict"] == "identical"  # the default experiment's repeat
    assert rc == 0
    rc = main(["diff", "--ptx", str(ptx), "--rename", "cutlass_{base}", "--repeat", "3"])
    out = capsys.readouterr().out
    assert "over 3 assemblies per name" in out
    assert rc == (0 if "identical" in out.split("over 3")[1].split("\n")[0] else 1)


def test_diff_ptx_for_another_arch_retargets_the_ptx_as_a_sweep_does(tmp_path, capsys):
    """A PTX file written for sm_90a, diffed for sm_100a: retargeted (.target and .version), as rename-sweep does
    with -s archs=sm_100a, instead of ptxas refusing 'sm_90a' for a future architecture (exit 3 before)."""
    from ptxprobe.cli import main
    from tests.ptx_text import AXPY_PTX

    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY_PTX)
    assert ".target sm_90a" in AXPY_PTX
    assert main(["diff", "--ptx", str(ptx), "--arch", "sm_100a", "--repeat", "1", "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["noise"]["runs"] == 1
