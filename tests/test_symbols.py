"""Kernel symbols as libraries ship them: the trigger anywhere in a mangled symbol, nested names, template
instantiations told apart, entries chosen by symbol, demangled name or glob, and the checker's demangler."""

from __future__ import annotations

import shutil

import pytest

from ptxprobe.core.errors import InvalidName, MalformedPtx
from ptxprobe.ptx.check import check_renames
from ptxprobe.ptx.mangling import demangled, display_names, own_identifier, symbol_parts, trigger_origin
from ptxprobe.ptx.rename import MIXED_TRIGGER_NAMES, TRIGGER_FREE_NAMES, apply_template, rename_entries
from ptxprobe.sources.files import choose_entries

pytestmark = pytest.mark.unit

# symbols of the forms real libraries ship (vLLM's FlashAttention-2 and Marlin, xformers' sparse24 kernels), written
# here by hand from the Itanium ABI: no third-party PTX
FA2 = "_ZN5flash23flash_fwd_sparse_kernelINS_6KernelIN7cutlass6half_tEEEEEvT_"
SPARSE24 = "_Z27sparse24_largest_mask_2d_cuI14Sp24MaskKernelIN7cutlass6half_tEEEvT_"
MARLIN_A = "_ZN6marlin6MarlinILi256ELi1ELi8ELb1ELi4EEEvPKiS2_Pi"
MARLIN_B = "_ZN6marlin6MarlinILi128ELi1ELi8ELb0ELi4EEEvPKiS2_Pi"
ANON = "_ZN12_GLOBAL__N_16kernelEPf"
SAXPY_F = "_Z7saxpy_tIfLi4EEvPT_PKS0_S0_i"
SAXPY_D = "_Z7saxpy_tIdLi2EEvPT_PKS0_S0_i"


@pytest.mark.parametrize("symbol, identifier", [
    (FA2, "flash_fwd_sparse_kernel"), (SPARSE24, "sparse24_largest_mask_2d_cu"), (MARLIN_A, "Marlin"),
    (ANON, "kernel"), (SAXPY_F, "saxpy_t"), ("_ZL6kernelPf", "kernel"), ("_Z6kernelPf", "kernel"),
    ("plain_c_kernel", "plain_c_kernel"),
])
def test_the_functions_own_identifier_is_found_and_can_be_replaced(symbol, identifier):
    parts = symbol_parts(symbol)
    assert parts is not None and parts.identifier == identifier == own_identifier(symbol)
    renamed = parts.with_identifier("cutlass_" + identifier)
    if symbol.startswith("_Z"):  # the demangler, not our reader, says it is the same function with a new name
        assert demangled(renamed) == demangled(symbol).replace(identifier + "<", "cutlass_" + identifier + "<", 1) \
            or demangled(renamed) == demangled(symbol).replace(identifier + "(", "cutlass_" + identifier + "(", 1)


def test_an_unreadable_mangling_allows_only_respellings_in_place():
    odd = "_ZQQ7cutlassXYZ"
    assert symbol_parts(odd) is None
    assert apply_template("{base_untriggered}", odd) == "_ZQQ7xutlassXYZ"
    with pytest.raises(InvalidName, match="only {base_untriggered} and {base_control}"):
        apply_template("cutlass_{base}", odd)


def test_the_trigger_is_spelled_out_of_the_whole_symbol():
    # xformers' form: a plain mangled function whose template argument holds the trigger (was refused: only the
    # identifier was respelled, giving the symbol itself)
    assert [apply_template(t, SPARSE24) for t in TRIGGER_FREE_NAMES] == [
        SPARSE24.replace("cutlass", "xutlass"), SPARSE24, SPARSE24.replace("cutlass", "zutlass")]
    # vLLM FA2's nested form
    assert apply_template("{base_untriggered}", FA2) == FA2.replace("cutlass", "xutlass")
    # a nested name without the trigger gets it in its own identifier, validly mangled (was cutlass__ZN6marlin...)
    assert apply_template("cutlass_{base}", MARLIN_A) == "_ZN6marlin14cutlass_MarlinILi256ELi1ELi8ELb1ELi4EEEvPKiS2_Pi"
    assert demangled(apply_template("cutlass_{base}", MARLIN_A)).startswith("void marlin::cutlass_Marlin<256, 1")
    assert [apply_template(t, MARLIN_A) for t in MIXED_TRIGGER_NAMES][0] == MARLIN_A


def test_where_the_trigger_comes_from_is_said():
    assert trigger_origin(SPARSE24, "cutlass").describe() == "the type cutlass::half_t in its template arguments"
    assert trigger_origin("cutlass_gemm", "cutlass").describe() == "its own name"
    assert not trigger_origin(MARLIN_A, "cutlass").holds
    hashed = "_ZN53_GLOBAL__N__ded7a328_20_cutlass_templates_cu_f518b5b215scale_anonymousEPffi"
    assert "anonymous namespace" in trigger_origin(hashed, "cutlass").describe()
    kernel = "_ZN7cutlass6KernelIN4gemm3FooEEEvNT_6ParamsE"  # cutlass::Kernel<gemm::Foo>(gemm::Foo::Params)
    assert trigger_origin(kernel, "cutlass").describe() == "its namespace or class cutlass"


def test_instantiations_read_apart_by_the_arguments_that_differ():
    names = display_names([MARLIN_A, MARLIN_B, SAXPY_F, SAXPY_D, "k", "_Z1kPf"])
    assert names[MARLIN_A] == "Marlin<256, …, true, …>" and names[MARLIN_B] == "Marlin<128, …, false, …>"
    assert names[SAXPY_F] == "saxpy_t<float, 4>" and names[SAXPY_D] == "saxpy_t<double, 2>"
    assert len(set(names.values())) == len(names)  # overloads too (k and k(float*))


def test_entries_are_chosen_by_symbol_demangled_name_or_glob_never_the_first_of_several():
    names = [SAXPY_F, SAXPY_D, MARLIN_A]
    assert choose_entries(names, SAXPY_D, "m") == (SAXPY_D,)
    assert choose_entries(names, "saxpy_t<double, 2>", "m") == (SAXPY_D,)
    assert choose_entries(names, "void saxpy_t<float, 4>(float*, float const*, float, int)", "m") == (SAXPY_F,)
    assert choose_entries(names, "marlin::Marlin<256, 1, 8, true, 4>(int const*, int const*, int*)", "m") == (
        MARLIN_A,)
    assert choose_entries(names, "marlin::Marlin<256, 1, 8, true, 4>", "m") == (MARLIN_A,)  # no parameters
    assert choose_entries(names, "saxpy_t<*", "m") == (SAXPY_F, SAXPY_D)
    with pytest.raises(MalformedPtx, match=r"'saxpy_t' names 2 kernels \(saxpy_t<float, 4> = _Z7saxpy"):
        choose_entries(names, "saxpy_t", "m")
    with pytest.raises(MalformedPtx, match="no entry 'nope'"):
        choose_entries(names, "nope", "m")


PTX = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry {a}(
\t.param .u64 {a}_param_0
)
{{
\t.shared .align 4 .b8 _ZZ{la}E5stage[16];
\tret;
}}
.visible .entry {b}(
\t.param .u64 {b}_param_0
)
{{
\tret;
}}
"""


def _module(a: str, b: str) -> str:
    return PTX.format(a=a, b=b, la=a[2:])


def test_a_module_renamed_at_once_is_checked_as_one():
    a, b = SAXPY_F, MARLIN_A
    names = {a: apply_template("cutlass_{base}", a), b: apply_template("cutlass_{base}", b)}
    base, variant = _module(a, b), rename_entries(_module(a, b), names).ptx
    assert variant == _module(names[a], names[b])  # the nested local's encoding follows the entry
    check = check_renames(base, variant, names)
    assert check.equal, check.detail
    assert {s.base for s in check.sites} >= {a, b, f"{a}_param_0", f"{b}_param_0"}


def test_the_checker_refuses_a_mangling_the_demangler_rejects_or_reads_otherwise():
    a, b = SAXPY_F, MARLIN_A
    good = apply_template("cutlass_{base}", b)
    wrong_length = good.replace("14cutlass_Marlin", "13cutlass_Marlin")  # planted: the length prefix not rewritten
    check = check_renames(_module(a, b), _module(a, wrong_length), {b: wrong_length})
    assert not check.equal and "demangle" in check.detail
    other = b.replace("Li256E", "Li512E")  # planted: another instantiation, not a rename
    check = check_renames(_module(a, b), _module(a, other), {b: other})
    assert not check.equal
    assert check_renames(_module(a, b), _module(a, good), {b: good}).equal


def test_the_modules_other_symbols_are_found():
    from ptxprobe.ptx.text import module_symbols

    ptx = """.version 8.0
.target sm_90a
.address_size 64
.global .align 4 .b8 cutlass_table[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};
.const .align 4 .u32 plain_const;
.func  (.param .b32 func_retval0) _ZN7cutlass4stepEff(
\t.param .b32 _ZN7cutlass4stepEff_param_0
)
{
\tret;
}
.visible .entry user(
\t.param .u64 user_param_0
)
{
\tld.global.f32 \t%f1, [%rd7];
\tret;
}
"""
    assert module_symbols(ptx) == ["_ZN7cutlass4stepEff", "cutlass_table", "plain_const"]


def test_table_names_leave_out_sources_only_when_the_kernels_tell_themselves_apart():
    from ptxprobe.ptx.labels import table_names

    a, b = f"lib.so:m.25.sm_80.ptx:{MARLIN_A}", f"lib.so:m.26.sm_80.ptx:{MARLIN_B}"
    assert table_names([a, b], 200) == {a: "lib.so:m.25.sm_80.ptx:Marlin<256, …, true, …>",
                                        b: "lib.so:m.26.sm_80.ptx:Marlin<128, …, false, …>"}
    assert table_names([a, b], 30) == {a: "Marlin<256, …, true, …>", b: "Marlin<128, …, false, …>"}
    same = f"other.so:m.1.sm_80.ptx:{MARLIN_A}"  # the same kernel in two libraries: the sources stay
    assert len(set(table_names([a, same], 30).values())) == 2


def test_a_symbol_nested_past_the_runtime_demanglers_limit_is_still_read():
    """CUTLASS's ``cutlass::Kernel<SparseGemm<…>>`` (xformers) is nested deeper than ``__cxa_demangle`` reads; the
    name reader must not overflow Python's stack on it, and the table names come from c++filt without the limit."""
    deep = "_Z1fI" + "1AI" * 500 + "i" + "E" * 500 + "EvT_"
    assert own_identifier(deep) == "f"
    if shutil.which("c++filt") is None:
        pytest.skip("no c++filt (binutils) here")
    assert demangled(deep).startswith("void f<A<A<A<")
    assert own_identifier("_Z1fI" + "1AI" * 5000 + "i" + "E" * 5000 + "EvT_").startswith("_Z1f")  # unreadable


def test_table_names_of_instantiations_that_differ_deep_inside_an_argument_stay_apart():
    from ptxprobe.core.display import short_names

    labels = [f"sparseNM_dense_kernel<cutlass::half_t, {n}, 2, (anonymous namespace)::sparseNM_dense<{flag}>"
              f"(torch::stable::Tensor, std::basic_string<char>, long, long)::{{lambda(auto:1)#{k}}}>"
              for n in (4, 8) for flag in ("false", "true") for k in (1, 2)]
    short = short_names(labels, 60)
    assert len(set(short.values())) == len(labels) and all(len(v) <= 60 for v in short.values())
    for label, name in short.items():
        assert ("false" in name) == ("<false>" in label) and (", 4," in label) == ("4" in name.split("…", 2)[1])


def test_a_mangled_entry_absent_from_a_module_is_answered_without_reading_its_names(monkeypatch):
    """``--lib wheel:_ZN...`` picks the modules that hold that symbol: a module without it answers at once (vLLM's
    wheel has 110 modules and 4455 entries; reading every module's readable names took 1-2 s per item given), a
    glob or a readable name still reads them."""
    from ptxprobe.sources import files

    names = ["_Z6kernelIfEvPT_", "_Z6kernelIdEvPT_"]
    monkeypatch.setattr(files, "display_names", lambda n: (_ for _ in ()).throw(AssertionError("read")))
    assert files.entry_matches(names, "_Z6kernelIiEvPT_") == []
    assert files.entry_matches(names, "_Z6kernelIfEvPT_") == ["_Z6kernelIfEvPT_"]
    with pytest.raises(AssertionError, match="read"):
        files.entry_matches(names, "_Z6kernel*")


MODULE = """.version 8.0
.target sm_90a
.address_size 64
.global .align 8 .u64 table[1] = {g};
.extern .func (.param .b32 r) vprintf(.param .b64 fmt, .param .b64 args);
.func (.param .b32 r) f(.param .b32 x)
{
\tret;
}
.func g()
{
\tret;
}
.func h()  // calls f
{
\tcall f, (1);
\tret;
}
\t// .globl\ta
.visible .entry a(.param .u64 p)
{
\tcall h, ();
\tret;
}
\t// .globl\tb
.visible .entry b(.param .u64 p)
{
\tcall f, (2);
\tret;
}
.visible .entry c()
{
\tmov.u64 %rd1, b;  // h named only in a comment
\tret;
}
"""


@pytest.mark.parametrize(("keep", "entries_out", "functions_out"), [
    ({"a"}, ("b", "c"), ()),  # a -> h -> f; g through the table's initialiser
    ({"b"}, ("a", "c"), ("h",)),
    ({"c"}, ("a",), ("h",)),  # c takes b's address: b stays, and f with it
    ({"a", "b", "c"}, (), ()),
])
def test_a_module_pruned_to_its_chosen_entries_keeps_everything_they_reach(keep, entries_out, functions_out):
    from ptxprobe.ptx.text import entries_of, pruned_to

    p = pruned_to(MODULE, frozenset(keep))
    assert (p.entries_left_out, p.functions_left_out) == (entries_out, functions_out)
    kept_entries = [e for e in ("a", "b", "c") if e not in entries_out]
    assert entries_of(p.ptx) == kept_entries
    for gone in entries_out + functions_out:
        assert f" {gone}(" not in p.ptx and f" {gone}()" not in p.ptx
    assert "vprintf" in p.ptx and "table[1] = {g}" in p.ptx and ".func g()" in p.ptx  # declarations stay
    if not entries_out:
        assert p.ptx == MODULE
