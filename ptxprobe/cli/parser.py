"""The argument parser: every command and option, each with its help and default."""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

from ptxprobe import __version__
from ptxprobe.cli.tune_args import NO_CACHE_HELP, metric_regex, program_arch  # capture, tune and apply: one definition
from ptxprobe.cli.tune_args import add_parsers as add_tune_parsers


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Each default said once: by the help text where it says it in words, else as ``(default: X)``; nothing for
    an option whose absence is the default (None, off, an empty list) nor for a switch (``--no-run``'s store_false
    default True is argparse's bookkeeping, not what runs when it is left out)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.nargs == 0 or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """A usage error in one line, the way every other error is said (``--help`` gives the whole usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def regime_arg(s, what: str) -> None:
    """``--regime``: the GPU regime a command measures in (rename-sweep --run, tune)."""
    s.add_argument("--regime", default=None, metavar="{burst,sustained}",  # checked with the request (with_regime)
                   help=f"{what}: burst (the default: short units of both codes interleaved under one clock, what a "
                        "kernel does per cycle) or sustained (each arm held alone for seconds once its clock settles, "
                        "at the card's power limit: what a long job sees; its GPU-time cost is said before it runs; "
                        "[run.timing] hold_s, settle_s, settle_max_s, sustained_rounds)")


def _seconds(text: str) -> float:
    """A time limit: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _at_least(low: int):
    """An integer option's type: refused below ``low``, with the value and the bound."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def _comma_list(text: str) -> list[str]:
    """``strstr,strcmp`` -> the names (an option that takes one word cannot swallow the paths after it)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma list of names, got {text!r}")
    return names


EPILOG = """exit codes: 0 success and nothing differs, 1 differences or divergence found, 2 bad usage or input,
3 a tool or an assembly failed, 4 internal error, 130 interrupted, 141 output pipe closed"""

SWEEP_EPILOG = """your own kernel: ptxprobe spec init k.py:fn -o k.toml (or k.cu[:entry]) writes a commented spec to
fill in, then ptxprobe rename-sweep --triton k.py:fn --spec k.toml; the spec format (signature, constexprs,
[launch]) is in docs/spec.md, and paths inside a spec are relative to the spec file

""" + EPILOG


def _executor_args(s) -> None:
    """Where the ptxas work runs: this host's process pool, or a Ray cluster."""
    s.add_argument("--jobs", "-j", type=_at_least(1),
                   help="parallel ptxas processes (default: all cores; with --executor ray and no address: the local "
                        "Ray instance's CPUs)")
    s.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="run ptxas jobs in a local process pool (default) or as Ray tasks (pip install "
                        "'ptxprobe[ray]')")
    s.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: join this cluster (host:port or ray://...); default: start a local "
                        "Ray instance for this command and stop it after")


def _common(s: argparse.ArgumentParser, json_help: str | None = "print one JSON document on stdout") -> None:
    s.add_argument("-v", "--verbose", action="count", default=0, help="more messages on stderr (-vv: debug)")
    s.add_argument("-q", "--quiet", dest="quiet_level", action="count", default=0,
                   help="fewer messages on stderr, no progress bar")
    if json_help:
        s.add_argument("--json", action="store_true", help=json_help)


def _kernel_args(s: argparse.ArgumentParser, dtype: str) -> None:
    """--kernel/--dtype/--head-dim/--causal/--arch, shared by the commands that pick one registered kernel."""
    s.add_argument("--kernel", default="attention", help="registered kernel family (see `ptxprobe kernels`)")
    s.add_argument("--dtype", default=dtype, help="element type: fp16, bf16, fp8e5, fp8e4nv")
    s.add_argument("--head-dim", type=_at_least(1), default=128, help="head dimension")
    s.add_argument("--causal", action="store_true", help="causal mask")
    s.add_argument("--arch", default="sm_90a", help="target arch")


# the modules of the commands that are not in ``cli.commands``
_COMMAND_MODULES = {
    "cmd_rename_sweep": "sweep_cmd",
    "cmd_capture": "capture_cmd",
    "cmd_reduce": "reduce_cmd",
    "cmd_tune": "tune_cmd",
    "cmd_apply": "tune_cmd",
    **dict.fromkeys(("cmd_bisect", "cmd_explain", "cmd_ptxas_scan", "cmd_report", "cmd_repro"), "study_cmds"),
}


@dataclass(frozen=True)
class _Command:
    """A command's function, imported when it runs: building the parser imports no command's code."""

    name: str

    def __call__(self, args: argparse.Namespace) -> int:
        module = importlib.import_module(f"ptxprobe.cli.{_COMMAND_MODULES.get(self.name, 'commands')}")
        return getattr(module, self.name)(args)


def _sub(sub, name: str, help_text: str, func_name: str, epilog: str = EPILOG) -> argparse.ArgumentParser:
    s = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Formatter, epilog=epilog)
    s.set_defaults(func=_Command(func_name))
    return s


def _sweep_parser(sub) -> None:
    """``rename-sweep``: the main job, static and (with --run) on the GPU."""
    s = _sub(sub, "rename-sweep", "compile, rename, assemble and compare (no GPU needed)", "cmd_rename_sweep",
             epilog=SWEEP_EPILOG)
    s.add_argument("--experiment", "-e", default="default",
                   help="experiment: a TOML file, or the name of one shipped with ptxprobe")
    s.add_argument("--set", "-s", action="append", metavar="AXIS=V1,V2", default=[],
                   help="override an axis, e.g. -s archs=sm_100a -s names='{base},cutlass_{base}' -s repeat=3")
    s.add_argument("--ptx", action="append", metavar="FILE", default=[], help="a PTX file of your own (repeatable)")
    s.add_argument("--cubin", action="append", metavar="FILE", default=[],
                   help="a cubin with embedded PTX (built with -lineinfo)")
    s.add_argument("--lib", action="append", metavar="PATH", default=[],
                   help="a shared library, fatbin, cubin or wheel (every .so inside): the PTX it embeds, each module "
                        "for its own target or those of -s archs the driver would JIT it for, cut to the kernels "
                        "PATH:ENTRY or --entry chooses (repeatable: items choosing kernels of one module are assembled "
                        "together; extracted with cuobjdump)")
    s.add_argument("--cu", action="append", metavar="FILE", default=[],
                   help="CUDA C++ source, compiled by nvcc for each arch")
    s.add_argument("--entry", help="with --ptx/--cubin/--cu/--lib: the kernel to take (name or symbol; 'all' for "
                                   "every one); without it, every kernel in the file")
    s.add_argument("--triton", metavar="FILE.py:FUNCTION",
                   help="a triton.jit or gluon.jit function: path/to/file.py:function (a path, relative to here) or "
                        "package.module:function; needs --spec")
    s.add_argument("--spec", help="JSON/TOML for the user kernel(s) given: a [launch] table (arguments, grid, sizes, "
                                  "reference) to run them with --run; for --triton also signature, constexprs, "
                                  "divisible_by_16, num_warps. `ptxprobe spec init FILE.py:FUNCTION` writes one; the "
                                  "format is in docs/spec.md; paths inside a spec are relative to the spec file")
    s.add_argument("--out", "-o", help="output dir (default: runs/<experiment>, or runs/user-<files> for your own "
                                       "kernels); re-running resumes it")
    _executor_args(s)
    s.add_argument("--timeout", type=_seconds, default=600.0, help="seconds before a ptxas run counts as hung")
    s.add_argument("--fresh", action="store_true", help="discard what the output dir holds and start over")
    s.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    s.add_argument("--details", action="store_true", help="also print the per-variant table")
    s.add_argument("--names-from-scan", action="store_true",
                   help="also test a name for every trigger literal ptxas-scan finds in the sweep's ptxas")
    gpu = s.add_mutually_exclusive_group()  # --run --no-run says two things: refused, not the last one taken
    gpu.add_argument("--run", dest="run", action="store_true", default=None,
                     help="also time every name on the GPU (default: when a GPU is visible; exit 3 without one)")
    gpu.add_argument("--no-run", dest="run", action="store_false", default=None,
                     help="static analysis only, even where a GPU is visible")
    s.add_argument("--explain", action="store_true",
                   help="after the GPU runs, profile the groups where a name changes the code under ncu and attribute "
                        "the difference (ptxprobe explain)")
    regime_arg(s, "with --run: how the names are timed")
    _common(s, "print the summary (and GPU rows) as one JSON document")


def _setup_parsers(sub) -> None:
    """The tools, the cache, a kernel's spec, the registered kernels."""
    s = _sub(sub, "toolchain", "list ptxas/nvdisasm/cuobjdump/nvcc found, or install more from pip wheels",
             "cmd_toolchain")
    s.add_argument("action", nargs="?", choices=["list", "install"], default="list", help="what to do")
    s.add_argument("versions", nargs="*", help="with install: CUDA versions (12.4.131), prefixes (12.6) or all (every "
                                               "release 12.0.76 ... 13.5.37 on PyPI)")
    s.add_argument("--kinds", default="ptxas", help="with install: comma list of ptxas,nvdisasm,cuobjdump")
    _common(s)

    s = _sub(sub, "cache", "what the content-addressed cache holds, or clear it", "cmd_cache")
    s.add_argument("action", nargs="?", choices=["info", "clear"], default="info", help="what to do")
    s.add_argument("--stage", action="append", metavar="NAME",
                   help="with clear: only this stage's entries (repeatable; `ptxprobe cache` lists them)")
    _common(s)

    s = _sub(sub, "spec", "write a commented kernel spec from a kernel's own parameters (spec init)", "cmd_spec")
    s.add_argument("action", choices=["init"], help="init: write a spec to fill in (what could not be inferred is "
                                                    "\"TODO\"; the format is in docs/spec.md)")
    s.add_argument("target", metavar="TARGET",
                   help="file.py:function or module:function (a triton.jit/gluon.jit function), or file.cu[:entry] "
                        "/ file.ptx[:entry]")
    s.add_argument("--output", "-o", help="write the spec here (default: stdout)")
    s.add_argument("--force", action="store_true", help="replace --output if it exists")
    s.add_argument("--arch", default="sm_90a", help="the target a .cu is compiled for to read its PTX parameters "
                                                    "(and a Triton module's import-time device questions see)")
    s.add_argument("-I", "--include-dir", action="append", default=[], metavar="DIR",
                   help="a folder of a .cu file's headers (repeatable); written into the spec's [nvcc] include_dirs")
    _common(s, "print one JSON document on stdout: the spec's text, where it was written, its TODO count")

    s = _sub(sub, "kernels", "list the registered kernel families", "cmd_kernels")
    _common(s)


def _ptx_parsers(sub) -> None:
    """One kernel's steps one at a time: emit, rename, check, assemble, disassemble, diff."""
    s = _sub(sub, "emit", "compile one registered kernel to PTX for a target (no GPU)", "cmd_emit")
    _kernel_args(s, "fp16")
    s.add_argument("--config", default="default", help="block config label (e.g. m128n64w8s3) or default")
    s.add_argument("--name", help="entry name, set through the frontend (Triton's repr=)")
    s.add_argument("--seq-len", type=_at_least(1), default=4096,
                   help="launch shape the specialisation is derived from")
    s.add_argument("--output", "-o", help="write the PTX here (default: stdout)")
    _common(s, "print one JSON document on stdout: the kernel, target, entry, PTX sha256 and (without -o) the PTX")

    s = _sub(sub, "rename", "rename a PTX file's entry and check that nothing else changed", "cmd_rename")
    s.add_argument("ptx", help="PTX file")
    s.add_argument("--name", required=True, help="new name, or a template such as cutlass_{base}")
    s.add_argument("--entry", help="which entry (default: the first)")
    s.add_argument("--output", "-o", help="write the renamed PTX here (default: stdout)")
    _common(s, "print one JSON document on stdout: the names, sites, the independent check and (without -o) the "
               "PTX")

    s = _sub(sub, "check-rename", "check that VARIANT differs from BASE only at the entry name's sites",
             "cmd_check_rename")
    s.add_argument("base", help="baseline PTX file")
    s.add_argument("variant", help="renamed PTX file")
    s.add_argument("--base-name", help="entry in BASE (default: its only or first entry)")
    s.add_argument("--name", help="entry in VARIANT (default: its only or first entry)")
    _common(s)

    s = _sub(sub, "assemble", "run ptxas on a PTX file and report resources", "cmd_assemble")
    s.add_argument("ptx", help="PTX file")
    s.add_argument("--arch", help="target (default: the PTX's .target)")
    s.add_argument("--ptxas", default="triton", help="triton | newest | VERSION | PATH")
    s.add_argument("--flags", help="ptxas flags (default: Triton's -lineinfo)")
    s.add_argument("--timeout", type=_seconds, default=600.0, help="seconds before ptxas counts as hung")
    s.add_argument("--output", "-o", help="write the cubin here")
    _common(s, "accepted: the output is one JSON document already")

    s = _sub(sub, "disasm", "SASS listing with decoded control codes (or JSON)", "cmd_disasm")
    s.add_argument("cubin", help="cubin file")
    s.add_argument("--kernel", help="only this kernel (default: all)")
    _common(s)

    s = _sub(sub, "diff", "how two cubins' SASS differs (exit 1 if not identical)", "cmd_diff",
             "verdicts: identical (the same machine code), metadata_only (the same instructions, other launch "
             "records or sizes), different_data (the same instructions reading other constant-bank contents or "
             "initialised globals: it may compute another result), scheduling_only (the same instructions in "
             "another order or allocation), different_code; what differs is named\n\n" + EPILOG)
    s.add_argument("a", nargs="?", help="cubin A (baseline)")
    s.add_argument("b", nargs="?", help="cubin B")
    s.add_argument("--kernel-a", help="kernel in A (default: its only kernel); with --ptx: the PTX entry to take "
                                      "(default: its first)")
    s.add_argument("--kernel-b", help="kernel in B (default: its only kernel)")
    s.add_argument("--ptx", help="instead of cubins A B: assemble this PTX under its name and under --rename")
    s.add_argument("--rename", default="cutlass_{base}", help="with --ptx: the other name (template)")
    s.add_argument("--arch", help="with --ptx: target (default: the PTX's .target)")
    s.add_argument("--ptxas", default="triton", help="with --ptx: triton | newest | VERSION | PATH")
    s.add_argument("--repeat", type=_at_least(0), default=0,
                   help="with --ptx: assemble each name this many times (default: 0, as the sweep would for the arch)")
    s.add_argument("--rows", action="store_true", help="with --json: include the per-instruction alignment")
    _common(s)


def _run_dir_parsers(sub) -> None:
    """What is done with sweeps and ptxas releases: report, scan, repro, bisect."""
    s = _sub(sub, "report", "HTML + JSON report of a sweep's run directory", "cmd_report")
    s.add_argument("run_dir", help="a rename-sweep output directory")
    s.add_argument("--out", "-o", help="where the report goes (default: RUN_DIR/report)")
    s.add_argument("--notebook", help="link to an HTML export of the analysis notebook")
    s.add_argument("--sass", action="store_true", help="also disassemble every variant whose machine code differs "
                                                       "and write its side-by-side SASS diff page (slow)")
    _common(s)

    s = _sub(sub, "ptxas-scan", "find string-compare calls with literal arguments inside ptxas", "cmd_ptxas_scan")
    s.add_argument("paths", nargs="*", help="ptxas binaries (default: every ptxas the toolchain knows)")
    s.add_argument("--version", action="append", help="scan the ptxas of this version (repeatable)")
    s.add_argument("--functions", type=_comma_list, default=["strstr", "strcmp", "strncmp", "strcasecmp", "memcmp"],
                   metavar="F1,F2", help="compare functions to report, a comma list (default: strstr, strcmp, "
                                         "strncmp, strcasecmp, memcmp)")
    s.add_argument("--all", action="store_true", help="every compare function, not just --functions")
    _common(s)

    s = _sub(sub, "repro", "re-run a recorded sweep with its recorded tools and compare", "cmd_repro")
    s.add_argument("run_dir", help="a recorded run directory")
    s.add_argument("--out", "-o", help="where the re-run goes (default: a temporary directory, removed after)")
    _executor_args(s)
    _common(s)

    s = _sub(sub, "bisect", "ptxas releases where a name's effect appears and disappears", "cmd_bisect")
    s.add_argument("--name", default="cutlass_{base}", help="the name (template) to test")
    _kernel_args(s, "fp8e5")
    s.add_argument("--versions", help="comma list (default: every ptxas installed)")
    s.add_argument("--fetch", action="store_true", help="first install the releases from their pip wheels")
    s.add_argument("--repeat", type=_at_least(1), default=3, help="assemblies per name and version")
    _executor_args(s)
    _common(s)


def _program_parsers(sub) -> None:
    """A user's program captured and A/B'd, and the why of a speed difference."""
    s = _sub(sub, "capture", "run a Python program, keep every Triton kernel it compiles, rename-sweep them",
             "cmd_capture")
    s.add_argument("program", nargs="*", default=[], metavar="-- CMD",
                   help="the program to run, after --, e.g. -- python train.py --steps 1")
    s.add_argument("--out", "-o", default="runs/capture", help="where the captured PTX and the sweep go")
    s.add_argument("--experiment", "-e", default="default", help="names, archs and repeats to sweep with")
    s.add_argument("--set", "-s", action="append", metavar="AXIS=V1,V2", default=[], help="override an axis")
    s.add_argument("--program-timeout", type=_seconds, default=1800.0, help="seconds the program may run")
    s.add_argument("--fresh", action="store_true",
                   help="replace an earlier capture of other kernels in --out, and its sweep's results (without it "
                        "such a directory is refused)")
    s.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    s.add_argument("--run", action="store_true",
                   help="then re-run the program (GPU) with every kernel renamed, A/B: baseline, triggered and "
                        "control names and an A/A copy, each arm assembled by one ptxas (ab.json)")
    s.add_argument("--rounds", type=_at_least(1), default=10,
                   help="with --run: rounds (every arm once each, random order); verdicts need at least 6, and 7 for "
                        "the trigger or control arm to be called (the two are adjusted together)")
    s.add_argument("--metric", metavar="REGEX", type=metric_regex,
                   help="with --run: measure a number the program prints (one group, smaller is better) instead "
                        "of its wall time")
    s.add_argument("--ab-ptxas", default="triton", metavar="VERSION",
                   help="with --run: the ptxas that assembles every arm (default: the one Triton uses)")
    s.add_argument("--names", metavar="BASE,TRIGGER,CONTROL",
                   help="with --run: the three name templates (default: {base},cutlass_{base},xutlass_{base}, or "
                        "the trigger-free names for a kernel whose name holds the trigger)")
    s.add_argument("--arch", type=program_arch,
                   help="target for programs that compile without a GPU (CuTe DSL's CUTE_DSL_ARCH; --interpret's)")
    s.add_argument("--interpret", nargs="?", const="record", choices=("record", "execute"),
                   help="no GPU: run the program under Triton's interpreter (CPU tensors), record each kernel launch "
                        "(arguments, autotune configs) without executing it ('execute': run it too, slowly), and "
                        "compile what it launched for --arch (docs/capture.md)")
    _executor_args(s)
    _common(s, "print the sweep's summary as one JSON document")

    s = _sub(sub, "explain", "why a name changes speed: ncu stall samples per SASS instruction, joined with the diff",
             "cmd_explain")
    s.add_argument("run_dir", help="a run directory with GPU results (rename-sweep --run)")
    s.add_argument("--group", action="append", default=[], metavar="TEXT",
                   help="profile the groups whose id contains TEXT (repeatable: all must match); default: the "
                        "groups where a name changes the code")
    s.add_argument("--max-groups", type=_at_least(1), default=4, help="at most this many groups")
    s.add_argument("--analyze-only", action="store_true",
                   help="no GPU: redo explain.json from the profiles already in RUN_DIR/explain")
    s.add_argument("--timeout", type=_seconds, default=600.0, help="seconds for each ncu run")
    _common(s, "print explain.json on stdout")


REDUCE_EPILOG = """exit codes: 1 reduced (the name still changes the minimal kernel's machine code: DIR/minimal.ptx),
0 no difference to start from (the name does not change the input's code under the predicate; nothing written but
DIR/reduce.json), 2 bad usage or input (a bad --keep expression included), 3 a tool failed (ptxas missing, or
failing on the input itself), 4 internal error, 130 interrupted (the best kernel so far is in DIR; re-running
resumes)"""


def _reduce_parser(sub) -> None:
    """``reduce`` (the smallest kernel the name still changes) and a cubin's facts."""
    s = _sub(sub, "reduce", "the smallest kernel whose machine code the name still changes (delta debugging over PTX)",
             "cmd_reduce", epilog=REDUCE_EPILOG)
    s.add_argument("input", nargs="?", metavar="KERNEL", help="a registered kernel (see `ptxprobe kernels`); or give "
                                                              "--ptx, --cu, --cubin, --triton or --lib")
    s.add_argument("--ptx", metavar="FILE", help="a PTX file (re-targeted to --arch when its .target differs)")
    s.add_argument("--cu", metavar="FILE", help="CUDA C++ source, compiled by nvcc for --arch")
    s.add_argument("--cubin", metavar="FILE", help="a cubin with embedded PTX (built with -lineinfo)")
    s.add_argument("--triton", metavar="FILE.py:FUNCTION", help="a triton.jit or gluon.jit function; needs --spec")
    s.add_argument("--lib", metavar="PATH[:ENTRY]",
                   help="a kernel of a shared library, fatbin or wheel: its PTX from the module the driver would JIT "
                        "for --arch (the newest target that reaches it), cut to that kernel")
    s.add_argument("--spec", help="with --triton (or --cu): the kernel spec (docs/spec.md)")
    s.add_argument("--entry", help="the entry to reduce when the input has several (a library: the kernel)")
    s.add_argument("--arch", required=True, help="target (sm_90a, sm_100a, ...)")
    s.add_argument("--dtype", default="fp16", help="with a registered KERNEL: element type")
    s.add_argument("--head-dim", type=_at_least(1), default=128, help="with a registered KERNEL: head dimension")
    s.add_argument("--causal", action="store_true", help="with a registered KERNEL: causal mask")
    s.add_argument("--config", default="default", help="with a registered KERNEL: block config label")
    s.add_argument("--ptxas", help="triton | nvcc | newest | VERSION | PATH (default: triton; nvcc for --cu, as the "
                                   "sweep does)")
    s.add_argument("--name", help="the renamed name's template (default: cutlass_{base}; for a kernel whose name "
                                  "holds cutlass: {base}, against {base_untriggered})")
    s.add_argument("--flags", help="ptxas flags, one string (default: Triton's -lineinfo)")
    s.add_argument("--keep", metavar="EXPR",
                   help="narrow the predicate to a property of the difference over the sweep's numeric row fields "
                        "and their baseline_ twins, e.g. 'registers - baseline_registers >= 16' or "
                        "'capmerc_bytes - baseline_capmerc_bytes >= 4096' (docs/reduce.md)")
    s.add_argument("--ladder", metavar="EXPR>=T1,T2",
                   help="instead of --keep: reduce under the plain predicate, then under EXPR >= each threshold "
                        "(e.g. 'capmerc_bytes - baseline_capmerc_bytes >= 1024,4096'), each level in OUT/level-K, "
                        "OUT/ladder.json saying what each needs to keep")
    s.add_argument("--out", "-o", required=True, help="output dir: minimal.ptx, reduce.json; re-running resumes it")
    s.add_argument("--jobs", "-j", type=_at_least(1),
                   help="parallel ptxas processes (default: all cores; both names of a candidate, and candidates, "
                        "assemble at once)")
    s.add_argument("--timeout", type=_seconds, default=600.0, help="seconds before a ptxas run counts as hung")
    s.add_argument("--fresh", action="store_true", help="discard what the output dir holds and start over")
    s.add_argument("--ablate", action="store_true",
                   help="then try each code-shaping ptxas option its --help lists (opt level, expensive optimizations, "
                        "fmad, register usage level, ...) on the minimal kernel and on the input: which make the name "
                        "stop mattering")
    _common(s, "print reduce.json (and the output dir) as one JSON document")

    s = _sub(sub, "cubin", "facts of a cubin: sections, EIATTR records, registers, capmerc", "cmd_cubin")
    s.add_argument("cubin", help="cubin file")
    _common(s, "accepted: the output is one JSON document already")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ptxprobe", formatter_class=_Formatter, epilog=EPILOG,
                                description="What does ptxas do differently depending on a kernel's entry name?")
    p.add_argument("--version", action="version", version=f"ptxprobe {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _sweep_parser(sub)
    _setup_parsers(sub)
    _ptx_parsers(sub)
    _run_dir_parsers(sub)
    _program_parsers(sub)
    _reduce_parser(sub)
    add_tune_parsers(sub, _Formatter, _common, _seconds, _at_least, regime_arg, _Command)
    return p
