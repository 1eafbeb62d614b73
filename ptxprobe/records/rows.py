"""The rows a run directory holds: static rows (``results.parquet``, derived from the variant log) and GPU rows
(``runtime.parquet``, from the runtime log), each column with its type and meaning.

docs/schema.md's column lists are generated from these tables (``columns_markdown``), and the tests check that
every row a sweep writes has exactly these columns with values of these types (``check_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass

STR, INT, FLOAT, BOOL, LIST = "str", "int", "float", "bool", "list"
_PY = {STR: (str,), INT: (int,), FLOAT: (float, int), BOOL: (bool,), LIST: (list, tuple)}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str
    nullable: bool = True


def _cols(spec: str) -> tuple[Column, ...]:
    out = []
    for line in spec.strip().splitlines():
        name, typ, doc = (p.strip() for p in line.split("|", 2))
        nullable = not typ.endswith("!")
        out.append(Column(name, typ.rstrip("!"), doc, nullable))
    return tuple(out)


STATIC = _cols("""
variant_id | str! | hash of the kernel, the name template and the assembly key: the row's identity in the log
assembly_key | str! | content key of the assembly: renamed PTX bytes, ptxas sha256, arch, flags, repeat index
kernel | str! | the source's label (registered spec key, file path, function), plus the entry when it has several
family | str! | registered family name, or the input kind (ptx, cubin, cuda, triton)
dtype | str | registered kernels: element type
head_dim | int | registered kernels: head dimension
causal | bool | registered kernels: causal mask
config | str | registered kernels: block config label
arch | str! | target (sm_90a, ...)
ptxas_version | str! | ptxas release
ptxas_sha256 | str! | the ptxas binary's sha256
ptxas_flags | str! | flags besides -v and --gpu-name
name_template | str! | the name template ({base} is the function's own identifier in the entry symbol)
name | str! | the entry symbol assembled
baseline_name | str! | the baseline template's name for this entry
repeat | int! | repeat index (ptxas may differ run to run)
ptx_sha256 | str! | sha256 of the renamed PTX assembled
source_ptx_sha256 | str! | sha256 of the source's PTX before renaming
source_kind | str! | registered, ptx, cubin, cuda or triton
specialization | str | Triton launch specialisation (JSON)
rename_sites | int! | places the renamer changed
rename_equivalent | bool! | the independent rename check found only name sites changed
rename_checked_sites | int! | name sites the independent check found (code, data labels, DWARF strings)
renamed_with_module | bool | every entry of the module renamed at once (one ptxas run gives each entry's code)
module_respelled | int | other symbols of the module the name template respelled ({module_untriggered}), else 0
status | str! | ok, failed, crashed, timeout, unsupported_ptx, unsupported_option, bad_cubin, tool_mismatch, worker_lost
error | str! | why it failed (ptxas's message, or how it ended); empty when ok
retriable | bool! | a timeout or an outside kill: re-run on resume
ptxas_seconds | float | wall time of the ptxas run
cached | bool! | served from the content-addressed cache
note | str | e.g. a lowered .version
cubin_sha256 | str | sha256 of the cubin
registers | int | ptxas -v registers of the entry
spill_store_bytes | int | ptxas -v spill stores
spill_load_bytes | int | ptxas -v spill loads
stack_bytes | int | ptxas -v stack frame
barriers | int | ptxas -v named barriers
text_sha256 | str | sha256 of the entry's .text
code_sha256 | str | sha256 of .text and .nv.capmerc: the instructions
machine_code_sha256 | str | "the same machine code", name left out: code, records, sizes, shared alignment, callees
machine_code_version | int | its definition (2: with the shared alignment; absent in runs recorded under 1)
machine_code_v1_sha256 | str | the same under definition 1 (no shared alignment): what older runs are compared on
text_bytes | int | size of .text
capmerc_bytes | int | size of .nv.capmerc.text.<entry> (sm_100+)
merc_bytes | int | size of the .nv.merc.* family
n_instructions | int | instructions in .text
shared_bytes | int | static shared memory
shared_align | int | the static shared section's alignment (0: none)
eiattr_registers | int | REGCOUNT from .nv.info
run_at | str! | when the row was logged (UTC)
is_baseline | bool! | the baseline template's row
n_runs | int! | ok assemblies of this name in its group
distinct_outputs | int! | distinct code hashes among them
baseline_distinct_outputs | int! | distinct code hashes of the baseline name
same_text_as_baseline | bool | this row's .text is one the baseline produced
same_code_as_baseline | bool | this row's code hash is one the baseline produced
verdict | str! | baseline, identical, differs, differs_unrepeated, differs_within_noise, failed, option_unsupported
verdict_confidence | float | 1 - u^n (Good-Turing u of baseline outputs not yet seen, n variant runs)
baseline_registers | int | the baseline's registers when it had one value
baseline_capmerc_bytes | int | the baseline's capmerc size when it had one value
""")

RUNTIME = _cols("""
group_id | str! | the timed group: source at one problem, one ptxas
kernel | str! | source label
family | str! | family or input kind
label | str! | what was timed: a name template, {base}#AA, {base}#slowed, sdpa_<backend>
name_template | str | the template, for name variants
name | str! | the entry name (or the label)
baseline_name | str! | the baseline's entry name
is_baseline | bool! | the baseline template
arch | str! | the GPU's arch
median_ms | float | median time per launch (null when not timed)
ratio_vs_baseline | float | baseline time / this time (> 1: faster); null when not timed (identical code)
ratio_ci_low | float | 95 % interval
ratio_ci_high | float | 95 % interval
ratio_of_means | float | mean baseline time / mean time over the paired rounds (beside the Hodges-Lehmann ratio)
runtime_verdict | str! | faster, slower, straddles_margin, negligible, equivalent, inconclusive; identical-code
verdict_rule | str | margin+bh: faster/slower beyond the margin; interval+bh: when significant; absent: interval alone
rounds | int! | timing rounds (0: not timed)
regime | str | burst (short interleaved units, one clock for both codes) or sustained (each arm held alone)
clock_mhz | float | median SM clock over the compared rounds (both arms)
clock_iqr_mhz | float | interquartile range of that clock
clock_delta_mhz | float | median per-round clock of this arm minus the baseline's (0 when they shared it)
throttled_share | float | share of samples a power or thermal limit held the clock in (a held window: in most of it)
power_w | float | median board power over the compared rounds
power_limit_w | float | the power limit the card enforced (null: not recorded)
clock_slope_per_100mhz | float | the per-round log ratio's change per 100 MHz of SM clock
clock_slope_low | float | its interval (HAC at b = 1, fixed-b; conservative: at least 95 %)
clock_slope_high | float | its 95 % interval
clock_dependent | bool | the slope's interval excludes 0: the gain moved with the clock
""")


def check_rows(rows: list[dict], schema: tuple[Column, ...], exact: bool = True) -> list[str]:
    """Problems with rows against a schema: missing or unknown columns, nulls, wrong types."""
    problems: list[str] = []
    names = {c.name for c in schema}
    for i, r in enumerate(rows):
        missing = [c.name for c in schema if c.name not in r]
        if missing:
            problems.append(f"row {i}: missing {missing}")
        extra = sorted(set(r) - names)
        if exact and extra:
            problems.append(f"row {i}: columns not in the schema {extra}")
        for c in schema:
            v = r.get(c.name)
            if v is None:
                if not c.nullable and c.name in r:
                    problems.append(f"row {i}: {c.name} is null")
                continue
            if isinstance(v, bool) and c.type in (INT, FLOAT):
                problems.append(f"row {i}: {c.name} is a bool, expected {c.type}")
            elif not isinstance(v, _PY[c.type]):
                problems.append(f"row {i}: {c.name}={v!r} is not {c.type}")
    return problems


def columns_markdown(schema: tuple[Column, ...]) -> str:
    """The README's column list: ``name`` (type): doc, one line each."""
    return "\n".join(f"- `{c.name}` ({c.type}{'' if c.nullable else ', always set'}): {c.doc}" for c in schema)
