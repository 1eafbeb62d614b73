"""ptxprobe reduce: the PTX reducer on kernels written here, with predicates the tests control (answers known by
construction), the predicate's verdict over crafted rows (ptxas noise), --keep's evaluator, and the command on a
small FFMA loop with a real ptxas 13.0 (re-checked from scratch by the sweep, one removal further not interesting).
"""

from __future__ import annotations

import json
import re

import pytest

from ptxprobe.cli import main
from ptxprobe.core.errors import SpecError
from ptxprobe.reduce import ptxbody, remains
from ptxprobe.reduce.keep import holds, parse_keep, with_baseline_fields
from ptxprobe.reduce.predicate import judge_rows, overlapping
from ptxprobe.reduce.search import PASSES, reduce_ptx

unit = pytest.mark.unit  # the tests without ptxas; those with it are integration

LOOP_PTX = """.version 8.0
.target sm_90a
.address_size 64

\t// .globl\tloopk
.visible .entry loopk(
\t.param .u64 loopk_param_0,
\t.param .u32 loopk_param_1,
\t.param .u32 loopk_param_2
)
.maxntid 256, 1, 1
{
\t.reg .pred \t%p<3>;
\t.reg .f32 \t%f<16>;
\t.reg .b32 \t%r<8>;
\t.reg .b64 \t%rd<4>;
\t.shared .align 4 .b8 loopk_tile[1024];

\tld.param.u64 \t%rd1, [loopk_param_0];
\tld.param.u32 \t%r1, [loopk_param_1];
\tcvta.to.global.u64 \t%rd2, %rd1;
\tmov.u32 \t%r2, %tid.x;
\tmul.wide.u32 \t%rd3, %r2, 16;
\tadd.s64 \t%rd2, %rd2, %rd3;
\tmov.f32 \t%f1, 0f00000000;
\tmov.f32 \t%f2, 0f3F800000;
\tmov.u32 \t%r3, 0;
$L__BB0_1:
\tfma.rn.f32 \t%f1, %f2, %f2, %f1;
\tfma.rn.f32 \t%f3, %f1, %f2, %f1;
\tadd.s32 \t%r3, %r3, 1;
\tsetp.lt.s32 \t%p1, %r3, %r1;
\t@%p1 bra \t$L__BB0_1;
\tmul.f32 \t%f4, %f3, %f3;
\tst.global.v4.f32 \t[%rd2], {%f1, %f3, %f4, %f1};
\tret;
}
"""

# a second entry, a branch into a block, an unrolled run and dead code around the same loop
BIG_PTX = LOOP_PTX.replace("\tret;\n}\n", "\t@%p1 bra \t$L__BB0_9;\n" + "".join(
    f"\tadd.f32 \t%f{5 + k % 4}, %f{5 + k % 4}, %f2;\n\tmul.f32 \t%f{9 + k % 4}, %f{5 + k % 4}, %f2;\n"
    for k in range(8)) + "\tst.global.f32 \t[%rd2], %f5;\n$L__BB0_9:\n\tadd.s32 \t%r5, %r2, 7;\n\tret;\n}\n") + """
.visible .entry other(
\t.param .u64 other_param_0
)
{
\tret;
}
"""


def opcodes(ptx: str, entry: str = "loopk") -> list[str]:
    return [s.opcode for s in ptxbody.parse(ptx, entry).instructions()]


def valid_structure(ptx: str, entry: str = "loopk") -> list[str]:
    """What a test-side reading says is broken: a branch to a missing label, a register, parameter or buffer
    used but not declared (written here, apart from the module under test)."""
    body = ptxbody.parse(ptx, entry)
    text = re.sub(r"//[^\n]*", "", ptx)
    labels = set(re.findall(r"^\s*([$\w]+):", text, re.M))
    problems = [f"branch to missing {t}" for t in re.findall(r"\bbra(?:\.uni)?\s+([$\w]+)\s*;", text)
                if t not in labels]
    families = {m.group(1): int(m.group(2)) for m in re.finditer(r"\.reg\s+\.\w+\s+%(\w+?)<(\d+)>", text)}
    for reg in set(re.findall(r"%([a-z]+)(\d+)\b", text)):
        if reg[0] not in families or int(reg[1]) >= families[reg[0]]:
            problems.append(f"register %{reg[0]}{reg[1]} not declared")
    declared = {d.name for d in body.decls if d.kind in ("param", "symbol")}
    for used in set(re.findall(r"\[(\w+)\]", text)) | set(re.findall(r"\[(\w+)\s*\+", text)):
        if not used.startswith("%") and used not in declared and not used.isdigit():
            problems.append(f"{used} used but not declared")
    return problems


def interesting_by_construction(ptx: str) -> bool:
    """An fma inside a loop and a global store: what the reducer must keep, and nothing more."""
    body = ptxbody.parse(ptx, "loopk")
    loops = ptxbody.loops(body)
    in_loop = any(s.opcode.startswith("fma") for a, b in loops for s in body.stmts[a:b + 1])
    return in_loop and any(s.opcode.startswith("st.global") for s in body.stmts)


@unit
def test_reduces_to_what_the_predicate_needs_and_every_candidate_is_valid_ptx():
    offered: list[str] = []

    def test(texts):
        offered.extend(texts)
        return [interesting_by_construction(t) for t in texts]

    out = reduce_ptx(BIG_PTX, "loopk", test, batch=2)
    assert sorted(opcodes(out.ptx)) == ["bra", "fma.rn.f32", "st.global.v4.f32"] or \
        sorted(opcodes(out.ptx)) == ["bra", "fma.rn.f32", "st.global.f32"]
    assert out.one_minimal and out.steps
    assert ".entry other" not in out.ptx and "loopk_tile" not in out.ptx and "loopk_param" not in out.ptx
    assert ".maxntid" not in out.ptx
    broken = {t: valid_structure(t) for t in offered}
    assert not {t: p for t, p in broken.items() if p}, "a candidate offered to the predicate is not valid PTX"
    # 1-minimal: no single unit of any pass can go from the result
    body = ptxbody.parse(out.ptx, "loopk")
    for _name, units_of in PASSES:
        for unit in units_of(body):
            assert not interesting_by_construction(ptxbody.remove(out.ptx, "loopk", set(unit)))


@unit
def test_the_test_side_validity_reading_sees_a_broken_candidate():
    dangling = LOOP_PTX.replace("$L__BB0_1:\n", "")
    undeclared = LOOP_PTX.replace("\t.reg .b64 \t%rd<4>;\n", "")
    assert valid_structure(LOOP_PTX) == []
    assert any("missing" in p for p in valid_structure(dangling))
    assert any("%rd" in p for p in valid_structure(undeclared))


@unit
def test_removing_a_label_removes_the_branches_to_it_and_dead_code_goes():
    body = ptxbody.parse(LOOP_PTX, "loopk")
    label = next(s for s in body.stmts if s.kind == "label")
    out = ptxbody.remove(LOOP_PTX, "loopk", set(label.lines))
    assert "bra" not in out and valid_structure(out) == []
    # the store keeps what it reads; the loop counter's compare goes with the branch
    assert "setp" not in out and "st.global" in out and "fma.rn.f32" in out


@unit
def test_unused_declarations_are_found_and_used_ones_kept():
    body = ptxbody.parse(LOOP_PTX, "loopk")
    unused = {(d.kind, d.name) for d in ptxbody.unused_decls(body)}
    assert unused == {("param", "loopk_param_2"), ("symbol", "loopk_tile")}
    out = ptxbody.without(body, {d.first for d in ptxbody.unused_decls(body)})
    assert re.search(r"loopk_param_1\s*\)", out)  # no comma left before ')'
    assert valid_structure(out) == []


@unit
def test_ladder_levels_are_checked_before_any_work():
    from ptxprobe.reduce.ladder import parse_ladder

    assert parse_ladder("registers - baseline_registers >= 16, 8,32") == ("registers - baseline_registers",
                                                                           [8.0, 16.0, 32.0])
    for bad in ("registers", "registers >= ", "registers >= a,b", "regs >= 1", ">= 3"):
        with pytest.raises(SpecError):
            parse_ladder(bad)


@unit
def test_ablation_tries_only_the_options_a_ptxas_lists():
    from ptxprobe.reduce.ablate import options_to_try

    tried = options_to_try({"long": ["--fmad", "--opt-level", "--verbose"], "short": []})
    assert tried == ["--opt-level=0", "--opt-level=1", "--opt-level=2", "--fmad=false"]
    assert options_to_try(None) == []


@unit
def test_structure_says_what_remains():
    s = remains.structure(LOOP_PTX, "loopk")
    assert s["loops"][0]["classes"]["fma.f32"] == 2
    assert "a loop of 5 instructions" in s["in_words"] and s["parameters"] == 3 and s["buffers"] == 1


# --- the predicate's verdict (the sweep's), over rows written here --------------------------------------------


def _row(template: str, repeat: int, code: str, status: str = "ok", registers: int = 10, **extra) -> dict:
    name = "k" if template == "{base}" else "cutlass_k"
    return {"kernel": "k", "arch": "sm_100a", "ptxas_sha256": "x", "ptxas_flags": "-lineinfo", "name": name,
            "baseline_name": "k", "name_template": template, "_baseline_template": "{base}", "repeat": repeat,
            "status": status, "machine_code_sha256": code, "text_sha256": code, "registers": registers,
            "capmerc_bytes": extra.get("capmerc_bytes", 100), "error": "" if status == "ok" else "ptxas failed",
            "n_instructions": 16}


@unit
def test_ptxas_noise_is_not_a_difference():
    # repeat 0 of the two names differs, but the baseline's own spread covers the renamed outputs
    noisy = [_row("{base}", 0, "a"), _row("{base}", 1, "b"), _row("cutlass_{base}", 0, "b"),
             _row("cutlass_{base}", 1, "c")]
    assert overlapping(noisy)
    assert not judge_rows(noisy, None).interesting
    apart = [_row("{base}", 0, "a"), _row("{base}", 1, "a"), _row("cutlass_{base}", 0, "c"),
             _row("cutlass_{base}", 1, "c")]
    assert not overlapping(apart)
    j = judge_rows(apart, None)
    assert j.interesting and j.why == "differs"


@unit
def test_failed_assemblies_are_uninteresting():
    both = [_row("{base}", 0, "", "failed"), _row("cutlass_{base}", 0, "", "failed")]
    assert judge_rows(both, None).why == "both names fail"
    renamed = [_row("{base}", 0, "a"), _row("cutlass_{base}", 0, "", "crashed")]
    assert not judge_rows(renamed, None).interesting


@unit
def test_keep_narrows_the_difference():
    rows = [_row("{base}", 0, "a", registers=40, capmerc_bytes=1000), _row("{base}", 1, "a", registers=40),
            _row("cutlass_{base}", 0, "c", registers=60), _row("cutlass_{base}", 1, "c", registers=60)]
    assert judge_rows(rows, parse_keep("registers - baseline_registers >= 16")).interesting
    j = judge_rows(rows, parse_keep("registers - baseline_registers >= 32"))
    assert not j.interesting and j.why == "keep is false"
    # a baseline field the sweep's rows lack comes from the baseline's assemblies when they agree
    assert judge_rows(rows, parse_keep("n_instructions == baseline_n_instructions")).interesting


@pytest.mark.parametrize("expr", ["__import__('os').system('true')", "registers.real", "[registers]",
                                  "registers if 1 else 2", "'a' < 'b'", "lambda: 1", "regs > 1", "", "registers >",
                                  "open('x')"])
@unit
def test_keep_refuses_anything_but_arithmetic_over_fields(expr):
    with pytest.raises(SpecError):
        parse_keep(expr)


@unit
def test_keep_evaluates_without_eval():
    k = parse_keep("abs(registers - baseline_registers) >= 16 and not spill_store_bytes")
    assert holds(k, {"registers": 20, "baseline_registers": 40, "spill_store_bytes": 0})
    assert not holds(k, {"registers": 20, "baseline_registers": 30, "spill_store_bytes": 0})
    assert not holds(k, {"registers": 20, "baseline_registers": None, "spill_store_bytes": 0})  # unknown: no
    assert not holds(parse_keep("registers / (capmerc_bytes - capmerc_bytes) > 1"), {"registers": 1,
                                                                                     "capmerc_bytes": 3})
    assert with_baseline_fields({"registers": 1}, [{"text_bytes": 5}, {"text_bytes": 5}])["baseline_text_bytes"] == 5


@unit
def test_cli_bad_inputs_are_one_line_usage_errors(tmp_path, capsys):
    ptx = tmp_path / "loop.ptx"
    ptx.write_text(LOOP_PTX)
    out = str(tmp_path / "out")
    cases = [
        (["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "-o", out, "--keep", "__import__('os')"], "--keep"),
        (["reduce", "--arch", "sm_90a", "-o", out], "one input"),
        (["reduce", "attention", "--ptx", str(ptx), "--arch", "sm_90a", "-o", out], "one input"),
        (["reduce", "--ptx", str(tmp_path / "none.ptx"), "--arch", "sm_90a", "-o", out], "no such file"),
        (["reduce", "--ptx", str(ptx), "--arch", "sm_42", "-o", out], "sm_42"),
        (["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "-o", out, "--name", "bad name"], "not a valid"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (argv, err)


# --- with a real ptxas ---------------------------------------------------------------------------------------


@pytest.mark.integration
def test_reduce_command_on_an_ffma_loop_with_ptxas_13(tmp_path, capsys, installed_ptxas_13):
    from collections import Counter

    from ptxprobe.core.cache import Cache
    from ptxprobe.static.experiment import experiment_from_dict
    from ptxprobe.static.sweep import run_sweep
    from ptxprobe.static.verdicts import DIFFERS

    ptx = tmp_path / "loop.ptx"
    ptx.write_text(LOOP_PTX)
    out = tmp_path / "red"
    argv = ["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "--ptxas", installed_ptxas_13.path,
            "-j", "2", "-o", str(out), "-q"]
    assert main(argv) == 1
    said = capsys.readouterr().out
    assert "reduced loop.ptx" in said and "ptxas calls" in said and "1-minimal" in said
    rec = json.loads((out / "reduce.json").read_text())
    assert rec["status"] == "done" and rec["one_minimal"] and rec["ptxas_calls"] > 0
    assert rec["after"]["instructions"] < rec["before"]["instructions"]
    minimal = (out / "minimal.ptx").read_text()
    # the sweep, from scratch (no cache), still says the name changes the minimal kernel's code
    exp = experiment_from_dict({"name": "recheck", "kernels": [], "ptx_files": [str(out / "minimal.ptx")],
                                "ptxas": [installed_ptxas_13.path], "names": ["{base}", "cutlass_{base}"],
                                "repeat": {"default": 2}})
    res = run_sweep(exp, tmp_path / "sweep", jobs=2, cache=Cache(tmp_path / "nocache", enabled=False),
                    progress=False, argv=["test"])
    assert Counter(r["verdict"] for r in res.rows if not r["is_baseline"]).keys() <= set(DIFFERS)
    # a re-run resumes from DIR: nothing to assemble again, same result
    assert main(argv) == 1
    capsys.readouterr()
    again = json.loads((out / "reduce.json").read_text())
    assert again["resumed"] and again["ptxas_calls"] == 0 and (out / "minimal.ptx").read_text() == minimal
    # with -O2 the name stops mattering: no difference to start from, exit 0, one line
    assert main([*argv[:-3], "-o", str(tmp_path / "o2"), "--flags=-O2"]) == 0
    assert capsys.readouterr().out.startswith("no difference to start from")
    # a ladder: the plain level reduces, an impossible register growth has no difference to start from
    ladder = ["--ladder", "registers - baseline_registers >= 0,500"]
    assert main([*argv[:-3], "-o", str(tmp_path / "ladder"), *ladder]) == 1
    levels = json.loads((tmp_path / "ladder" / "ladder.json").read_text())["levels"]
    assert levels[0]["status"] == "done" and levels[0]["keep"] is None
    assert levels[-1]["status"] == "no difference" and levels[-1]["keep"].endswith(">= 500")
    capsys.readouterr()
    # the options ablation agrees with it: on the input, --opt-level=2 makes the name stop mattering
    assert main([*argv, "--ablate"]) == 1
    assert "stop mattering on the input" in capsys.readouterr().out
    ablation = json.loads((out / "reduce.json").read_text())["ablation"]
    by_option = {a["option"]: a["outcome"] for a in ablation["input"]}
    assert by_option["--opt-level=2"] == "name stops mattering"
    assert set(by_option.values()) <= {"name stops mattering", "name still matters", "not compared"}


@pytest.mark.integration
def test_ctrl_c_keeps_the_best_so_far_and_a_rerun_resumes(tmp_path, capsys, installed_ptxas_13, monkeypatch):
    from ptxprobe.reduce import run

    ptx = tmp_path / "loop.ptx"
    ptx.write_text(LOOP_PTX)
    out = tmp_path / "red"
    real = run.reduce_ptx

    def interrupted(text, entry, test, **kw):
        kw["on_step"](text.replace("\tmov.u32 \t%r2, %tid.x;\n", ""), [])  # one accepted step, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "reduce_ptx", interrupted)
    argv = ["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "--ptxas", installed_ptxas_13.path, "-o", str(out),
            "-q"]
    assert main(argv) == 130
    rec = json.loads((out / "reduce.json").read_text())
    assert rec["status"] == "interrupted" and "%tid.x" not in (out / "minimal.ptx").read_text()
    seen = {}

    def resumed(text, entry, test, **kw):
        seen["start"] = text
        return real(text, entry, test, **kw, passes=())  # the resume is what is tested, not another reduction

    monkeypatch.setattr(run, "reduce_ptx", resumed)
    capsys.readouterr()
    assert main(argv) == 1
    assert "%tid.x" not in seen["start"]
    assert json.loads((out / "reduce.json").read_text())["resumed"]


@pytest.mark.integration
def test_a_missing_ptxas_is_a_tool_failure(tmp_path, capsys):
    ptx = tmp_path / "loop.ptx"
    ptx.write_text(LOOP_PTX)
    assert main(["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "--ptxas", "9.9", "-o", str(tmp_path / "o")]) == 3
    assert "no ptxas 9.9" in capsys.readouterr().err


@unit
def test_the_reducer_and_the_code_plant_read_one_body_span():
    """Both read an entry's body through ptx.text.brace_span: braces in comments do not count, a prototype has no
    body, and the plant's entry span is the reducer's."""
    from ptxprobe.core.errors import MalformedPtx
    from ptxprobe.ptx import plant
    from ptxprobe.ptx.text import brace_span

    ptx = ("\t.version 8.0\n\t.target sm_90a\n\t.address_size 64\n.extern .entry k(.param .u64 p);\n"
           ".visible .entry k(.param .u64 p)\n{  // } a brace in a comment\n\t.reg .b32 %r<2>;\n"
           "\t{ // inline asm scope\n\tmov.u32 %r1, 0;\n\t}\n\tret;\n}\n")
    lines = ptx.split("\n")
    assert brace_span(lines, 3) == (3, 3)  # the prototype
    assert brace_span(lines, 4) == (5, 11)
    assert plant._body(lines, "k") == (4, 5, 11)
    defined_only = [ln for ln in lines if not ln.startswith(".extern")]
    assert ptxbody._entry_span(defined_only, "k") == plant._body(defined_only, "k") == (3, 4, 10)
    with pytest.raises(MalformedPtx):
        brace_span(lines[:10], 4)


@pytest.mark.unit
def test_remains_in_words_never_read_part_of_a_list_as_all_of_it():
    from collections import Counter

    from ptxprobe.reduce.remains import _notable, counted

    six = Counter({"fma": 6, "ld.global": 5, "st.global": 4, "mov": 3, "add": 2, "setp": 1})
    assert _notable(six).endswith(", 1 more classes") and "setp" not in _notable(six)
    assert _notable(Counter({"fma": 2, "mov": 1})) == "fma x2, mov x1"
    assert (counted(1), counted(2), counted(0)) == ("1 instruction", "2 instructions", "0 instructions")


@pytest.mark.integration
def test_a_kernel_whose_name_holds_the_trigger_is_reduced_and_written_under_its_trigger_free_name(
        tmp_path, capsys, installed_ptxas_13):
    """Its baseline is the name spelled without the trigger (``{base_untriggered}``), so minimal.ptx is renamed to
    it as the reduction goes: that rename once failed at the first accepted step (exit 4, a ptxprobe bug), which
    every FlashAttention-2 kernel of vLLM's wheel met (a ``cutlass`` type in its template arguments)."""
    from ptxprobe.ptx.rename import apply_template
    from ptxprobe.ptx.text import entries_of

    ptx = tmp_path / "loop.ptx"
    ptx.write_text(LOOP_PTX.replace("loopk", "cutlass_loopk"))
    out = tmp_path / "red"
    code = main(["reduce", "--ptx", str(ptx), "--arch", "sm_90a", "--ptxas", installed_ptxas_13.path, "-j", "2",
                 "-o", str(out), "-q", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["status"] == "done", doc
    assert doc["baseline_name"] == apply_template("{base_untriggered}", "cutlass_loopk") != "cutlass_loopk"
    assert entries_of((out / "minimal.ptx").read_text()) == [doc["baseline_name"]]
    assert entries_of((out / "current.ptx").read_text()) == ["cutlass_loopk"]
