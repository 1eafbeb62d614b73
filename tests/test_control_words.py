"""Control words decoded per architecture family, each verified on real cubins against independent oracles.

Oracles that do not use ptxprobe's bit masks: nvdisasm's ``.reuse`` operand markers (reuse
bits), the scoreboard rule that a wait on barrier b needs an instruction that sets b
(barrier fields), and on sm_120 nvdisasm's own notes (stall, barriers, wait mask). A layout
with one field moved by a bit is decoded too: the oracles must reject it, or they prove nothing.
"""

from __future__ import annotations

import pytest

from ptxprobe.binary import sass
from ptxprobe.toolchain import assemble
from ptxprobe.toolchain import tools as toolchain

pytestmark = pytest.mark.integration

TARGETS = ("sm_80", "sm_90a", "sm_100a", "sm_120a")


@pytest.fixture(scope="module")
def listings(emitted):
    out = {}
    for arch in TARGETS:
        e = emitted("fp16", arch, causal=True)
        art = assemble.assemble(e.ptx, arch, toolchain.triton_ptxas(arch))
        assert art.ok, art.stderr
        out[arch] = sass.disassemble(art.cubin())[e.entry]
    return out


def _decode(lst: sass.Listing, positions: dict) -> list[sass.Control]:
    saved = sass.CONTROL_LAYOUTS["volta-hopper"]
    sass.CONTROL_LAYOUTS["volta-hopper"] = (saved[0], positions)
    try:
        return [sass.Control.from_high_word(i.encoding >> 64) for i in lst.instructions]
    finally:
        sass.CONTROL_LAYOUTS["volta-hopper"] = saved


def reuse_violations(lst: sass.Listing, controls: list[sass.Control]) -> int:
    return sum(bin(c.reuse).count("1") != sum(op.count(".reuse") for op in i.operands)
               for i, c in zip(lst.instructions, controls, strict=True))


def barrier_violations(lst: sass.Listing, controls: list[sass.Control]) -> int:
    """Waits on a barrier that nothing sets before them in program order or inside an enclosing loop."""
    loop_bodies = [set(lp.body) for lp in sass.loops(lst)]
    bad = 0
    for k, c in enumerate(controls):
        for b in range(6):
            if not c.wait_mask >> b & 1:
                continue
            setters = [j for j, x in enumerate(controls) if b in (x.write_barrier, x.read_barrier)]
            before = any(j < k for j in setters)
            in_loop = any(k in body and any(j in body for j in setters) for body in loop_bodies)
            bad += not (before or in_loop)
    return bad


@pytest.mark.parametrize("arch", TARGETS)
def test_decoded_fields_pass_the_oracles(listings, arch):
    lst = listings[arch]
    controls = [i.control for i in lst.instructions]
    assert len(controls) > 300
    assert reuse_violations(lst, controls) == 0
    assert barrier_violations(lst, controls) == 0
    assert sum(1 for c in controls if c.wait_mask) > 20  # the oracle had waits to check
    assert sass.control_layout(arch) == (sass.control_layout(arch)[0], True)


@pytest.mark.parametrize("arch", TARGETS)
def test_a_layout_off_by_one_bit_fails_the_oracles(listings, arch):
    lst = listings[arch]
    good = sass.CONTROL_LAYOUTS["volta-hopper"][1]
    wrong_wait = _decode(lst, {**good, "wait": good["wait"] + 1})
    wrong_reuse = _decode(lst, {**good, "reuse": good["reuse"] - 1})
    wrong_barriers = _decode(lst, {**good, "write_barrier": good["read_barrier"], "read_barrier": good["write_barrier"]
                                   + 1})
    assert barrier_violations(lst, wrong_wait) > 0 or reuse_violations(lst, wrong_wait) > 0
    assert reuse_violations(lst, wrong_reuse) > 0
    assert barrier_violations(lst, wrong_barriers) > 0


def test_an_unverified_target_is_marked_and_pre_volta_refused():
    assert sass.control_layout("sm_86") == ("volta-hopper", False)
    assert "unverified" in sass.control_decode_label("sm_86")
    assert "verified for sm_90a" in sass.control_decode_label("sm_90a")
    with pytest.raises(sass.SassParseError, match="pre-Volta"):
        sass.control_layout("sm_61")


def test_listings_say_who_made_them_and_how_control_words_were_read(listings):
    lst = listings["sm_90a"]
    assert lst.disassembler.startswith("nvdisasm ") and "layout, verified for sm_90" in lst.control_decode
