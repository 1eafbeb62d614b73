"""The typed schema of result rows: static rows (``results.parquet``) and GPU rows (``runtime.parquet``).

The README's column lists are generated from these tables (``columns_markdown``) and a test
checks that every row a sweep writes has exactly these columns with values of these types.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

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


def problem_label(row: dict) -> str:
    """A runtime row's problem: ``N=4096`` for attention, the size set (``m=2048,n=2048,k=2048``) for a user kernel."""
    seq_len = row.get("seq_len")
    if seq_len is not None and seq_len == seq_len:  # not None, not NaN
        return f"N={int(seq_len)}"
    return str(row.get("sizes", "-"))


def short_names(labels, width: int) -> dict[str, str]:
    """Kernel labels shortened to ``width`` the same way in every table: first the ``/`` parts that tell no two
    labels apart (from the end: the config, then the head dim ...), then the middle elided."""
    labels = list(dict.fromkeys(labels))
    parts = {label: label.split("/") for label in labels}

    def shown(label: str, dropped: set[int]) -> str:
        return "/".join(p for i, p in enumerate(parts[label]) if i not in dropped)

    dropped: set[int] = set()
    for i in range(max((len(p) for p in parts.values()), default=0) - 1, 0, -1):
        if all(len(shown(label, dropped)) <= width for label in labels):
            break
        if len({shown(label, dropped | {i}) for label in labels}) == len(labels):
            dropped.add(i)
    out = {}
    for label in labels:
        head, _, rest = shown(label, dropped).partition("/")
        room = width - len(rest) - 1 if rest else width
        if len(head) > room >= 5:  # the family's name elided in its middle: its start and end tell them apart
            head = _elide(head, room)
        out[label] = _elide(head + ("/" + rest if rest else ""), width)
    uses = Counter(out.values())
    alike = [label for label in labels if uses[out[label]] > 1]
    if alike:  # elided alike: each keeps the words in which it differs from the kernels that start as it does
        out.update(_elided_apart({label: shown(label, dropped) for label in labels}, alike, width))
    still: dict[str, list[str]] = {}
    for label in sorted(labels):
        still.setdefault(out[label], []).append(label)
    for name, same in still.items():  # still alike: numbered, in order
        if len(same) < 2:
            continue
        for k, label in enumerate(same, 1):
            out[label] = _elide(name, width - len(f" #{k}")) + f" #{k}"
    return out


def _elided_apart(texts: dict[str, str], keys: list[str], width: int) -> dict[str, str]:
    """``keys``' texts, whose middles were elided alike (instantiations differing deep inside template arguments),
    each cut to ``width`` as its start, then the words in which it differs from the texts that start as it does
    (each word once, in order), then its end: ``Kernel<SparseGemm…bfloat16_t…ColumnMajor…>>``."""
    tokens = {key: re.findall(r"\w+|\s+|.", text) for key, text in texts.items()}
    out = {}
    for key in keys:
        text, own = texts[key], tokens[key]
        head = text[: max(8, width // 4)].rstrip()
        at: set[int] = set()
        for other_key, other in tokens.items():
            if other_key == key or not texts[other_key].startswith(head):
                continue
            for tag, i1, i2, _, _ in SequenceMatcher(None, own, other, autojunk=False).get_opcodes():
                if tag != "equal":
                    at.update(range(i1, i2))
        differing = list(dict.fromkeys(own[i] for i in sorted(at) if own[i].strip()))
        tail = "".join(own[-2:]) if len(own) > 2 else ""
        shown = head + "…" + "…".join(differing) + "…" + tail
        out[key] = shown if len(shown) <= width else _elide(shown, width)
    return out


def _elide(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    tail = max(1, (width - 1) // 2)
    return text[: width - 1 - tail] + "…" + text[-tail:]
