"""Kernels that are not ours: .cu through nvcc, cubins with embedded PTX, a Triton function with a
spec file; and the CUDA C++ attention family on every target it lists."""

from __future__ import annotations

import json
import shutil

import pytest

from ptxprobe.cli import main
from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import KernelCompileError
from ptxprobe.sources import RegisteredSource, TritonFunctionSource, registry
from ptxprobe.sources import triton as tsrc
from ptxprobe.sources.cuda import emit_cuda
from ptxprobe.sources.files import ptx_from_cubin
from ptxprobe.static.sweep import run_sweep
from tests.conftest import make_experiment
from tests.ptx_text import normalize

pytestmark = pytest.mark.integration

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

SAXPY = """
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  __shared__ float stage[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  stage[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) y[i] = a * stage[threadIdx.x] + y[i];
}
__global__ void other_kernel(int* p) { p[threadIdx.x] = 1; }
"""

TRITON_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def scale_rows(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(Y + offs, x * 2.0, mask=offs < N)
"""


SCALE_ROWS_SPEC = {
    "signature": {"X": "*fp32", "Y": "*fp32", "N": "i32", "BLOCK": "constexpr"},
    "constexprs": {"BLOCK": 1024},
}


def run_cli(capsys, *argv) -> tuple[int, str]:
    """(exit code, the summary records as JSON); 0 and 1 both mean the sweep ran (1: a name changed code)."""
    rc = main(
        ["rename-sweep", "-q", "--json", "--no-run", "-s", "names={base},cutlass_{base}", "-s", "repeat=1", *argv]
    )
    out = capsys.readouterr().out
    if rc in (0, 1):
        doc = json.loads(out)
        assert rc == (1 if any(p["name_matters"] for p in doc["pivot"]) else 0)
        return 0, json.dumps(doc["summary"])
    return rc, out


@needs_nvcc
def test_cu_file_with_entry(tmp_path, capsys):
    cu = tmp_path / "saxpy.cu"
    cu.write_text(SAXPY)
    rc, out = run_cli(
        capsys, "--cu", str(cu), "--entry", "saxpy", "-s", "archs=sm_90a,sm_120a", "-o", str(tmp_path / "o")
    )
    assert rc == 0, out
    summary = json.loads(out)
    assert {(s["arch"], s["name"]) for s in summary} == {
        ("sm_90a", "saxpy"),
        ("sm_90a", "cutlass_saxpy"),
        ("sm_120a", "saxpy"),
        ("sm_120a", "cutlass_saxpy"),
    }
    rows = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" and r["rename_equivalent"] for r in rows)
    # the static shared array is a mangled local of saxpy: renamed with its length prefix
    e = emit_cuda(cu, "sm_90a", "saxpy")
    assert "_ZZ5saxpyE5stage" in e.ptx


@needs_nvcc
def test_cu_errors(tmp_path, capsys):
    cu = tmp_path / "saxpy.cu"
    cu.write_text(SAXPY)
    assert main(["rename-sweep", "-q", "--cu", str(cu), "--entry", "nope", "-o", str(tmp_path / "o")]) == 2
    assert "no kernel 'nope'" in " ".join(capsys.readouterr().err.split())
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k( { this is not C++ }")
    with pytest.raises(KernelCompileError, match=r"nvcc cannot compile bad.cu for sm_90a: bad.cu\(1\): error: "):
        emit_cuda(bad, "sm_90a")  # the user's source: bad input, with nvcc's own first error lines
    with pytest.raises(Exception, match="no kernel 'nope'"):
        emit_cuda(cu, "sm_90a", "nope")
    # a C++ (mangled) kernel is found by its source name
    assert emit_cuda(cu, "sm_90a", "other_kernel").entry.startswith("_Z12other_kernel")


def test_cubin_with_and_without_embedded_ptx(tmp_path, capsys, emitted):
    from ptxprobe.core.errors import CubinError
    from ptxprobe.toolchain import assemble
    from ptxprobe.toolchain import tools as toolchain

    e = emitted("fp16", "sm_90a")
    tool = toolchain.triton_ptxas("sm_90a")
    with_ptx = tmp_path / "with.cubin"
    with_ptx.write_bytes(assemble.assemble(e.ptx, "sm_90a", tool, ("-lineinfo",)).cubin())
    rc, out = run_cli(capsys, "--cubin", str(with_ptx), "-o", str(tmp_path / "o"))
    assert rc == 0
    assert {s["name"] for s in json.loads(out)} == {"attention", "cutlass_attention"}
    from ptxprobe.binary.cubin import read_cubin

    again = assemble.assemble(ptx_from_cubin(with_ptx).ptx, "sm_90a", tool, ("-lineinfo",))
    assert read_cubin(again.cubin()).kernel().text_sha256 == read_cubin(with_ptx.read_bytes()).kernel().text_sha256
    from tests.test_rename import NVCC_STYLE  # no debug info: ptxas embeds no PTX

    bare = tmp_path / "bare.cubin"
    bare.write_bytes(assemble.assemble(NVCC_STYLE, "sm_90a", tool, ()).cubin())
    with pytest.raises(CubinError, match="no embedded PTX"):
        ptx_from_cubin(bare)


def test_triton_function_with_spec(tmp_path, capsys, monkeypatch):
    mod = tmp_path / "my_kernels.py"
    mod.write_text(TRITON_KERNEL)
    spec = tmp_path / "scale.json"
    spec.write_text(json.dumps({**SCALE_ROWS_SPEC, "divisible_by_16": ["X", "Y", "N"], "num_warps": 4}))
    rc, out = run_cli(
        capsys,
        "--triton",
        f"{mod}:scale_rows",
        "--spec",
        str(spec),
        "-s",
        "archs=sm_90a,sm_100a",
        "-o",
        str(tmp_path / "o"),
    )
    assert rc == 0, out
    assert {(s["arch"], s["name"]) for s in json.loads(out)} >= {("sm_100a", "cutlass_scale_rows")}
    # bad specs say what is wrong
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"signature": {"X": "*fp32", "Y": "*fp32", "N": "i32", "BLOCK": "constexpr"}}))
    from ptxprobe.core.errors import SpecError

    with pytest.raises(SpecError, match="no value for constexpr"):
        TritonFunctionSource(f"{mod}:scale_rows", None, str(bad)).emit("sm_90a", Cache())
    bad.write_text(json.dumps({"signature": {"A": "*fp32"}}))
    with pytest.raises(SpecError, match="do not match"):
        TritonFunctionSource(f"{mod}:scale_rows", None, str(bad)).emit("sm_90a", Cache())
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        tsrc.load_kernel_spec(bad)
    with pytest.raises(SpecError, match="no triton.jit function"):
        tsrc.load_triton_function(f"{mod}:missing")
    rc, _ = run_cli(capsys, "--triton", f"{mod}:scale_rows", "-o", str(tmp_path / "o2"))
    assert rc == 2  # --spec missing


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a", "sm_120a"])
def test_cuda_attention_compiles_for_every_listed_target(arch):
    from ptxprobe.binary.cubin import read_cubin
    from ptxprobe.toolchain import assemble
    from ptxprobe.toolchain import tools as toolchain

    fam = registry.family("attention_cuda")
    assert arch in fam.archs
    for dt in fam.dtypes:
        spec = fam.spec(dt, 128, True)
        e = RegisteredSource(fam.name, dt, 128, True, "default").emit(arch, Cache())
        assert e.entry == fam.extra["entry"](spec)
        assert "mma.sync.aligned.m16n8k16" in e.ptx and "ldmatrix" in e.ptx and "cp.async" in e.ptx
        art = assemble.assemble(e.ptx, arch, toolchain.select_ptxas(arch, "newest")[0])
        assert art.ok, art.stderr
        rep = art.reports[e.entry]
        assert rep.stack_bytes == 0 and rep.spill_store_bytes == 0
        assert read_cubin(art.cubin()).kernel(e.entry).regcount == rep.registers


def test_cuda_family_in_a_sweep(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    exp = make_experiment(
        name="cuda",
        kernels=["attention_cuda"],
        dtypes=["fp16"],
        head_dims=[64],
        archs=["sm_90a"],
        names=["{base}", "xutlass_{base}"],
    )
    out = run_sweep(exp, tmp_path / "r", jobs=2, progress=False)
    assert {r["status"] for r in out.rows} == {"ok"}
    ctrl = [r for r in out.rows if r["name"].startswith("xutlass")]
    assert ctrl[0]["verdict"] == "identical"


def test_gluon_blackwell_attention_builds_for_sm100a_on_cpu(emitted):
    from ptxprobe.ptx import rename

    fam = registry.family("attention_gluon")
    assert fam.archs == ("sm_100a",)
    fp8 = emitted("fp8e5", "sm_100a", causal=True, kernel="attention_gluon")
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in fp8.ptx  # the reported trigger: f8f6f4 MMAs in a loop
    fp16 = emitted("fp16", "sm_100a", kernel="attention_gluon")
    assert "kind::f16" in fp16.ptx and "tcgen05.ld" in fp16.ptx
    # our text rename equals Gluon's own repr= rename
    via_gluon = emitted("fp16", "sm_100a", kernel="attention_gluon", name="cutlass_gluon_attention")
    ours = rename.rename_entry(fp16.ptx, fp16.entry, "cutlass_gluon_attention")
    assert normalize(ours.ptx) == normalize(via_gluon.ptx)
    # the file name "gluon_attention.py" is not the kernel's name: it stays
    assert '"' + "kernels/gluon_attention.py" in ours.ptx.replace("\\", "/") or "gluon_attention.py" in ours.ptx
    assert "cutlass_gluon_attention.py" not in ours.ptx


def test_rename_leaves_paths_and_dotted_names_alone():
    from ptxprobe.ptx import rename

    ptx = rename_fixture = (
        '.version 8.0\n.target sm_90a\n.address_size 64\n\t.file\t1 "/src/k.py"\n'
        "// k.py kernel k\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n}\n"
    )
    r = rename.rename_entry(rename_fixture, "k", "cutlass_k")
    assert '"/src/k.py"' in r.ptx and "// k.py kernel cutlass_k" in r.ptx and "cutlass_k_param_0" in r.ptx
    assert ptx.count("k_param_0") == 1


def test_gluon_warp_specialised_attention_builds_for_sm100a_on_cpu(emitted):
    from ptxprobe.ptx import rename
    from ptxprobe.toolchain import assemble
    from ptxprobe.toolchain import tools as toolchain

    fam = registry.family("attention_gluon_ws")
    assert fam.archs == ("sm_100a",)
    e = emitted("fp8e5", "sm_100a", causal=True, kernel="attention_gluon_ws")
    ptx = e.ptx
    # three partitions: workers give registers back, the softmax warpgroup takes them
    assert "setmaxnreg.dec.sync.aligned.u32 \t24" in ptx and "setmaxnreg.inc.sync.aligned.u32" in ptx
    assert ".reqntid 256" in ptx  # 4 softmax warps + 1 load warp + 1 MMA warp, padded to a warpgroup
    assert "bar.sync \t0, 128" in ptx  # the softmax partition's own barrier, not the whole CTA's
    assert "cp.async.bulk.tensor.2d" in ptx  # TMA loads from the load warp
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in ptx and "tcgen05.commit" in ptx
    art = assemble.assemble(ptx, "sm_100a", toolchain.triton_ptxas("sm_100a"), ("-lineinfo",))
    assert art.ok, art.stderr
    assert art.reports[e.entry].spill_store_bytes == 0  # the default config does not spill
    via_gluon = emitted("fp8e5", "sm_100a", causal=True, kernel="attention_gluon_ws", name="cutlass_ws")
    assert normalize(rename.rename_entry(ptx, e.entry, "cutlass_ws").ptx) == normalize(via_gluon.ptx)
    for dt in fam.dtypes:  # every dtype and head dim of the family builds
        for d in fam.head_dims:
            assert "tcgen05.mma" in emitted(dt, "sm_100a", kernel="attention_gluon_ws", head_dim=d).ptx


def test_a_target_the_kernel_cannot_build_for_is_refused_not_crashed(capsys):
    # Triton's LLVM would abort the whole process on tcgen05 for sm_90a: ptxprobe refuses first
    assert main(["emit", "--kernel", "attention_gluon_ws", "--dtype", "fp16", "--arch", "sm_90a"]) == 2
    assert "cannot be built for sm_90a (targets: sm_100a)" in capsys.readouterr().err


@needs_nvcc
def test_an_edited_header_is_never_served_stale(tmp_path):
    (tmp_path / "scale.cuh").write_text("#define FACTOR 2.0f\n")
    cu = tmp_path / "k.cu"
    cu.write_text('#include "scale.cuh"\nextern "C" __global__ void k(float* x) { x[threadIdx.x] *= FACTOR; }\n')
    cache = Cache(tmp_path / "c")
    a = emit_cuda(cu, "sm_90a", cache=cache)
    assert emit_cuda(cu, "sm_90a", cache=cache, only_cached=True).ptx == a.ptx  # unchanged: found without nvcc
    (tmp_path / "scale.cuh").write_text("#define FACTOR 3.0f\n")  # the header, not the .cu, is edited
    assert emit_cuda(cu, "sm_90a", cache=cache, only_cached=True) is None
    b = emit_cuda(cu, "sm_90a", cache=cache)
    assert b.ptx != a.ptx and "0f40400000" in b.ptx  # 3.0f


def test_templates_giving_one_name_are_said_even_when_only_the_sweep_learns_it(tmp_path, capsys, monkeypatch):
    """A kernel whose entry plan_sweep cannot know before building it (a registered kernel not yet in the cache)
    still gets one line saying why its row reads "not compared", never an exit 3 with nothing on stderr."""
    from ptxprobe.runs import request
    from tests.ptx_text import AXPY_PTX

    ptx = tmp_path / "k.ptx"
    ptx.write_text(AXPY_PTX)
    monkeypatch.setattr(request, "refuse_one_name", lambda exp, use_cache=True: None)  # as if it could not know
    rc = main(["rename-sweep", "-q", "--no-run", "--ptx", str(ptx), "-s", "names={base},axpy", "-s", "repeat=1",
               "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 3
    assert "names: the templates {base}, axpy give one name to k.ptx: nothing to compare it with" in err, err


STRING_CONSTEXPRS = """
import triton
import triton.language as tl

@triton.jit
def act_cast(X, Y, N, BLOCK: tl.constexpr, ACT: tl.constexpr, OUT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    if ACT == "relu":
        x = tl.maximum(x, 0.0)
    tl.store(Y + offs, x.to(OUT), mask=offs < N)
"""


def test_constexpr_strings_are_words_or_dtypes_as_the_body_uses_them(tmp_path, capsys):
    """A string constexpr is a word Triton compiles (ACT == "relu"); given where the body needs a dtype (.to(OUT))
    a plain "fp16" is that dtype; a body's integer (tl.arange) refuses a quoted number before Triton sees it."""
    from ptxprobe.sources.constexprs import uses

    (tmp_path / "k.py").write_text(STRING_CONSTEXPRS)
    sig = {"X": "*fp32", "Y": "*fp16", "N": "i32", "BLOCK": "constexpr", "ACT": "constexpr", "OUT": "constexpr"}
    (tmp_path / "k.json").write_text(json.dumps({"signature": sig,
                                                 "constexprs": {"BLOCK": 256, "ACT": "relu", "OUT": "fp16"}}))
    fn, sp, _ = tsrc.user_specialization(f"{tmp_path / 'k.py'}:act_cast", tmp_path / "k.json")
    import triton.language as tl

    assert sp.constexprs == {"BLOCK": 256, "ACT": "relu", "OUT": tl.float16}
    assert {k: uses(fn)[k][0] for k in ("BLOCK", "OUT")} == {"BLOCK": "int", "OUT": "dtype"}
    rc, out = run_cli(capsys, "--triton", f"{tmp_path / 'k.py'}:act_cast", "--spec", str(tmp_path / "k.json"),
                      "-s", "archs=sm_90a", "-o", str(tmp_path / "o"))
    assert rc == 0, out
