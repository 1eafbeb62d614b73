"""A tuned configuration applied to a CuTe DSL program, whose host code looks its kernel up by its own name.

The cubin is assembled under the tuned name and its symbol spelt back (``binary.symbols.respelled``): checked
differentially against ptxas itself (assembled under the other name, byte for byte). Then a program the test writes
compiles a CuTe DSL kernel on fake tensors (no GPU) and exports it with ``export_to_c``; under ``apply`` the exported
object carries the tuned cubin, found in the object by its symbol and compared by bytes and machine code. Loading
the tuned cubin when the program runs its kernel (JIT) needs a GPU: ``tests/test_gpu_cute.py``.
"""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import pytest

from ptxprobe.binary.cubin import read_cubin
from ptxprobe.binary.symbols import respelled
from ptxprobe.core.errors import CubinError, SpecError
from ptxprobe.ptx.rename import renamed_ptx
from ptxprobe.records import TunedDocument
from ptxprobe.toolchain.assemble import assemble
from ptxprobe.toolchain.tools import triton_ptxas
from tests.ptx_text import AXPY_PTX, CUTE_SCALE_KERNEL

pytestmark = pytest.mark.integration

A, B = "kernel_xutlass_axpy", "kernel_zutlass_axpy"  # two names ptxas takes alike, of one length


@pytest.mark.parametrize("flags", [(), ("-lineinfo",), ("-O0",)])
def test_a_respelled_cubin_is_byte_for_byte_the_one_ptxas_gives_under_that_name(flags):
    tool = triton_ptxas("sm_90a")
    under_a, under_b = (assemble(renamed_ptx(AXPY_PTX, "axpy", n), "sm_90a", tool, flags).cubin() for n in (A, B))
    assert under_a != under_b
    back = respelled(under_a, A, B)
    assert back == under_b  # only names differ between the two, and all of them were found
    assert read_cubin(back).kernel(B).machine_code_sha256 == read_cubin(under_a).kernel(A).machine_code_sha256


def test_a_name_of_another_length_or_found_elsewhere_is_refused(monkeypatch):
    tool = triton_ptxas("sm_90a")
    data = assemble(renamed_ptx(AXPY_PTX, "axpy", A), "sm_90a", tool, ("-lineinfo",)).cubin()
    with pytest.raises(SpecError, match=r"\(19 characters\) cannot be loaded under kernel_xutlass_axpy_v2 \(22\)"):
        respelled(data, A, A + "_v2")
    with pytest.raises(CubinError, match="no symbol"):
        respelled(data, "kernel_nothere_axpy", B[: len("kernel_nothere_axpy")])
    # -lineinfo keeps the PTX text in the cubin: a respelling that left it would leave the old name behind
    monkeypatch.setattr("ptxprobe.binary.symbols.NAME_TEXT_SECTIONS", ())
    with pytest.raises(SpecError, match="appears outside"):
        respelled(data, A, B)


# --- a CuTe DSL program: apply's export carries the tuned code ----------------------------------------------------

EXPORT_PROGRAM = "import sys\n" + CUTE_SCALE_KERNEL + textwrap.dedent('''
    from cutlass.cute.runtime import make_fake_compact_tensor
    from cutlass.runtime import make_fake_stream

    x = make_fake_compact_tensor(cutlass.Float32, (4096,), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (4096,), assumed_align=16)
    compiled = cute.compile(scale, x, y, make_fake_stream())
    compiled.export_to_c(sys.argv[1], "scale", "scale")
''')


def embedded_cubin(obj: Path, symbol: str) -> bytes:
    """The bytes of an object an object file defines (the DSL exports its cubin as ``kernels_binary``)."""
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(obj.read_bytes()))
    (sym,) = [s for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name == symbol]
    data = elf.get_section(sym["st_shndx"]).data()
    return data[sym["st_value"]: sym["st_value"] + sym["st_size"]]


def _tuned_doc(ptx: str, entry: str, ptx_sha: str) -> TunedDocument:
    """tuned.json as a GPU tune would leave it: the trigger-free name under Triton's ptxas at -O0 beats yours."""
    from ptxprobe.ptx.rename import apply_template

    tool = triton_ptxas("sm_90a")
    name = apply_template("{base_untriggered}", entry)
    art = assemble(renamed_ptx(ptx, entry, name), "sm_90a", tool, ("-O0",))
    code = read_cubin(art.cubin()).kernel(name).machine_code_sha256
    best = {"name_template": "{base_untriggered}", "name": name, "ptxas_sha256": tool.sha256,
            "ptxas_version": tool.version, "options": ["-O0"], "machine_code_sha256": code, "label": f"{name} | -O0"}
    user = {**best, "name_template": "{base}", "name": entry, "options": [], "label": entry}
    rec = {"kernel": "k", "arch": "sm_90a", "status": "tuned", "entry": entry, "ptx_sha256": ptx_sha,
           "frontend": "cute-dsl", "best": best, "user": user, "best_is_yours": False,
           "gain": {"ratio": 1.05, "low": 1.04, "high": 1.06}, "change": "apply"}
    return TunedDocument.from_json({
        "command": ["tune"], "static_sweep": "", "kernels": [rec], "space": {"user_flags": []},
        "ptxas": {tool.sha256: {"version": tool.version, "path": tool.path, "origin": tool.origin}}})


def test_an_export_under_apply_carries_the_tuned_code_under_the_dsls_own_name(tmp_path):
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl is not installed (pip install '.[test]')")
    from ptxprobe.capture.program import run_program
    from ptxprobe.core.cache import Cache
    from ptxprobe.tune.apply import apply_program

    prog = tmp_path / "export.py"
    prog.write_text(EXPORT_PROGRAM)
    own, tuned = tmp_path / "own", tmp_path / "tuned"
    own.mkdir()
    tuned.mkdir()
    (k,), _ = run_program([sys.executable, str(prog), str(own)], tmp_path / "cap", 300, arch="sm_90a")
    assert k.frontend == "cute-dsl" and "cutlass" in k.entry
    doc = _tuned_doc((tmp_path / "cap" / k.ptx).read_text(), k.entry, k.ptx_sha256)
    rec = apply_program(doc, [sys.executable, str(prog), str(tuned)], tmp_path / "apply", rounds=0, metric=None,
                        timeout=300, cache=Cache(), arch="sm_90a")
    (swap,) = rec.kernels
    assert swap.name == k.entry and swap.compiled_as == doc.kernels[0].best["name"] != k.entry
    assert swap.verified and swap.same_ptx_as_tuned
    mine = embedded_cubin(tuned / "scale.o", "kernels_binary")
    assert mine == Path(swap.cubin).read_bytes()  # the exported object holds ptxprobe's cubin
    assert read_cubin(mine).kernel(k.entry).machine_code_sha256 == doc.kernels[0].best["machine_code_sha256"]
    theirs = embedded_cubin(own / "scale.o", "kernels_binary")  # without apply: the DSL's own fatbin, other code
    assert theirs[:4] == b"\x50\xed\x55\xba" and theirs.find(b"\x7fELF") > 0
    their_code = read_cubin(theirs[theirs.find(b"\x7fELF"):]).kernel(k.entry).machine_code_sha256
    assert their_code != swap.machine_code_sha256
    assert (tuned / "scale.h").read_text() == (own / "scale.h").read_text()  # the same loader loads it


def test_apply_refuses_another_target_and_a_run_without_the_measure(tmp_path):
    """A configuration tuned for sm_90a is not applied to the program's sm_80 kernel (its code is its target's own);
    a run whose --metric finds no number is the program's failure, in those words, not a calibration failure."""
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl is not installed (pip install '.[test]')")
    from ptxprobe.capture.program import run_program
    from ptxprobe.core.cache import Cache
    from ptxprobe.core.errors import ToolFailed
    from ptxprobe.tune.apply import apply_program

    prog = tmp_path / "export.py"
    prog.write_text(EXPORT_PROGRAM)
    (tmp_path / "o").mkdir()
    argv = [sys.executable, str(prog), str(tmp_path / "o")]
    (k,), _ = run_program(argv, tmp_path / "cap", 300, arch="sm_90a")
    doc = _tuned_doc((tmp_path / "cap" / k.ptx).read_text(), k.entry, k.ptx_sha256)
    with pytest.raises(SpecError, match="for sm_80 .tuned for sm_90a.: tune it for that target"):
        apply_program(doc, argv, tmp_path / "a80", rounds=0, metric=None, timeout=300, cache=Cache(), arch="sm_80")
    with pytest.raises(ToolFailed, match="no number for --metric"):
        apply_program(doc, argv, tmp_path / "am", rounds=0, metric=r"ms=(\S+)", timeout=300, cache=Cache(),
                      arch="sm_90a")


def test_the_hook_matches_a_function_without_its_ptx_by_entry_alone():
    """A function the DSL loaded from its cache holds the PTX's path where the PTX would be: matched by its
    kernel's entry (kernel_info), where the plan has one kernel under it."""
    from types import SimpleNamespace

    from ptxprobe.capture.swap import Replacement, _State
    from ptxprobe.capture.swap_cute import replacement_for

    rep = Replacement("kernel_cutlass_k_0", "kernel_cutlass_k_0", "/x.cubin", "a" * 64)
    state = _State({rep.entry: [rep]}, None)
    compiled = SimpleNamespace(__ptx__="/tmp/dump/k.sm_90a.ptx", kernel_info={"kernel_cutlass_k_0": {}})
    assert replacement_for(state, compiled) == rep
    other = SimpleNamespace(__ptx__=".visible .entry kernel_cutlass_k_0(\n)", kernel_info={})
    assert replacement_for(state, other) is None and state.mismatched == ["kernel_cutlass_k_0"]  # other PTX
