"""Generate the parts of docs/ that the code states: the CLI reference, the row schema, the defaults.

    python docs/generate.py           # rewrite docs/cli.md and the marked blocks in docs/*.md
    python docs/generate.py --check   # exit 1 if any of them differs from what the code says

Nothing here is typed by hand: every option, default, column and constant is read from ptxprobe itself.
tests/test_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

GENERATOR = "docs/generate.py"


def start(name: str) -> str:
    return f"<!-- generated:{name} ({GENERATOR}) -->"


def end(name: str) -> str:
    return f"<!-- /generated:{name} -->"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --- the CLI reference -----------------------------------------------------------------------------


def _argument(a: argparse.Action) -> str:
    if a.choices and not isinstance(a.choices, dict):
        return "{" + ",".join(str(c) for c in a.choices) + "}"
    if a.nargs == 0:
        return ""
    if a.metavar:
        return str(a.metavar)
    return a.dest.upper() if a.option_strings else ""


def _default(a: argparse.Action) -> str:
    d = a.default
    if d is None or d is argparse.SUPPRESS or d is False or d == [] or a.nargs == 0 and d is not True:
        return ""
    if isinstance(d, list):
        return "`" + " ".join(str(x) for x in d) + "`"
    return f"`{d}`"


def _options_table(p: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | argument | default | what it does |", "|---|---|---|---|"]
    for a in p._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        flags = ", ".join(f"`{s}`" for s in a.option_strings) if a.option_strings else f"`{a.metavar or a.dest}`"
        rows.append(f"| {flags} | {_cell(_argument(a))} | {_cell(_default(a))} | {_cell(a.help or '')} |")
    return rows


def cli_markdown() -> str:
    from ptxprobe.cli import build_parser
    from ptxprobe.cli.parser import EPILOG

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    out = ["# Command reference", "",
           f"Generated from ptxprobe's argument parser by `python {GENERATOR}`; `ptxprobe COMMAND --help` prints the "
           "same. Every command takes `-v`/`-q`; those with `--json` print exactly one JSON document on stdout and "
           "send progress and notes to stderr.", "",
           "Exit codes (every command whose section below gives none of its own): "
           + " ".join(EPILOG.removeprefix("exit codes:").split()) + ".", "",
           "| command | does |", "|---|---|"]
    out += [f"| [`ptxprobe {n}`](#ptxprobe-{n}) | {_cell(helps.get(n, ''))} |" for n in sub.choices]
    for name, sp in sub.choices.items():
        own = [] if not sp.epilog or sp.epilog == EPILOG else ["", " ".join(sp.epilog.split())]  # its own epilog
        out += ["", f"## ptxprobe {name}", "", _cell(helps.get(name, "")), *own, "", *_options_table(sp)]
    out += ["", "Top-level options: " + ", ".join(f"`{s}`" for a in p._actions for s in a.option_strings) + "."]
    return "\n".join(out) + "\n"


# --- marked blocks ---------------------------------------------------------------------------------


def columns() -> str:
    from ptxprobe.records.rows import RUNTIME, STATIC, columns_markdown

    return "\n".join(["Static rows (`results.parquet`):", "", columns_markdown(STATIC), "",
                      "GPU rows (`runtime.parquet`), the columns every row has:", "", columns_markdown(RUNTIME)])


def records() -> str:
    """Every record a run directory holds as a JSON document: its file, layout version and fields."""
    from ptxprobe.records import RECORDS, GroupRecord, Record

    out: list[str] = []
    seen: set[type] = set()

    def section(cls: type[Record]) -> None:
        if cls in seen:
            return
        seen.add(cls)
        where = (f"`{cls.FILE}`, layout {cls.SCHEMA_VERSION}" + (" (`schema_version`)" if cls.VERSIONED else "")
                 if cls.FILE else "held inside another record")
        out.extend([f"### {cls.__name__}", "", f"{' '.join((cls.__doc__ or '').split())} ({where})", "",
                    "| key | type | what it holds |", "|---|---|---|"])
        nested = []
        for f in cls.schema():
            out.append(f"| `{f.name}` | {_cell(f.type)}{', always set' if f.required else ''} | {_cell(f.doc)} |")
            nested += [t for t in Record.__subclasses__() if f"list of {t.__name__}" in f.type or f.type == t.__name__]
        out.append("")
        for t in nested:
            section(t)

    for cls in (*RECORDS, GroupRecord):  # the documents, then a GPU run's group log line
        section(cls)
    return "\n".join(out).rstrip()


def api_surface() -> str:
    """The names ptxprobe.api exports beyond its calls, where each lives and the first line of what it says."""
    import inspect

    from ptxprobe import api

    rows = ["| name | is | what it is |", "|---|---|---|"]
    for name in sorted(api.SURFACE, key=str.lower):
        module, attr = api.surface_target(name)
        value = getattr(api, name)
        where = f"`{module}`" if attr is None else f"`{module}.{attr}`"
        doc = inspect.getdoc(value) if (inspect.ismodule(value) or callable(value)) else None
        first = " ".join((doc or "a constant").split("\n\n")[0].split())
        rows.append(f"| `{name}` | {where} | {_cell(first[:160] + ('…' if len(first) > 160 else ''))} |")
    return "\n".join(rows)


def _fields_table(cls, skip: tuple[str, ...] = ()) -> str:
    rows = ["| key | default |", "|---|---|"]
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            d = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            d = f.default_factory()  # type: ignore[misc]
        else:
            d = "(required)"
        if dataclasses.is_dataclass(d):
            rows.append(f"| `{f.name}` | the table below |")
            continue
        rows.append(f"| `{f.name}` | `{_cell(json.dumps(d))}` |")
    return "\n".join(rows)


def sweep_defaults() -> str:
    """The [sweep] keys as files spell them (flat: the registered families' axes among them)."""
    from ptxprobe.static.experiment import Experiment

    rows = ["| key | default |", "|---|---|"]
    rows += [f"| `{k}` | `{_cell(json.dumps(v))}` |" for k, v in Experiment(name="").to_json().items()
             if k not in ("name", "description", "run", "source")]
    return "\n".join(rows)


def run_defaults() -> str:
    from ptxprobe.gpu.plan import GpuRunConfig

    return _fields_table(GpuRunConfig)


def timing_defaults() -> str:
    from ptxprobe.gpu.timing import TimingPlan

    return _fields_table(TimingPlan)


def launch_keys() -> str:
    from ptxprobe.sources.launch import ARG_KEYS, INITS, LAUNCH_KEYS, SPEC_KEYS

    return "\n".join([f"- top-level spec keys: {', '.join(f'`{k}`' for k in sorted(SPEC_KEYS))}",
                      f"- `[launch]` keys: {', '.join(f'`{k}`' for k in sorted(LAUNCH_KEYS))}",
                      f"- keys of one `args` entry: {', '.join(f'`{k}`' for k in sorted(ARG_KEYS))}",
                      f"- `init` values: {', '.join(f'`{k}`' for k in INITS)}"])


def method_constants() -> str:
    from ptxprobe.gpu.calibrate import AA_LABELS, CRITERIA, SIZING_REPLAYS
    from ptxprobe.gpu.plan import PLANTED, GpuRunConfig
    from ptxprobe.gpu.timing import DESIGNS, STOPPINGS, TimingPlan
    from ptxprobe.reports.repro import BETWEEN_RUN_SD, MEASURED_BETWEEN_RUN
    from ptxprobe.stats.paired import EQUIVALENCE_MARGIN, INTERVAL_METHODS

    t, r = TimingPlan(), GpuRunConfig()

    def pct(x: float) -> str:
        return f"{x * 100:g} %"

    rows = [("designs (`[run.timing] design`)", ", ".join(f"`{d}`" for d in DESIGNS) + f"; default `{t.design}`"),
            ("interval methods (`[run.timing] interval`)",
             ", ".join(f"`{m}`" for m in INTERVAL_METHODS) + f"; default `{t.interval}`"),
            ("interleaved unit length (`segment_ms`)", f"{t.segment_ms:g} ms"),
            ("sample length per label (`min_sample_ms`)", f"{t.min_sample_ms:g} ms"),
            ("warm-up per label before a block (`warmup_s`)", f"{t.warmup_s:g} s"),
            ("extra warm-up before a process's first block (`card_warmup_s`)", f"{t.card_warmup_s:g} s"),
            ("rounds: minimum, batch, `max_rounds`", f"{t.min_rounds}, {t.batch_rounds}, {t.max_rounds}"),
            ("target 95 % half-width (`target_halfwidth`)", pct(t.target_halfwidth)),
            ("ceiling half-width at `max_rounds` (`ceiling_halfwidth`)", pct(t.ceiling_halfwidth)),
            ("extra rounds above the ceiling (`overflow_rounds`)", str(t.overflow_rounds)),
            ("when comparisons stop (`stopping`)",
             ", ".join(f"`{m}`" for m in STOPPINGS) + f"; default `{t.stopping}`"),
            ("equivalence margin (TOST, `margin`)", "± " + pct(EQUIVALENCE_MARGIN)),
            ("reference (torch SDPA) rounds (`reference_rounds`)", str(t.reference_rounds)),
            ("planted slowdowns", ", ".join(pct(p) for p in PLANTED) + f"; `[run] plants` default `{r.plants}`"),
            ("A/A copies of the baseline", ", ".join(f"`{a}`" for a in AA_LABELS)),
            ("calibration passes when", f"A/A false-positive rate ≤ {pct(CRITERIA['aa_false_positive_rate_max'])}; "
             + ", ".join(f"planted {pct(float(k))} found in ≥ {v:.0%} of its groups"
                         for k, v in CRITERIA["power_min"].items())),
            ("input draws for the numerics (`numerics_draws`)", str(r.numerics_draws)),
            ("a sleep plant's size: direct sizing before the block", f"{SIZING_REPLAYS} paired replays"),
            ("between-run model `repro` uses (REML over the committed runs)",
             f"τ = √(τ₀² + (slope·θ)²), slope {pct(MEASURED_BETWEEN_RUN.slope)}, τ₀ {pct(MEASURED_BETWEEN_RUN.tau0)}, "
             f"{MEASURED_BETWEEN_RUN.runs} runs of {MEASURED_BETWEEN_RUN.comparisons} comparisons"),
            ("flat between-run SD runs before the model stated (`[run] between_run_sd`)", pct(BETWEEN_RUN_SD))]
    return "\n".join(["| what | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def cache_stages() -> str:
    """The cache's stages (each a namespace of ``ptxprobe cache info`` and ``cache clear --stage``)."""
    from ptxprobe.core.stages import STAGES

    rows = ["| stage (cache namespace) | keyed by | holds | ptxprobe code in the key |", "|---|---|---|---|"]
    for st in STAGES.values():
        code = f"`{st.code}` and what it imports" if st.code else "none: ptxas's own output"
        held = st.output if st.cached else f"{st.output} (computed on every call, not stored)"
        rows.append(f"| `{st.name}` | {', '.join(f'`{i}`' for i in st.inputs)} | {_cell(held)} | {code} |")
    rows.append("| `cubin` | the cubin's sha256 | the cubin bytes an assembly wrote (content-addressed) | none |")
    return "\n".join(rows)


def package_layout() -> str:
    """The package's feature folders: each one's own docstring (first sentence) and its modules, read from the tree,
    so a folder added or renamed shows here without anyone editing this page."""
    import ast

    rows = ["| folder | holds | modules |", "|---|---|---|"]
    for folder in sorted(p for p in (ROOT / "ptxprobe").iterdir() if p.is_dir() and not p.name.startswith("_")):
        init = folder / "__init__.py"
        if init.exists():
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            modules = sorted(m.stem for m in folder.glob("*.py") if m.stem != "__init__")
        else:  # a data folder (the experiments shipped with the package)
            doc = "Data, not code: " + ", ".join(sorted(f.name for f in folder.iterdir() if f.is_file()))
            modules = []
        first = " ".join(doc.split("\n\n")[0].split())
        rows.append(f"| `ptxprobe/{folder.name}` | {_cell(first)} | {', '.join(f'`{m}`' for m in modules)} |")
    return "\n".join(rows)


BLOCKS = {
    "schema.md": {"columns": columns, "records": records},
    "spec.md": {"sweep-defaults": sweep_defaults, "run-defaults": run_defaults,
                "timing-defaults": timing_defaults, "launch-keys": launch_keys},
    "gpu-method.md": {"method-constants": method_constants},
    "api.md": {"surface": api_surface},
    "development.md": {"cache-stages": cache_stages, "package-layout": package_layout},
}


def render_blocks(text: str, blocks: dict) -> str:
    for name, fn in blocks.items():
        s, e = start(name), end(name)
        if s not in text or e not in text:
            raise SystemExit(f"markers for {name!r} missing")
        head, _, rest = text.partition(s)
        _, _, tail = rest.partition(e)
        text = head + s + "\n" + fn() + "\n" + e + tail
    return text


def outputs() -> dict[Path, str]:
    out = {DOCS / "cli.md": cli_markdown()}
    for page, blocks in BLOCKS.items():
        path = DOCS / page
        out[path] = render_blocks(path.read_text(), blocks)
    return out


def main(argv: list[str]) -> int:
    stale = []
    for path, text in outputs().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if "--check" not in argv:
                path.write_text(text)
    if "--check" in argv and stale:
        print(f"out of date: {', '.join(p.name for p in stale)}: run python {GENERATOR}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
