"""``--lib``: the PTX a shared library, fatbin, cubin or wheel embeds, extracted by cuobjdump, swept module by module.

The artefacts are built here by nvcc from one small file (two instantiations of a template, a plain kernel and
one whose body is guarded by ``__CUDA_ARCH__ >= 900``, a stub in sm_80 PTX), once for the module.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from ptxprobe.cli import main
from ptxprobe.core.cache import Cache, sha256_file
from ptxprobe.core.errors import PtxprobeError, SpecError, ToolNotFound
from ptxprobe.core.items import KernelItem
from ptxprobe.ptx.text import code_of, entries_of, jit_reaches, ptx_isa
from ptxprobe.sources import library, sources_of
from ptxprobe.sources.library import STAGE, extract, library_sources, split_stubs
from ptxprobe.sources.library_notes import library_notes

pytestmark = pytest.mark.integration

SOURCE = r"""
template <typename T, int N>
__global__ void scale_t(T *x, T a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < N; ++k) x[i * N + k] *= a;
}
template __global__ void scale_t<float, 4>(float *, float);
template __global__ void scale_t<double, 2>(double *, double);

__device__ float bias = 0.5f;
__device__ __noinline__ float biased(float x) { return x + bias; }

extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = biased(a[i] + b[i]);
}

__global__ void hopper_only(float *x) {
#if __CUDA_ARCH__ >= 900
  x[threadIdx.x] += 1.0f;
#endif
}
"""
SM80 = "-gencode=arch=compute_80,code=[compute_80,sm_80]"
HOPPER_PTX = "-gencode=arch=compute_90,code=compute_90"
SWEPT = ("_Z7scale_tIfLi4EEvPT_S0_", "_Z7scale_tIdLi2EEvPT_S0_", "vadd")
STUB = "_Z11hopper_onlyPf"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """k.so and k.fatbin (sm_80 SASS and PTX), rdc.so (relocatable device code), sass.so (SASS for sm_80 and sm_90,
    no PTX), k.ptx (nvcc -ptx), two.fatbin (sm_80 and sm_90 PTX), k90.fatbin (sm_90 PTX), a host-only .so, a wheel
    holding some, and a text file: built in parallel."""
    from ptxprobe.toolchain.tools import find_tool

    try:
        nvcc, _ = find_tool("nvcc").path, find_tool("cuobjdump")
    except ToolNotFound as exc:
        pytest.skip(f"needs nvcc and cuobjdump: {exc}")
    d = tmp_path_factory.mktemp("lib")
    (d / "k.cu").write_text(SOURCE)
    (d / "host.c").write_text("int host_only(int x) { return x + 1; }\n")
    # NVIDIA's wheels keep libcudadevrt.a in <root>/lib, where their nvcc.profile does not look (lib64)
    so = [nvcc, "-shared", "-Xcompiler", "-fPIC", f"-L{Path(nvcc).parent.parent / 'lib'}"]
    jobs = {"k.so": [*so, SM80], "k.fatbin": [nvcc, "-fatbin", SM80], "rdc.so": [*so, "-rdc=true", SM80],
            "sass.so": [*so, "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"],
            "k.ptx": [nvcc, "-ptx", "-arch=compute_80"], "two.fatbin": [nvcc, "-fatbin", SM80, HOPPER_PTX],
            "k90.fatbin": [nvcc, "-fatbin", HOPPER_PTX]}
    procs = [subprocess.Popen([*argv, "-o", name, "k.cu"], cwd=d, stderr=subprocess.PIPE, text=True)
             for name, argv in jobs.items()]
    procs.append(subprocess.Popen(["gcc", "-shared", "-fPIC", "-o", "host.so", "host.c"], cwd=d,
                                  stderr=subprocess.PIPE, text=True))
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    with zipfile.ZipFile(d / "pkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr("pkg/__init__.py", "")
        for name in ("k.so", "sass.so", "host.so"):
            z.write(d / name, f"pkg/{name}")
    (d / "notes.txt").write_text("not a library\n")
    return {p.name: p for p in d.iterdir()} | {"wheel": d / "pkg-1.0-py3-none-any.whl"}


@pytest.fixture
def cache(tmp_path) -> Cache:
    library._extract.cache_clear()  # every test extracts through its own cache
    return Cache(tmp_path / "cache")


def lib_item(text: str) -> KernelItem:
    return KernelItem.parse("lib_files", text)


def normalized(ptx: str) -> list[str]:
    """PTX lines without comments, blank lines and spacing: the fatbin keeps PTX so compacted."""
    return [" ".join(code_of(ln).split()) for ln in ptx.splitlines() if code_of(ln)]


def test_a_library_is_its_ptx_modules_with_their_entries_stubs_and_the_sass_it_ships(built, cache):
    ext = extract(built["k.so"], cache)
    (lib,) = ext.libraries
    assert lib.member is None and lib.sha256 == ext.sha256 == sha256_file(built["k.so"])
    assert lib.sass_archs == ("sm_80",)
    (mod,) = lib.modules
    nvcc_ptx = built["k.ptx"].read_text()
    assert (mod.name, mod.target, mod.version) == ("k.1.sm_80.ptx", "sm_80", ".".join(map(str, ptx_isa(nvcc_ptx))))
    assert mod.entries == SWEPT and mod.stubs == (STUB,)
    assert set(entries_of(nvcc_ptx)) == {*SWEPT, STUB}


def test_a_stub_is_a_body_without_an_instruction_but_its_return():
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry guarded(.param .u64 p) .maxntid 128, 1, 1
{
$L__func_begin0:
	.loc 1 17 0 // a comment { with a brace
	{ // a scope
	ret;
	}
}
.visible .entry real(.param .u64 p)
{
	.reg .b32 %r<2>;
	mov.u32 %r1, %tid.x;
	ret;
}
.visible .entry empty()
{
}
"""
    assert split_stubs(ptx) == (("real",), ("guarded", "empty"))


@pytest.mark.parametrize("name", ["k.so", "k.fatbin"])
def test_the_extracted_ptx_is_what_nvcc_emits_for_the_same_file_and_arch(built, cache, name):
    ext = extract(built[name], cache)
    (mod,) = ext.libraries[0].modules
    text = cache.get(STAGE, ext.key, mod.file).decode()
    nvcc_ptx = built["k.ptx"].read_text()
    assert entries_of(text) == entries_of(nvcc_ptx)
    assert normalized(text) == normalized(nvcc_ptx)


def test_a_relocatable_library_is_read_with_all_its_fatbins(built, cache):
    (mod,) = extract(built["rdc.so"], cache).libraries[0].modules  # without cuobjdump -all: no PTX found
    assert mod.entries == SWEPT


def test_a_wheel_is_each_library_inside_it(built, cache):
    ext = extract(built["wheel"], cache)
    assert ext.sha256 == sha256_file(built["wheel"])
    assert [lib.member for lib in ext.libraries] == ["pkg/k.so", "pkg/sass.so"]
    assert ext.host_only == ("pkg/host.so",)
    k, sass = ext.libraries
    assert k.sha256 == sha256_file(built["k.so"]) and sass.sass_archs == ("sm_80", "sm_90") and not sass.modules
    (src,) = library_sources(lib_item(str(built["wheel"])), (), cache)
    assert src.label == "pkg/k.so:k.1.sm_80.ptx"
    e = src.emit("sm_80", cache)
    assert e.metadata["library"] == "pkg/k.so" and e.metadata["wheel_sha256"] == ext.sha256
    assert "retargeted_from" not in e.metadata

    class Exp:
        lib_files, file_archs = (lib_item(str(built["wheel"])),), ("sm_90a",)

    lines = [n.line() for n in library_notes(Exp, cache)]
    assert lines == [f"{built['wheel'].name}:pkg/k.so: 1 PTX module (targets sm_80), assembled from sm_80 PTX for "
                     "sm_90a: neither the SASS the library ships (sm_80) nor what the driver's JIT would make; "
                     "1 stub entry left out",
                     f"{built['wheel'].name}:pkg/sass.so: ships SASS only (sm_80, sm_90): no PTX to rename, left out"]


def test_a_module_source_is_retargeted_and_its_entries_picked(built, cache):
    (src,) = library_sources(lib_item(str(built["k.so"])), ("sm_90a",), cache)
    assert src.label == "k.so:k.1.sm_80.ptx" and src.build_archs(("sm_100a",)) == ("sm_90a",)
    e = src.emit("sm_90a", cache)
    assert e.swept_entries == SWEPT and e.kernel == src.label
    assert ".target sm_90a" in e.ptx and STUB in e.ptx  # the stub stays in the text, only out of the sweep
    assert {k: e.metadata[k] for k in ("library", "module", "ptx_target", "sass_archs", "stub_entries_left_out",
                                       "retargeted_from")} == {
        "library": "k.so", "module": "k.1.sm_80.ptx", "ptx_target": "sm_80", "sass_archs": ["sm_80"],
        "stub_entries_left_out": 1, "retargeted_from": "sm_80"}
    assert e.metadata["library_sha256"] == sha256_file(built["k.so"])
    (one,) = library_sources(lib_item(f"{built['k.so']}:scale_t<float*"), (), cache)
    assert one.emit("sm_80", cache).swept_entries == (SWEPT[0],)
    with pytest.raises(SpecError, match="hopper_only is an empty stub in k.1.sm_80.ptx"):
        library_sources(lib_item(f"{built['k.so']}:hopper_only"), (), cache)
    with pytest.raises(PtxprobeError, match="scale_t"):  # two instantiations: refused, never the first taken
        library_sources(lib_item(f"{built['k.so']}:scale_t"), (), cache)


def test_a_rerun_reads_the_extraction_from_the_cache(built, cache, monkeypatch):
    first = extract(built["k.so"], cache)
    library._extract.cache_clear()

    def no_tool(*a, **kw):
        raise AssertionError("cuobjdump ran again")

    monkeypatch.setattr(library, "run_tool", no_tool)
    assert extract(built["k.so"], cache) == first
    library._extract.cache_clear()
    with pytest.raises(AssertionError, match="ran again"):  # another cache: extracted again
        extract(built["k.so"], Cache(cache.root.parent / "other"))


def _sweep(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(["rename-sweep", "--no-run", "--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_refusals_are_one_line_through_the_cli(built, tmp_path, capsys, monkeypatch):
    names = ("-s", "archs=sm_90a", "-s", "names={base},cutlass_{base}", "-o", str(tmp_path / "run"))
    code, doc, _ = _sweep(capsys, "--lib", str(built["sass.so"]), *names)
    assert (code, doc["kind"]) == (2, "SpecError")
    assert doc["error"].endswith("sass.so ships SASS only (sm_80, sm_90): no PTX to rename")
    code, doc, _ = _sweep(capsys, "--lib", str(built["notes.txt"]), *names)
    assert code == 2 and "notes.txt: not a library cuobjdump can read: Invalid fatbin header" in doc["error"]
    assert not (tmp_path / "run").exists()
    def missing(kind, *a, **kw):
        raise ToolNotFound(f"no {kind} found")

    monkeypatch.setattr(library, "find_tool", missing)  # where the extraction looks cuobjdump up
    library._extract.cache_clear()
    code, doc, _ = _sweep(capsys, "--lib", str(built["k.so"]), *names)
    assert (code, doc["kind"]) == (3, "ToolNotFound")


def test_a_library_is_swept_per_entry_and_recorded_by_its_sha256(built, tmp_path, capsys):
    out = tmp_path / "run"
    code, doc, err = _sweep(capsys, "--lib", str(built["k.so"]), "-s", "archs=sm_90a", "-s",
                            "names={base},cutlass_{base}", "-o", str(out))
    assert code in (0, 1), err
    rows = [json.loads(x) for x in (out / "variants.jsonl").read_text().splitlines()]
    assert sorted({r["name"] for r in rows if r["name_template"] == "{base}"}) == sorted(SWEPT)
    assert {r["arch"] for r in rows} == {"sm_90a"} and all(r["status"] == "ok" for r in rows)
    assert ("k.so: 1 PTX module (targets sm_80), assembled from sm_80 PTX for sm_90a: neither the SASS the library "
            "ships (sm_80) nor what the driver's JIT would make; 1 stub entry left out") in err
    assert doc["libraries"][0]["stub_entries"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    (rec,) = [r for r in manifest["inputs"].values() if r.get("kind") == "lib"]
    sha = sha256_file(built["k.so"])
    assert rec["library"] == str(built["k.so"].resolve()) and rec["library_sha256"] == sha
    assert not (out / "inputs" / sha).exists()  # recorded, never copied


def test_a_library_kernel_chosen_alone_is_labelled_by_its_own_symbol(built, tmp_path, capsys):
    """A module's label (``k.so:k.1.sm_80.ptx``) names no kernel: a library's entry keeps its symbol in the key
    even when it is the only one swept."""
    out = tmp_path / "run"
    code, doc, err = _sweep(capsys, "--lib", f"{built['k.so']}:vadd", "-s", "archs=sm_90a", "-s",
                            "names={base},cutlass_{base}", "-o", str(out))
    assert code in (0, 1), err
    rows = [json.loads(x) for x in (out / "variants.jsonl").read_text().splitlines()]
    assert rows and {r["kernel"].rsplit(":", 1)[-1] for r in rows} == {"vadd"}


def test_a_library_of_a_wheel_where_entry_chose_nothing_says_so_in_words():
    """vLLM's wheel with --entry '*flash_fwd_sparse*': 20 of its libraries hold none of those kernels (the note
    read "0 PTX modules of 21 (targets ), assembled from  PTX")."""
    from ptxprobe.sources.library_notes import LibraryNote

    note = LibraryNote("w.whl:pkg/other.so", "0" * 64, 0, (), ("sm_90a",), ("sm_90",), 1, 21)
    assert note.line() == "w.whl:pkg/other.so: none of its 21 PTX modules holds a kernel --entry chose"


def test_an_entry_longer_than_a_file_name_may_be_is_split_from_its_path(tmp_path):
    """``--lib lib.so:ENTRY`` with a mangled entry of thousands of characters (vLLM's FA2 instantiations): the OS
    refuses such a text as a path ("File name too long"), which must not end the split."""
    from ptxprobe.core.items import split_entry

    lib = tmp_path / "k.so"
    lib.write_bytes(b"\x7fELF")
    entry = "_ZN5flash16flash_fwd_kernelI" + "Li128E" * 400 + "EEvNS_16Flash_fwd_paramsE"
    assert split_entry(f"{lib}:{entry}") == (str(lib), entry)
    assert split_entry(f"{tmp_path / 'missing.so'}:{entry}") == (str(tmp_path / "missing.so"), entry)


def test_lib_items_choosing_entries_of_one_module_are_one_source_assembled_once(built, cache, tmp_path, capsys):
    """``--lib k.so:vadd --lib k.so:scale_t<float*`` (two entries of one module, as a stratified sample of a library
    chooses them) is one source: the module cut to both, each assembly run once for both kernels, each kernel its
    own rows; an item taking the whole module takes the other in; the same item twice is still refused. (Before,
    the two were refused as one module chosen twice; merging planted away, the sweep refuses again.)"""
    import pandas as pd

    so = built["k.so"]
    rc = main(["rename-sweep", "--lib", f"{so}:vadd", "--lib", f"{so}:scale_t<float*", "-s", "archs=sm_80",
               "-s", "repeat=1", "-s", "max_repeat=0", "--no-run", "-q", "-o", str(tmp_path / "run")])
    assert rc in (0, 1), capsys.readouterr().err
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert {k.rsplit(":", 1)[-1] for k in rows.kernel} == {"vadd", "_Z7scale_tIfLi4EEvPT_S0_"}, set(rows.kernel)
    assert rows.groupby("name_template").assembly_key.nunique().eq(1).all()  # one ptxas run per name for both
    (src,) = sources_of(_libs(f"{so}:vadd", f"{so}:scale_t<float*"), cache)
    assert set(src.chosen_entries()) == set(src.emit("sm_80", cache).swept_entries) and len(src.chosen_entries()) == 2
    assert [s.entry for s in sources_of(_libs(f"{so}:vadd", str(so)), cache)] == [None]
    (one,) = library_notes(_libs(f"{so}:vadd"), cache)  # the library said once, what both items leave cut
    (both,) = library_notes(_libs(f"{so}:vadd", f"{so}:scale_t<float*"), cache)
    assert both.entries_cut == one.entries_cut - 1 and both.modules == one.modules == 1
    capsys.readouterr()
    assert main(["rename-sweep", "--lib", f"{so}:vadd", "--lib", f"{so}:vadd", "-s", "archs=sm_80", "--no-run",
                 "-q", "-o", str(tmp_path / "twice")]) == 2
    assert "given twice" in capsys.readouterr().err


def _libs(*items: str):
    """An experiment of --lib items alone, as the command line makes it."""
    from tests.conftest import make_experiment

    return make_experiment(kernels=[], lib_files=list(items))


def test_a_kernel_chosen_from_a_module_is_assembled_alone_with_what_it_reaches_and_the_same_code(built, cache):
    """ptxas assembles every entry it is given: a kernel chosen from a large module (vLLM's hold thousands) is
    assembled from the module cut to it. vadd keeps its callee and the global the callee reads; scale_t<float>
    leaves them out; each kernel's code is the code the whole module gives it, and the note says what was cut."""
    from ptxprobe.binary.cubin import read_cubin
    from ptxprobe.toolchain.assemble import assemble
    from ptxprobe.toolchain.tools import triton_ptxas

    tool = triton_ptxas("sm_90a")
    (whole,) = library_sources(lib_item(str(built["k.so"])), ("sm_90a",), cache)
    full = whole.emit("sm_90a", cache)
    assert "entries_left_out" not in full.metadata
    full_cubin = read_cubin(assemble(full.ptx, "sm_90a", tool, cache=cache).cubin())
    for entry, cut, callee in (("vadd", 3, True), ("scale_t<float*", 3, False)):
        (src,) = library_sources(lib_item(f"{built['k.so']}:{entry}"), ("sm_90a",), cache)
        e = src.emit("sm_90a", cache)
        (kernel,) = e.swept_entries
        assert entries_of(e.ptx) == [kernel] and e.metadata["entries_left_out"] == cut
        assert e.metadata["functions_left_out"] == (0 if callee else 1)
        assert ("biased" in e.ptx) == callee and ".global .align 4 .f32 bias" in e.ptx
        alone = read_cubin(assemble(e.ptx, "sm_90a", tool, cache=cache).cubin()).kernel(kernel)
        k = full_cubin.kernel(kernel)
        assert (alone.regcount, alone.n_instructions) == (k.regcount, k.n_instructions)
        if not callee:  # no global address in its code: byte for byte
            assert alone.machine_code_sha256 == k.machine_code_sha256
    class Exp:
        lib_files, file_archs = (lib_item(f"{built['k.so']}:vadd"),), ("sm_90a",)
    (note,) = library_notes(Exp, cache)
    assert note.entries_cut == 3 and "the 3 other entries of its module cut before ptxas" in note.line()


@pytest.mark.parametrize(("target", "arch", "reaches"), [
    ("sm_80", "sm_80", True), ("sm_80", "sm_90a", True), ("sm_80", "sm_120a", True), ("sm_90", "sm_80", False),
    ("sm_90", "sm_90a", True), ("sm_90a", "sm_90a", True), ("sm_90a", "sm_90", True), ("sm_90a", "sm_100a", False),
    ("sm_100f", "sm_103a", True), ("sm_100f", "sm_120a", False), ("sm_103f", "sm_100a", False)])
def test_the_driver_jits_ptx_for_its_own_sm_and_later_ones_arch_specific_ptx_for_its_own(target, arch, reaches):
    assert jit_reaches(target, arch) is reaches


def test_a_module_the_driver_never_jits_for_an_arch_is_left_out_there_and_said(built, cache, tmp_path, capsys):
    """vLLM's wheel holds sm_80 and sm_90 PTX: asked for sm_80, its sm_90 modules cannot be assembled (ptxas refuses
    sm_90 instructions) and would never run there; they are left out of that arch, and said, not failed."""
    two = str(built["two.fatbin"])
    by_arch = {archs: {s.module.target: s.build_archs(()) for s in library_sources(lib_item(two), archs, cache)}
               for archs in (("sm_80",), ("sm_90a",), ("sm_80", "sm_90a"))}
    assert by_arch == {("sm_80",): {"sm_80": ("sm_80",)}, ("sm_90a",): {"sm_80": ("sm_90a",), "sm_90": ("sm_90a",)},
                       ("sm_80", "sm_90a"): {"sm_80": ("sm_80", "sm_90a"), "sm_90": ("sm_90a",)}}

    class Asked:
        lib_files, file_archs = (lib_item(f"{two}:vadd"),), ("sm_80",)

    (note,) = library_notes(Asked, cache)
    assert (note.modules, note.beyond_jit, note.beyond_targets) == (1, 1, ("sm_90",))
    assert note.line().endswith("; 1 PTX module (targets sm_90) left out: the driver never JIT-compiles them for "
                                "sm_80")
    code, doc, err = _sweep(capsys, "--lib", f"{two}:vadd", "-s", "archs=sm_80", "-o", str(tmp_path / "run"))
    rows = [json.loads(x) for x in (tmp_path / "run" / "variants.jsonl").read_text().splitlines()]
    assert code in (0, 1) and {(r["arch"], r["status"]) for r in rows} == {("sm_80", "ok")}, err
    assert {r["kernel"] for r in rows} == {"two.fatbin:two.1.sm_80.ptx:vadd"}
    code, doc, _ = _sweep(capsys, "--lib", str(built["k90.fatbin"]), "-s", "archs=sm_80", "-o",
                          str(tmp_path / "none"))
    assert (code, doc["kind"]) == (2, "SpecError") and not (tmp_path / "none").exists()
    assert doc["error"].endswith("k90.fatbin: its PTX (1 module, targets sm_90) is never JIT-compiled for sm_80: PTX "
                                 "runs on its own SM and later ones (arch-specific PTX on its own)")


def test_reduce_takes_a_library_kernel_from_the_module_the_driver_would_jit_cut_to_it(built, cache, tmp_path, capsys):
    """``reduce --lib PATH:ENTRY``: of the modules holding the kernel, the newest target that reaches --arch (as the
    driver picks among a fatbin's PTX), its text cut to the kernel; a library without a kernel named, refused."""
    from ptxprobe.reduce.run import library_kernel

    two = str(built["two.fatbin"])
    assert library_kernel(f"{two}:vadd", None, "sm_90a").module.target == "sm_90"
    assert library_kernel(two, "vadd", "sm_80").module.target == "sm_80"
    src = library_kernel(f"{two}:vadd", None, "sm_90a")
    emitted = src.emit("sm_90a", cache)
    assert entries_of(emitted.ptx) == ["vadd"] and emitted.metadata["ptx_target"] == "sm_90"
    for argv, said in ((["--lib", two], "reduce takes one kernel of it: --lib PATH:ENTRY or --entry ENTRY"),
                       (["--lib", f"{two}:nothing_here"], "no entry 'nothing_here' among the"),
                       (["--lib", f"{two}:vadd", "--ptx", two], "reduce takes one input")):
        code = main(["reduce", *argv, "--arch", "sm_90a", "-o", str(tmp_path / "r"), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert (code, doc["kind"]) == (2, "SpecError") and said in doc["error"], doc
    code = main(["reduce", "--lib", f"{two}:vadd", "--arch", "sm_90a", "-o", str(tmp_path / "r"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and doc["entry"] == "vadd" and doc["arch"] == "sm_90a", doc
