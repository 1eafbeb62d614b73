"""Launch specs for user kernels: parsing, expressions, checks against the entry's PTX parameters,
group planning and the GPU-free parts of the run stage (rows, numerics)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ptxprobe.cli import main
from ptxprobe.core.errors import SpecError
from ptxprobe.gpu.group import _rates, comparison
from ptxprobe.gpu.numerics import merged_numerics, numerics
from ptxprobe.gpu.plan import GpuRunConfig, plan_groups
from ptxprobe.gpu.timing import TimingPlan
from ptxprobe.sources import launch
from tests.conftest import make_experiment

pytestmark = pytest.mark.integration

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

AXPBY = """
extern "C" __global__ void axpby(float a, const float* x, double b, const double* y, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = (float)(a * x[i] + b * y[i]);
}
"""

AXPBY_LAUNCH = {
    "sizes": [{"n": 1 << 20}, {"n": 1 << 22}],
    "numerics_sizes": {"n": 4099},
    "grid": ["cdiv(n, 128)"],
    "block": [128],
    "bytes": "16 * n",
    "reference": f"{Path(__file__).resolve()}:axpby_reference",
    "tolerance": 1e-6,
    "args": [
        {"name": "a", "value": 1.5},
        {"name": "x", "dtype": "float32", "shape": ["n"]},
        {"name": "b", "value": -0.25},
        {"name": "y", "dtype": "float64", "shape": ["n"], "init": "rand", "scale": 4.0},
        {"name": "out", "dtype": "float32", "shape": ["n"], "output": True},
        {"name": "n", "value": "n"},
    ],
}


def axpby_reference(a, x, b, y, **_):
    return a * x + b * y


def write_spec(tmp_path, table: dict, name="axpby.toml", extra: dict | None = None):
    p = tmp_path / name
    p.write_text(json.dumps({**(extra or {}), "launch": table}) if name.endswith(".json") else _toml(table))
    return p


def _toml(table: dict) -> str:
    def val(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(v)

    return "[launch]\n" + "".join(f"{k} = {val(v)}\n" for k, v in table.items())


def test_spec_resolves_expressions_for_every_size_set(tmp_path):
    spec = launch.load_launch(write_spec(tmp_path, AXPBY_LAUNCH))
    assert [s["n"] for s in spec.size_sets()] == [1 << 20, 1 << 22]
    r = launch.resolve(spec, spec.numerics_size_set())
    assert r.grid == (33, 1, 1) and r.block == (128, 1, 1)  # cdiv(4099, 128) = 33
    assert r.shapes == {"x": (4099,), "y": (4099,), "out": (4099,)}
    assert r.scalars == {"a": 1.5, "b": -0.25, "n": 4099}
    assert r.bytes == 16 * 4099 and r.flops is None
    assert [a.name for a in spec.outputs] == ["out"] and spec.args[4].init == "nan"  # outputs start poisoned
    assert launch.evaluate("cdiv(n, 256) * 2 + n // 3 - 1", {"n": 1000}) == 4 * 2 + 333 - 1
    assert launch.size_label({"m": 2, "n": 3}) == "m=2,n=3"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"grid": None}, "'grid' is required"),
        ({"colour": "red"}, "unknown keys"),
        ({"grid": ["cdiv(q, 128)"]}, "unknown size 'q'"),
        ({"grid": ["__import__('os').getpid()"]}, "only numbers, sizes"),
        ({"grid": ["n +"]}, "bad expression"),
        ({"grid": [1, 1, 1, 1]}, "1 to 3 dimensions"),
        ({"sizes": {"n": "big"}}, "integer sizes"),
        ({"args": [{"name": "x", "dtype": "float32", "shape": ["n"]}]}, "output = true"),
        ({"args": [{"name": "x", "dtype": "floot32", "shape": ["n"], "output": True}]}, "not a torch dtype"),
        ({"args": [{"name": "x", "shape": ["n"], "output": True}]}, "needs a dtype"),
        ({"args": [{"name": "x", "value": 1, "shape": ["n"]}]}, "either 'shape'"),
        ({"args": [{"name": "x", "dtype": "float32", "shape": ["n"], "init": "lots", "output": True}]}, "init"),
        ({"args": [{"name": "x", "value": 2, "output": True}]}, "scalar cannot be an output"),
        ({"args": [{"name": "x", "dtype": "float32", "shape": ["n - n"], "output": True}]}, "empty dimension"),
        ({"reference": "no_colon"}, "module:function"),
    ],
)
def test_bad_launch_specs_say_what_is_wrong(tmp_path, change, message):
    table = {k: v for k, v in {**AXPBY_LAUNCH, **change}.items() if v is not None}
    with pytest.raises(SpecError, match=message):
        launch.load_launch(write_spec(tmp_path, table))


def test_spec_file_without_launch_table_and_unreadable_ones(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"num_warps": 4}))
    assert launch.load_launch(p) is None
    p.write_text("[1, 2]")
    with pytest.raises(SpecError, match="a table"):
        launch.load_launch(p)
    with pytest.raises(SpecError, match="not found"):
        launch.load_launch(tmp_path / "missing.toml")


@needs_nvcc
def test_spec_checked_against_the_entrys_ptx_parameters(tmp_path):
    from ptxprobe.sources.cuda import emit_cuda

    cu = tmp_path / "axpby.cu"
    cu.write_text(AXPBY)
    e = emit_cuda(cu, "sm_90a", "axpby")
    params = launch.entry_params(e.ptx, e.entry)
    assert [p.type for p in params] == ["f32", "u64", "f64", "u64", "u64", "u64"]
    spec = launch.load_launch(write_spec(tmp_path, AXPBY_LAUNCH))
    assert launch.scalar_ctypes(spec, params, e.entry) == {"a": "c_float", "b": "c_double", "n": "c_uint64"}
    short = launch.load_launch(write_spec(tmp_path, {**AXPBY_LAUNCH, "args": AXPBY_LAUNCH["args"][:5]}, "s.toml"))
    with pytest.raises(SpecError, match="5 launch arguments for the 6 parameters of axpby"):
        launch.check_against_source(short, e.ptx, e.entry, "cuda")
    swapped = [AXPBY_LAUNCH["args"][1], AXPBY_LAUNCH["args"][0], *AXPBY_LAUNCH["args"][2:]]
    bad = launch.load_launch(write_spec(tmp_path, {**AXPBY_LAUNCH, "args": swapped}, "b.toml"))
    with pytest.raises(SpecError, match="argument x is a tensor; parameter axpby_param_0 is .f32"):
        launch.check_against_source(bad, e.ptx, e.entry, "cuda")
    no_block = launch.load_launch(
        write_spec(tmp_path, {k: v for k, v in AXPBY_LAUNCH.items() if k != "block"}, "n.toml")
    )
    with pytest.raises(SpecError, match="needs 'block'"):
        launch.check_against_source(no_block, e.ptx, e.entry, "cuda")


@needs_nvcc
def test_cli_checks_the_launch_spec_before_any_work(tmp_path, capsys):
    cu = tmp_path / "axpby.cu"
    cu.write_text(AXPBY)
    good = write_spec(tmp_path, AXPBY_LAUNCH)
    argv = ["rename-sweep", "-q", "--json", "--no-run", "-s", "archs=sm_90a", "-s", "repeat=1"]
    rc = main([*argv, "--cu", str(cu), "--entry", "axpby", "--spec", str(good), "-o", str(tmp_path / "ok")])
    assert rc == 0
    assert {s["name"] for s in json.loads(capsys.readouterr().out)["summary"]} >= {"axpby", "cutlass_axpby"}
    bad = write_spec(tmp_path, {**AXPBY_LAUNCH, "args": AXPBY_LAUNCH["args"][:5]}, "bad.toml")
    rc = main([*argv, "--cu", str(cu), "--entry", "axpby", "--spec", str(bad), "-o", str(tmp_path / "bad")])
    assert rc == 2
    assert "5 launch arguments for the 6 parameters" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "bad" / "variants.jsonl").exists()  # nothing ran
    assert main([*argv, "--spec", str(good)]) == 2  # a spec with no user kernel


def test_triton_launch_args_must_be_the_runtime_parameters(tmp_path):
    spec = launch.load_launch(write_spec(tmp_path, AXPBY_LAUNCH))
    with pytest.raises(SpecError, match="non-constexpr parameters, in order"):
        launch.check_against_source(spec, "", "scale_rows", "triton-user", ["X", "Y", "N"])


@needs_nvcc
def test_user_groups_planned_per_size_set_and_ptxas_with_notes(tmp_path):
    cu = tmp_path / "axpby.cu"
    cu.write_text(AXPBY)
    spec = write_spec(tmp_path, AXPBY_LAUNCH)
    plain = tmp_path / "plain.cu"
    plain.write_text(AXPBY)
    exp = make_experiment(
        kernels=[],
        archs=["sm_90a"],
        ptxas=["triton", "newest"],
        cu_files=[f"{cu}:axpby={spec}", str(plain)],
    )
    cfg = GpuRunConfig()
    groups, notes = plan_groups(exp, cfg, "sm_90a")
    assert len(groups) == 4  # 2 size sets x 2 ptxas
    assert {g.group_id for g in groups} >= {f"user:{cu}:axpby@n=1048576", f"user:{cu}:axpby@n=4194304@ptxas=newest"}
    assert notes == [f"{plain}: static only (no spec: give --spec with a [launch] table to run it)"]
    groups, notes = plan_groups(exp, cfg, "sm_100a")  # a GPU the experiment does not build for
    assert groups == [] and "this GPU is sm_100a" in notes[0]


def test_rows_report_bandwidth_and_the_paired_comparison_on_the_cpu():
    import numpy as np

    from ptxprobe.gpu.timing import Sampled

    rng = np.random.default_rng(0)
    base = list(1.0 + 0.01 * rng.standard_normal(30))
    b = Sampled("{base}", times_ms=base, sm_clock_mhz=[1980] * 30, throttled=[False] * 30)
    jitter = 1.0 + 0.002 * rng.standard_normal(30)
    fast = Sampled("cutlass_{base}", times_ms=list(np.asarray(base) * 0.9 * jitter), sm_clock_mhz=[1980] * 30,
                   throttled=[False] * 30)
    plan = TimingPlan(n_boot=200)
    rates = _rates(b, {"flops": None, "bytes": 1e9}, plan, 0, None, {"gpu": "test", "arch": "sm_90a"}, None)
    assert rates["gbps"] == pytest.approx(1e9 / 1e-3 / 1e9 / np.median(base), rel=1e-6)
    assert rates["tflops"] is None and rates["pct_sol_cublas"] is None and rates["sm_clock_mhz"] == 1980
    c = comparison(b, fast, plan, 0)
    assert c["ratio_vs_baseline"] == pytest.approx(1 / 0.9, rel=2e-3)
    assert c["runtime_verdict"] == "faster" and c["p_value"] < 0.01 and c["rounds"] == 30
    same = comparison(b, Sampled("aa", times_ms=list(base)), plan, 0)
    assert same["ratio_vs_baseline"] == 1.0 and same["runtime_verdict"] == "equivalent"
    h200 = _rates(b, {"flops": 1e12}, plan, 0, 500.0, {"gpu": "NVIDIA H200", "arch": "sm_90a"}, "fp16")
    assert h200["peak_tflops_datasheet_at_clock"] == pytest.approx(989.4) and h200["pct_sol_cublas"] > 0


def test_numerics_for_every_element_width_on_the_cpu():
    import torch

    a = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float32)
    b = a.clone()
    b[1] = torch.nextafter(b[1], torch.tensor(-10.0))  # one ULP further from zero
    rec = numerics(b, a, a.double())
    assert rec["n_diff_vs_baseline"] == 1 and rec["max_ulp_vs_baseline"] == 1
    assert rec["rel_err_vs_reference"] > 0 and rec["fully_written"]
    ints = torch.tensor([1, 5, 7], dtype=torch.int32)
    rec_i = numerics(ints + torch.tensor([0, 0, 3], dtype=torch.int32), ints, None)
    assert rec_i["max_ulp_vs_baseline"] == 3 and rec_i["rel_err_vs_reference"] is None and rec_i["nan_count"] == 0
    h = torch.tensor([float("nan"), 1.0], dtype=torch.float16)
    merged = merged_numerics({"o": numerics(h, h, None), "i": rec_i})
    assert merged["nan_count"] == 1 and not merged["fully_written"] and merged["n_diff_vs_baseline"] == 1
    assert set(json.loads(merged["numerics_by_output"])) == {"o", "i"}


def test_entry_params_read_pointer_attributes_and_by_value_structs():
    ptx = (
        ".visible .entry k(\n\t.param .u64 .ptr .global .align 16 k_param_0,\n\t.param .u64 .ptr .align 1 k_param_1,\n"
        "\t.param .f32 k_param_2,\n\t.param .align 8 .b8 k_param_3[16]\n)\n{\n\tret;\n}\n"
        ".visible .entry empty()\n{\n\tret;\n}\n"
    )
    params = launch.entry_params(ptx, "k")
    assert [(p.name, p.type, p.count) for p in params] == [
        ("k_param_0", "u64", 1),
        ("k_param_1", "u64", 1),
        ("k_param_2", "f32", 1),
        ("k_param_3", "b8", 16),
    ]
    assert launch.entry_params(ptx, "empty") == []
    table = {
        **AXPBY_LAUNCH,
        "args": [
            {"name": "x", "dtype": "float32", "shape": ["n"]},
            {"name": "y", "dtype": "float32", "shape": ["n"], "output": True},
            {"name": "a", "value": 1.0},
            {"name": "s", "value": 0},
        ],
    }
    spec = launch.parse_launch(table, "k.toml")
    with pytest.raises(SpecError, match=r"parameter k_param_3 \(.b8\[16\]\) is passed by value"):
        launch.scalar_ctypes(spec, params, "k")
    from ptxprobe.core.errors import MalformedPtx

    with pytest.raises(MalformedPtx, match="no .entry missing"):
        launch.entry_params(ptx, "missing")


def test_a_reference_path_is_relative_to_the_spec_file_not_the_working_directory(tmp_path, monkeypatch):
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    (spec_dir / "ref.py").write_text("def axpby(a, x, b, y, **_):\n    return a * x + b * y\n")
    (spec_dir / "pkg").mkdir()
    (spec_dir / "pkg" / "refs.py").write_text("def f(**_):\n    return 0\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the spec is used from another directory
    spec = launch.load_launch(write_spec(spec_dir, {**AXPBY_LAUNCH, "reference": "ref.py:axpby"}))
    assert spec.reference == f"{(spec_dir / 'ref.py').resolve()}:axpby"
    from ptxprobe.gpu.workload import load_reference

    assert load_reference(spec.reference)(2.0, 1.0, 1.0, 3.0) == 5.0
    module_form = launch.load_launch(write_spec(spec_dir, {**AXPBY_LAUNCH, "reference": "pkg.refs:f"}, "m.toml"))
    assert module_form.reference == f"{(spec_dir / 'pkg' / 'refs.py').resolve()}:f"
    (elsewhere / "ref2.py").write_text("def g(**_):\n    return 0\n")  # beside the cwd, not the spec: not found
    with pytest.raises(SpecError, match=r"no file .*specs/ref2\.py \(paths in a spec are relative to the spec file"):
        launch.load_launch(write_spec(spec_dir, {**AXPBY_LAUNCH, "reference": "ref2.py:g"}, "r2.toml"))


def test_a_spec_with_a_todo_left_is_refused_with_every_unfilled_key(tmp_path):
    table = {**AXPBY_LAUNCH, "args": [{**a, "value": "TODO"} if a["name"] == "b" else a for a in AXPBY_LAUNCH["args"]]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"signature": {"x": "TODO"}, "launch": table}))
    with pytest.raises(SpecError, match=r'still "TODO" .*: signature\.x, launch\.args\[b\]\.value'):
        launch.load_kernel_spec(p)
