"""One definition of "the same machine code" (``KernelFacts.machine_code_sha256``): launch metadata counts, the name
does not, and ``diff`` and the static verdict decide with it."""

from __future__ import annotations

import pytest

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.binary.diff import IDENTICAL, METADATA_ONLY, diff_cubins
from ptxprobe.ptx.rename import rename_entry
from ptxprobe.static.verdicts import DIFFERS, SAME_CODE, derive
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import select_ptxas
from tests.ptx_text import AXPY_PTX as PTX

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
