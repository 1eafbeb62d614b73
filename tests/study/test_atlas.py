"""The atlas's first step, recomputed from its committed records: the census agrees with itself and with the
library sweeps committed before it, and the pilot's cells with what the sweeps found."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"


def _json(run: str, name: str) -> dict:
    return json.loads((RESULTS / run / name).read_text())


def test_the_census_counts_hold_together_and_meet_the_numbers_known_before():
    census = _json("2026-12-05-cpu-atlas-pilot", "census.json")["libraries"]
    for lib in census.values():
        for r in lib["libraries"]:
            assert 0 < r["kernels"] <= r["entries"] and r["source_functions"] <= r["kernels"]
            assert r["trigger_in_identifier"] + r["trigger_elsewhere"] <= r["entries"]
    fa2 = next(r for r in census["vllm"]["libraries"] if r["member"].endswith("_vllm_fa2_C.abi3.so"))
    assert fa2["entries"] == 2904 == fa2["trigger_elsewhere"] and fa2["sass_archs"] == ["sm_80"]  # the count
    sweeps = {s["wheel"]: s for s in _json("2026-12-05-cpu-library-sweeps", "sweeps.json")["sweeps"]}
    xformers = sweeps[census["xformers"]["file"]]
    assert xformers["wheel_sha256"] == census["xformers"]["sha256"]
    assert xformers["libraries"][0]["ptx_modules"] == census["xformers"]["libraries"][0]["modules"]


def test_the_pilot_found_what_the_library_sweeps_found():
    """The FA2 sparse forward kernels change code on sm_90a with ptxas 13.0 (32 of 32 before, and here), xformers'
    50 do not; each cell's per-kernel time is its wall time over its kernels."""
    cells = _json("2026-12-05-cpu-atlas-pilot", "pilot.json")["cells"]
    sweeps = {s["label"]: s for s in _json("2026-12-05-cpu-library-sweeps", "sweeps.json")["sweeps"]}
    fa2 = next(c for c in cells if c["library"] == "vllm")
    before = sweeps["vLLM FlashAttention-2 (sparse forward)"]["answer"][0]
    assert (fa2["kernels"], fa2["changed"]) == (before["kernels"], before["changed"]) == (32, 32)
    assert all(c["changed"] == 0 for c in cells if c["library"] == "xformers")
    for c in cells:
        assert c["wall_seconds_per_kernel"] == pytest.approx(c["wall_seconds"] / c["kernels"], abs=0.01)
        assert c["failed"] == 0 and c["ptxas_runs"] <= c["assemblies"]


def test_the_triton_libraries_cells_hold_together():
    """Each cell of the interpreter-captured Triton libraries: every changed kernel classified once and counted once
    by its register change; the control changes nothing (a difference under it would be no name effect of the
    trigger's); a cell's kernels are the same at every release (four, three at sm_100a, where Triton's own ptxas is
    12.9.86); liger-kernel's count as first seen by hand. A CuTe DSL library's kernels, born with the trigger, are
    counted under their own names against the trigger spelled out, and the control respells it."""
    rec = _json("2026-12-06-cpu-atlas-triton", "interpreted.json")
    assert {c["library"] for c in rec["cells"]} == set(rec["libraries"]) and rec["cells"]
    for c in rec["cells"]:
        assert c["ops_ran"] <= c["ops_tried"] == len(c["ops"]) and len({r["kernels"] for r in c["releases"]}) == 1
        assert len(c["releases"]) == (3 if c["arch"] == "sm_100a" else 4)
        for r in c["releases"]:
            trigger, control = (("cutlass_{base}", "xutlass_{base}") if "cutlass_{base}" in r["names"] else
                                ("{base}", "{base_control}"))
            t = r["names"][trigger]
            assert t["changed"] == t["fewer_registers"] + t["more_registers"] + t["same_registers"]
            assert t["changed"] == sum(t["kinds"].values()) == sum(t["register_deltas"].values()) <= r["kernels"]
            assert t["changed_functions"] == len(t["changed_function_names"]) <= r["source_functions"]
            assert r["names"][control]["changed"] == (  # FA4's one exception, stable over ptxas's repeats
                1 if (c["library"], c["arch"], r["ptxas_version"]) == ("flash-attn-4", "sm_90a", "13.5.37") else 0)
    liger = next(c for c in rec["cells"] if c["library"] == "liger-kernel" and c["arch"] == "sm_90a")
    first = next(r for r in liger["releases"] if r["ptxas_version"] == "12.8.93")
    assert "ops.rms_norm:_rms_norm_backward_kernel" in first["names"]["cutlass_{base}"]["changed_function_names"]


def _recomputed_cute_cell(c: dict) -> list[str]:
    """What is wrong with one CuTe DSL cell against its own ops and register deltas (empty: nothing)."""
    wrong = []
    # a call's compiles: quack's says whether it compiled its one kernel, FA4's lists the kernel classes compiled
    compiles = [(o, [o["function"]] if o["compiled"] is True else [] if o["compiled"] is False else
                 [k["class"] for k in o["compiled"]]) for o in c["ops"] if o["ran"]]
    if "--interpret" in c["command"] or f"--arch {c['arch']}" not in c["command"]:
        wrong.append(f"command {c['command']}")
    if not c["ops_tried"] == len(c["ops"]) or c["ops_ran"] != sum(o["ran"] for o in c["ops"]) or any(
            "refused" not in o for o in c["ops"] if not o["ran"]):  # a call not run is one the library refused
        wrong.append("ops ran")
    if sum(o["ptx_files"] for o in c["ops"]) != sum(len(k) for _, k in compiles):  # one PTX a compile
        wrong.append("ptx files")
    for r in c["releases"]:
        t, where = r["names"]["{base}"], f"{c['arch']} {r['ptxas_version']}"
        deltas = [int(d) for d, n in t["register_deltas"].items() for _ in range(n)]
        if set(r["names"]) != {"{base}", "{base_control}"}:
            wrong.append(f"{where}: names {sorted(r['names'])}")
        if (r["kernels"], r["source_functions"]) != (sum(len(k) for _, k in compiles),
                                                     len({f for _, k in compiles for f in k})):
            wrong.append(f"{where}: kernels {r['kernels']}, source functions {r['source_functions']}")
        if (t["fewer_registers"], t["more_registers"], t["same_registers"], t["changed"]) != (
                sum(d < 0 for d in deltas), sum(d > 0 for d in deltas), sum(d == 0 for d in deltas), len(deltas)):
            wrong.append(f"{where}: fewer / more / same / changed")
        if t["median_register_delta"] != (statistics.median(deltas) if deltas else None):
            wrong.append(f"{where}: median")
        if t["spill_changed"] == t["stack_changed"] == 0 and (
                t["kinds"].get("registers", 0), t["kinds"].get("schedule only", 0)) != (
                t["fewer_registers"] + t["more_registers"], t["same_registers"]):
            wrong.append(f"{where}: kinds")
        if r["names"]["{base_control}"]["changed"] != 0:
            wrong.append(f"{where}: the control")
    return wrong


def test_the_cute_dsl_library_cells_recompute_from_their_ops():
    """quack-kernels (CuTe DSL, compiled ahead of time: capture --arch, no interpreter) at sm_90a and sm_100a: its
    kernels are born ``kernel_cutlass_…``, so each is swept as shipped against its name with the trigger spelled out,
    the control respelling it; a cell's kernels are the compiles its driver said it made (one PTX each), its source
    functions the quack compile functions it called; the summary counts recompute from the register deltas; the
    control changes nothing; the GEMM changes at sm_100a and not at sm_90a, as first seen. A planted fault (one count
    off in a copy) is found."""
    rec = _json("2026-12-06-cpu-atlas-triton", "interpreted.json")
    assert rec["libraries"]["quack-kernels"]["capture"] == "arch"
    cells = {c["arch"]: c for c in rec["cells"] if c["library"] == "quack-kernels"}
    assert set(cells) == {"sm_90a", "sm_100a"}
    for c in cells.values():
        assert _recomputed_cute_cell(c) == [], c["arch"]
    gemm = {arch: any("Gemm" in n for r in c["releases"] for n in r["names"]["{base}"]["changed_function_names"])
            for arch, c in cells.items()}
    assert gemm == {"sm_90a": False, "sm_100a": True}
    planted = json.loads(json.dumps(cells["sm_100a"]))
    planted["releases"][1]["names"]["{base}"]["more_registers"] += 1
    planted["releases"][2]["kernels"] -= 1
    found = _recomputed_cute_cell(planted)
    assert found == ["sm_100a 13.0.88: fewer / more / same / changed", "sm_100a 13.0.88: kinds",
                     "sm_100a 13.5.37: kernels 57, source functions 12"]


def test_the_flash_attention_4_cells_recompute_from_their_calls():
    """FlashAttention-4 (CuTe DSL, its own interface compiling under torch's FakeTensorMode: capture --arch) at sm_90a
    and sm_100a: every shape (head dims 64 to 256, GQA and not) in bf16 and fp16, causal and not, called three ways
    (inference forward, training forward, backward); a cell's kernels are the compiles its driver said FA4 made (one
    PTX each), its source functions the kernel classes, Sm90 at sm_90a and Sm100 at sm_100a, as FA4 picked them for
    FLASH_ATTENTION_ARCH; the counts recompute from the register deltas; the control changes nothing but one forward
    kernel at sm_90a with ptxas 13.5.37 (as first seen). A planted fault (a kernel dropped, a change moved) is found."""
    rec = _json("2026-12-06-cpu-atlas-triton", "interpreted.json")
    assert rec["libraries"]["flash-attn-4"]["capture"] == "arch"
    cells = {c["arch"]: c for c in rec["cells"] if c["library"] == "flash-attn-4"}
    assert set(cells) == {"sm_90a", "sm_100a"}
    for arch, c in cells.items():  # the control's one change: a forward kernel at 13.5.37, stable over repeats
        assert _recomputed_cute_cell(c) == (["sm_90a 13.5.37: the control"] if arch == "sm_90a" else []), arch
        calls = {(o["dtype"], o["shape"]["head_dim"], o["shape"]["causal"], o["op"]) for o in c["ops"]}
        assert len(calls) == len(c["ops"]) and {o["op"] for o in c["ops"]} == {"fwd", "fwd_train", "bwd"}
        assert {o["dtype"] for o in c["ops"]} == {"bf16", "fp16"} and {64, 128, 256} <= {d for _, d, _, _ in calls}
        main = {k["class"] for o in c["ops"] for k in o["compiled"] if "Postprocess" not in k["class"]
                and "Preprocess" not in k["class"]}
        assert main == {f"FlashAttentionForwardSm{arch[3:-1]}", f"FlashAttentionBackwardSm{arch[3:-1]}"}, main
    planted = json.loads(json.dumps(cells["sm_90a"]))
    planted["releases"][0]["kernels"] -= 1
    t = planted["releases"][3]["names"]["{base}"]
    t["same_registers"], t["more_registers"] = t["same_registers"] + 1, t["more_registers"] - 1
    found = _recomputed_cute_cell(planted)
    assert found[0].startswith("sm_90a 12.8.93: kernels ") and found[1:] == [
        "sm_90a 13.5.37: fewer / more / same / changed", "sm_90a 13.5.37: kinds", "sm_90a 13.5.37: the control"], found


def test_the_interpreter_check_recomputes_from_its_two_captures(tmp_path):
    """interpret-check.json is compare_captures of the two committed captures (the GPU's and the interpreter's),
    and every kernel only one side holds is of a function both captured (the same calls, another specialisation)
    or of dyt, whose host code reads the GPU's SM count."""
    import shutil

    from experiments.atlas.interpreted import compare_captures

    run = RESULTS / "2026-12-06-h100-interpret-check"
    for side in ("gpu-capture", "interpreted-capture"):
        (tmp_path / side).mkdir()
        shutil.copy(run / f"{side}.captured.json", tmp_path / side / "captured.json")
    again = compare_captures(tmp_path / "gpu-capture", tmp_path / "interpreted-capture")
    recorded = _json("2026-12-06-h100-interpret-check", "interpret-check.json")
    assert again == {k: v for k, v in recorded.items() if k != "command"}
    assert again["same_ptx"] < again["gpu_kernels"] and again["same_ptx"] >= 0.75 * again["gpu_kernels"]
    sides = {side: {k["entry"] for k in json.loads((run / f"{side}.captured.json").read_text())["kernels"]}
             for side in ("gpu-capture", "interpreted-capture")}
    for k in again["only_gpu"] + again["only_interpreted"]:
        entry = k.split(" ")[0]
        assert entry.startswith("_dyt_") or entry in sides["gpu-capture"] & sides["interpreted-capture"], k


def test_a_record_merged_with_a_read_back_keeps_the_cells_and_timings_it_had():
    """``--out`` merges: cells not run are kept; a cell read back from its run directory (no timings: nothing ran)
    keeps the timings its run recorded, and takes the new summary (here a new field)."""
    from experiments.atlas.interpreted import merged

    before = {"libraries": {"a": {}, "b": {}}, "cells": [
        {"library": "a", "arch": "sm_90a", "wall_seconds": 10.0, "cpu_seconds": 20.0, "releases": [{}]},
        {"library": "b", "arch": "sm_90a", "wall_seconds": 5.0, "cpu_seconds": 6.0}]}
    now = {"libraries": {"a": {}}, "cells": [{"library": "a", "arch": "sm_90a", "wall_seconds": None,
                                              "cpu_seconds": None, "releases": [{"baseline_spread": 3}]}]}
    out = merged(before, now)
    cells = {c["library"]: c for c in out["cells"]}
    assert set(cells) == {"a", "b"} and cells["b"] == before["cells"][1]
    assert cells["a"]["wall_seconds"] == 10.0 and cells["a"]["cpu_seconds"] == 20.0
    assert cells["a"]["releases"] == [{"baseline_spread": 3}]
    ran = {"libraries": {"a": {}}, "cells": [{**now["cells"][0], "wall_seconds": 1.0, "cpu_seconds": 2.0}]}
    assert {c["library"]: c for c in merged(before, ran)["cells"]}["a"]["wall_seconds"] == 1.0  # a rerun's own


def test_the_shipped_cells_count_the_census_kernels_and_hold_together():
    """Each cell of the wheels' shipped PTX: its kernels are the census's distinct bodies (xformers whole: the
    census's count; vLLM's FA2 sparse forward family: the pilot's 32), the same at every release, every one's
    trigger placed once; every changed kernel classified once and counted once by its register change."""
    rec = _json("2026-12-06-cpu-atlas-shipped", "shipped.json")
    census = _json("2026-12-05-cpu-atlas-pilot", "census.json")["libraries"]
    assert {c["library"] for c in rec["cells"]} == {"xformers", "vllm"}
    for c in rec["cells"]:
        kernels = {r["kernels"] for r in c["releases"]}
        assert len(kernels) == 1 and sum(c["trigger_where"].values()) == kernels.pop()
        if c["library"] == "xformers":
            (lib,) = census["xformers"]["libraries"]
            assert c["entries"] == "all" and c["entries_swept"] == lib["entries"]
            assert c["releases"][0]["kernels"] == lib["kernels"]
            assert c["releases"][0]["source_functions"] <= lib["source_functions"]
        elif c["entries"] == "*flash_fwd_sparse*":
            assert c["releases"][0]["kernels"] == 32
            assert c["trigger_where"] == {"elsewhere": 32}  # a cutlass type in the template arguments of each
        else:  # the stratified samples: at most 12 or 40 of each source function's kernels (an entry of several
            # modules sweeps in each: more kernels than entries chosen)
            n = int(c["entries"].split()[2])
            assert c["entries"].startswith(f"at most {n} of each source function's kernels") and n in (12, 40)
            assert (c["wall_seconds"] is None) == (c["cpu_seconds"] is None)
            assert c["releases"][0]["source_functions"] <= sum(lib["source_functions"]
                                                               for lib in census["vllm"]["libraries"])
        for r in c["releases"]:  # entries of which only some hold the trigger (xformers, vLLM's sample), or all
            mixed = c["trigger_where"].get("none", 0) and set(c["trigger_where"]) - {"none"}
            trigger, control = (("{base_triggered}", "{base_triggered_control}") if mixed else
                                ("{base}", "{base_control}"))
            assert set(r["names"]) == {trigger, control}
            t = r["names"][trigger]
            assert t["changed"] == t["fewer_registers"] + t["more_registers"] + t["same_registers"]
            assert t["changed"] == sum(t["kinds"].values()) == sum(t["register_deltas"].values()) <= r["kernels"]
            assert t["changed_functions"] == len(t["changed_function_names"]) <= r["source_functions"]


def test_the_prune_check_summary_recomputes_from_its_kernels():
    """What FINDINGS says of kernels cut from their modules is what the committed entries say (each library's counts
    and seconds, and that a kernel with other bytes keeps its registers and instructions)."""
    from experiments.atlas.prune_check import summary

    rec = _json("2026-12-06-cpu-atlas-prune-check", "prune_check.json")
    assert set(rec["summary"]) == {"xformers", "vllm"}
    for name, s in rec["summary"].items():
        rows = [r for r in rec["entries"] if r["library"] == name]
        assert summary(rows) == s and s["assembled_both_ways"] > 0
        for r in rows:
            assert r["entries_left_out"] <= r["module_entries"] - 1
            assert r["same_bytes"] <= r["same_masked"]
    cut = _json("2026-12-06-cpu-atlas-prune-check", "shipped_cut.json")
    whole = {(c["library"], c["arch"], c["entries"]) for c in _json("2026-12-06-cpu-atlas-shipped",
                                                                     "shipped.json")["cells"]}
    assert {(c["library"], c["arch"], c["entries"]) for c in cut["cells"]} <= whole  # the same cells, swept cut


def test_a_stratified_sample_takes_at_most_so_many_bodies_of_each_function_evenly_spaced():
    """Of each source function (its library and own identifier) at most N distinct bodies, one entry each, spread
    over its bodies in order; a function with fewer is taken whole; two entries of one body count once."""
    from experiments.atlas.shipped import stratified

    bodies = {f"lib.so:g{i}.ptx:_Z4gemmILi{i:02d}EEvv": f"g{i}" for i in range(10)}  # gemm<i>, 10 bodies
    bodies |= {"lib.so:c.ptx:_Z4copyILi1EEvv": "c1", "lib.so:c.ptx:_Z4copyILi2EEvv": "c1",  # one body, two entries
               "other.so:n.ptx:_Z4gemmILi99EEvv": "h0"}  # gemm of another library: a function apart
    sample = stratified(bodies, 4)
    gemm = [k for k in sample if k.startswith("lib.so") and "gemm" in k]
    assert gemm == [f"lib.so:g{i}.ptx:_Z4gemmILi{i:02d}EEvv" for i in (0, 2, 5, 7)]  # every 2.5th, in order
    assert [k for k in sample if "copy" in k] == ["lib.so:c.ptx:_Z4copyILi1EEvv"]
    assert "other.so:n.ptx:_Z4gemmILi99EEvv" in sample and len(sample) == 6
    assert len(stratified(bodies, 20)) == 12  # every body once
    assert not any("gemm" in k for k in stratified(bodies, 4, without=("gemm",)))  # a function left out
    # entries of one module are taken together: the sweep cuts the module to them (no module rule thins a sample)
    together = {f"lib.so:m.ptx:_Z4gemmILi{i:02d}EEvv": f"g{i}" for i in range(9)}
    assert stratified(together, 4) == [f"lib.so:m.ptx:_Z4gemmILi{i:02d}EEvv" for i in (0, 2, 4, 6)]


def test_the_reductions_of_shipped_kernels_hold_together():
    """Each reduction kept what its kernel's change calls for (half its register change, in its direction; any
    difference where its registers did not move), ended smaller, and says where an MMA or FFMA remains by the
    classes of its loops."""
    from experiments.atlas.reduce_sample import FMA, MMA, function_of, keep_for

    assert function_of({"source_kind": "ptx", "kernel": "cute-quackrmsnormRMSNorm-99e31fd553.ptx"}) == \
        "cute-quackrmsnormRMSNorm"  # a captured kernel: its file name less the content hash
    assert function_of({"source_kind": "lib", "kernel": "lib.so:m.ptx:_Z4gemmILi1EEvv"}) == "gemm"

    rec = _json("2026-12-06-cpu-atlas-reduce", "reductions.json")
    assert rec["kernels"]
    for k in rec["kernels"]:
        row = {"registers": k["register_change"], "baseline_registers": 0,
               "spill_store_bytes": 1 if k["spills"] else 0, "baseline_spill_store_bytes": 0}
        assert k["keep"] == keep_for(row) or (not k["register_change"] and k["spills"])
        if k["status"] == "done":
            assert k["after_instructions"] < k["before_instructions"] and k["pair_verdict"] == "differs"
            assert k["mma_in_loop"] == any(c.startswith(MMA) for c in k["loop_classes"])
            assert k["fma_in_loop"] == any(c.startswith(FMA) for c in k["loop_classes"])
            assert k["loops"] or not k["loop_classes"]


def test_the_atlas_figure_draws_what_the_cells_hold_trigger_against_baseline_in_either_direction():
    """Each heat-map cell is the trigger's share of its cell's kernels at that release, read for the direction the
    cell was swept in (a CuTe DSL library's kernels compared as shipped, {base}, against the trigger spelled out; a
    Triton library's renamed cutlass_; a wheel's as shipped or added): the control's share drawn instead was planted
    and fails here (the DSL libraries' controls change 0 or 1 kernels, their triggers 17 to 60). Every register
    change a histogram draws belongs to a changed kernel of that library's sm_90a cell."""
    from experiments.findings import atlas_figure

    labels, versions, shares, kernels = atlas_figure.shares()
    cells = atlas_figure._cells()
    assert len(labels) == len(cells) == shares.shape[0] and len(versions) == shares.shape[1]
    for i, (_, direction, cell) in enumerate(cells):
        for r in cell["releases"]:
            names = r["names"]
            if direction == "removed":
                expected = names["{base}"]["changed"]
            elif direction == "added":
                expected = names["cutlass_{base}"]["changed"]
            else:
                expected = next(v for t, v in names.items() if "control" not in t)["changed"]
            assert shares[i, versions.index(r["ptxas_version"])] * r["kernels"] == pytest.approx(expected)
            control = next(v for t, v in names.items() if "control" in t or t.startswith("xutlass"))["changed"]
            assert expected >= control
    for name, deltas in atlas_figure.register_changes().items():
        changed = {max(r["kernels"] for r in c["releases"]): atlas_figure.trigger_names(c, c["releases"][0])
                   for _, _, c in cells if c["library"] == name and c["arch"] == "sm_90a"}
        assert sum(deltas.values()) == changed[max(changed)]["changed"]


def test_kernel_functions_are_counted_by_their_decorators_as_imported(tmp_path):
    """A wheel's kernel functions found through the names its modules import them under: ``@triton.jit``, a bare
    ``@jit`` from Triton, ``@triton.jit(repr=…)``, ``@gluon.jit``, a method under ``@cute.kernel``; a kernel under
    ``@triton.autotune`` counts once; a docstring naming ``@cute.kernel``, a ``functools`` decorator and a ``jit`` of
    another package count nothing (resolving imports planted away: the bare ``@jit`` is lost and the test fails). The
    committed coverage record holds together: its counts are its lists' lengths."""
    import zipfile

    from experiments.atlas.coverage import coverage

    source = '''
import functools
import triton
from triton import jit
from triton.experimental import gluon
import cutlass.cute as cute
from numba import jit as numba_jit

"""Designed to be marshaled across the `@cute.kernel` boundary."""

@triton.jit
def a(x): pass

@jit
def b(x): pass

@triton.autotune(configs=[], key=[])
@triton.jit(repr=lambda _: "c")
def c(x): pass

@gluon.jit
def d(x): pass

class Op:
    @cute.kernel
    def kernel(self): pass

@functools.cache
def e(): pass

@numba_jit
def f(): pass
'''
    wheel = tmp_path / "lib-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("lib/ops/k.py", source)
        z.writestr("lib/broken.py", "def (:\n")
    cov = coverage(wheel)
    assert cov["decorated"] == {"triton.jit": 3, "gluon.jit": 1, "cute.kernel": 1}
    assert cov["functions"]["triton.jit"] == ["lib.ops.k:a", "lib.ops.k:b", "lib.ops.k:c"]
    assert cov["functions"]["cute.kernel"] == ["lib.ops.k:kernel"] and cov["modules_with_kernels"] == 1
    committed = _json("2026-12-06-cpu-atlas-triton", "coverage.json")["libraries"]
    for lib in committed.values():
        assert lib["decorated"] == {k: len(v) for k, v in lib["functions"].items()}


def test_the_speed_record_reads_a_program_ab_as_ptxprobe_wrote_it():
    """The speed sample's reader on a committed program A/B (capture --run of Triton's tutorial attention on the
    H200): its kernels and what the trigger changed from the capture's sweep, each arm's comparison as ab.json holds
    it, every run counted."""
    from experiments.atlas.speed import op_record

    run = RESULTS / "2026-12-03-h200-capture-tutorial-8rounds"
    rec = op_record(run, {})
    ab = _json(run.name, "ab/ab.json")
    assert rec["kernels"] == len(_json(run.name, "captured.json")["kernels"]) and rec["rounds"] == ab["rounds"]
    assert rec["runs"] == len(ab["runs"]) >= rec["runs_ok"] > 0
    assert set(rec["comparisons"]) == {c["arm"] for c in ab["comparisons"]} == {"trigger", "control", "aa"}
    for c in ab["comparisons"]:
        assert rec["comparisons"][c["arm"]]["ratio"] == c["ratio"] and rec["comparisons"][c["arm"]]["verdict"] == \
            c["verdict"]
    assert rec["changed_by_trigger"] == len(rec["changed_functions"]) == 0  # sm_90a: the tutorial's code unchanged


def test_a_capture_made_elsewhere_is_swept_here_as_a_cell(tmp_path):
    """The compiled-models step: a capture's PTX (here one Triton kernel, its captured.json and driver lines written
    as a GPU capture writes them) rename-swept at its own arch as a cell; a capture for another arch is refused."""
    import shutil
    import sys

    from experiments.atlas.compiled import compiled_cell

    src = Path(__file__).resolve().parents[1] / "inputs" / "triton39_row_softmax.ptx"
    cap = tmp_path / "capture"
    (cap / "ptx").mkdir(parents=True)
    shutil.copy(src, cap / "ptx" / "row_softmax-0.ptx")
    (cap / "captured.json").write_text(json.dumps({"seconds": 1.0, "kernels": [  # a GPU capture's: no function
        {"entry": "row_softmax", "arch": "sm_90a", "ptx": "ptx/row_softmax-0.ptx", "metadata": {"name": "x"}}]}))
    (cap / "program.log").write_text('atlas-driver: {"op": "m", "ran": true}\n')
    cell = compiled_cell(sys.executable, cap, "sm_90a", ["triton"], tmp_path / "runs")
    (release,) = cell["releases"]
    assert cell["library"] == "inductor" and cell["ops_ran"] == 1 and release["kernels"] == 1
    assert release["source_functions"] == 1 and release["names"]["cutlass_{base}"]["changed"] in (0, 1)
    from experiments.atlas.interpreted import kernel_functions

    assert kernel_functions(json.loads((cap / "captured.json").read_text())) == {"row_softmax-0.ptx": "row_softmax"}
    assert set(release["names"]) == {"cutlass_{base}", "xutlass_{base}"}
    with pytest.raises(SystemExit, match="compiled for"):
        compiled_cell(sys.executable, cap, "sm_100a", ["triton"], tmp_path / "runs")


def test_the_speed_trial_holds_together():
    """The first speed trial: every run it kept is an arm's run with a measure, no arm was judged on one round, and
    the kernel the trigger changed is the one whose rows differ in the capture's sweep."""
    import gzip

    from experiments.atlas.speed import op_record

    run = RESULTS / "2026-12-06-h100-atlas-speed-trial"
    rec = op_record(run, {"liger_kernel": "liger-kernel"})
    ab = _json(run.name, "ab/ab.json")
    assert rec["runs"] == rec["runs_ok"] == len(ab["runs"]) and all(r["value"] > 0 for r in ab["runs"])
    assert {c["verdict"] for c in rec["comparisons"].values()} == {"too_few_runs"}
    rows = [json.loads(x) for x in gzip.decompress((run / "sweep" / "variants.jsonl.gz").read_bytes()).splitlines()]
    base = {r["kernel"]: r["code_sha256"] for r in rows if r["name_template"] == "{base}"}
    differ = {r["kernel"] for r in rows
              if r["name_template"] == "cutlass_{base}" and r["code_sha256"] != base[r["kernel"]]}
    assert rec["changed_by_trigger"] == len(differ) == 1 and rec["library"] == "liger-kernel"


def test_the_cost_benchmark_holds_together():
    """Each benchmarked cell: its ratio is its two wall times', the bare loop ran every assembly the sweep made (no
    fewer ptxas runs than kernels swept whole), a wheel's extraction measured apart is part of the sweep's time."""
    for c in _json("2026-12-06-cpu-atlas-bench", "bench.json")["cells"]:
        assert c["ratio"] == pytest.approx(c["sweep_wall_s"] / c["bare_ptxas_wall_s"], abs=2e-3)
        assert c["assemblies"] > 0 and c["exit_code"] in (0, 1) and c["goal_ratio"] == 1.3
        assert 0 < c.get("extraction_s", 1) < c["sweep_wall_s"]
