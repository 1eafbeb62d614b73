"""experiments/README.md: each FINDINGS section indexed to the run directories it rests on, each run to the
definition, script and command that made it (as its manifest recorded it) and the command that remakes it now.

Generated with FINDINGS.md from the same render (``render.py``), so the index cannot name a run FINDINGS does not, or
miss one it does; a run's command is read from its manifest, never typed here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomllib

from experiments import DEFINITIONS, HERE
from ptxprobe.api import version_key

README = HERE / "README.md"
# what each folder of the study holds (the folders themselves are checked against this list by a test)
FOLDERS = {
    "definitions": "experiment definitions (TOML) that `ptxprobe rename-sweep -e` runs; each header gives its command",
    "gpu": "the scripts run on the GPU machine (device tool), one `preamble.sh` for all of them",
    "user": "kernels written here as a user would write them (sgemm.cu, the FFMA matmul), with their specs",
    "external": "how third-party sources are fetched at run time (`sources.toml`, pinned by sha256) and the programs "
                "that run them; never their code",
    "analysis": "CPU analyses of committed runs and simulations, each writing a results directory with its code's hash",
    "atlas": "the name effect in libraries people ship: the pinned corpus (`corpus.toml`, fetched at run time, never "
             "committed), its census and the pilot (`python -m experiments.atlas census|pilot`)",
    "benchmarks": "timing of the tool itself and GPU probes whose outputs the findings read",
    "findings": "the generator of FINDINGS.md, its figures and this index, one module per question",
    "results": "committed runs, one directory each, with the manifest that says how it was made",
}
# scripts that moved since a run recorded its command: the path recorded -> the path now
MOVED = {"experiments/h200_round3.sh": "experiments/gpu/h200_study.sh",  # renamed in 7801c8c
         "experiments/h200_study.sh": "experiments/gpu/h200_study.sh",
         "experiments/h200_sweeps.sh": "experiments/gpu/h200_sweeps.sh",
         "experiments/h200_tune.sh": "experiments/gpu/h200_tune.sh",
         "experiments/burst_length.py": "experiments/gpu/burst_length.py"}


def sections(findings: str, run: re.Pattern) -> list[tuple[str, list[str]]]:
    """(title, run directories named in it) for each ``## `` section of the rendered FINDINGS text."""
    out = []
    for block in re.split(r"^## ", findings, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        out.append((title.strip(), sorted(set(run.findall(body)))))
    return out


def definitions() -> dict[str, Path]:
    """Experiment name ([experiment] name) -> its definition file."""
    out = {}
    for p in sorted(DEFINITIONS.glob("*.toml")):
        name = tomllib.loads(p.read_text()).get("experiment", {}).get("name")
        out.setdefault(name, p)
    return out


def header_commands(path: Path) -> list[str]:
    """The commands a definition's header gives, without their trailing remark (tests/test_docs.py plans each as
    written)."""
    lines = [line[1:].strip() for line in path.read_text().splitlines() if line.startswith("#")]
    return [line.split("(")[0].split("#")[0].strip() for line in lines if line.startswith("ptxprobe ")]


def recorded_commands(manifest: dict) -> list[str]:
    """The commands a run's manifest recorded, in each layout the study has written them."""
    def text(c) -> str:
        if isinstance(c, list):  # an argv: the interpreter's path is where it ran, not part of the command
            return " ".join(["ptxprobe", *c[1:]] if c and str(c[0]).endswith(("ptxprobe", "__main__.py", "cli.py"))
                            else map(str, c))
        return str(c)

    if isinstance(manifest.get("command"), list) and all(isinstance(x, str) for x in manifest["command"]):
        return [text(manifest["command"])]
    if "command" in manifest:
        return [text(manifest["command"])]
    if "commands" in manifest:
        return [text(c) for c in manifest["commands"]]
    steps = manifest.get("steps") or manifest.get("runs") or {}
    return [f"{k}: {text(v.get('command') if isinstance(v, dict) else v)}" for k, v in steps.items()
            if (isinstance(v, dict) and v.get("command")) or isinstance(v, str)]


def now(command: str) -> str:
    """A recorded command with the study's files where they are now (a definition named by its bare name, as the
    early runs did, by its path)."""
    for old, new in MOVED.items():
        command = command.replace(old, new)

    def moved(m: re.Match) -> str:
        path = DEFINITIONS / f"{m[2]}.toml"
        return f"{m[1]}experiments/definitions/{m[2]}.toml" if path.exists() else m[0]

    command = re.sub(r"(\s)experiments/(\w+)\.toml\b", moved, command)
    return re.sub(r"(-e )(\w+)(?=\s|$)", moved, command)


def gone(command: str) -> list[str]:
    """The study's files a command names that no longer exist (history has them)."""
    named = re.findall(r"\bexperiments/[\w./-]+\.(?:sh|py|toml)\b", command)
    return sorted({f for f in named if not (HERE.parent / f).exists()})


def run_entry(run: str, results: Path, by_name: dict[str, Path]) -> list[str]:
    path = results / run / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    experiment = manifest.get("experiment")
    name = experiment.get("name") if isinstance(experiment, dict) else None
    what = manifest.get("what") or (experiment.get("description") if isinstance(experiment, dict) else None)
    lines = [f"- `{run}`" + (f": {what.split('; ')[0].rstrip('.')}" if what else "")]
    if name in by_name:
        rel = by_name[name].relative_to(HERE.parent).as_posix()
        lines.append(f"  - definition `{rel}`; remade now by `{'`, then `'.join(header_commands(by_name[name]))}`"
                     if header_commands(by_name[name]) else f"  - definition `{rel}`")
    if isinstance(experiment, dict) and manifest.get("tools") is not None:  # a run directory ptxprobe wrote
        releases = sorted({t["version"] for t in manifest["tools"] if t.get("kind") == "ptxas" and t.get("version")},
                          key=version_key)
        lines.append(f"  - made with Triton {manifest.get('triton') or '(none)'}"
                     + (f", ptxas {', '.join(releases)}" if releases else "")
                     + f"; `ptxprobe repro experiments/results/{run}` remakes it with those tools and compares (a "
                     "definition run today takes today's Triton and the ptxas releases installed)")
    recorded = recorded_commands(manifest)
    for c in recorded:
        moved = now(c)
        missing = gone(moved)
        lines.append(f"  - ran as `{c}`" + (f" (now `{moved}`)" if moved != c else "")
                     + (f" ({', '.join(f'`{f}`' for f in missing)} no longer in the tree: git history has "
                        f"{'it' if len(missing) == 1 else 'them'})" if missing else ""))
    if not recorded:
        lines.append("  - its manifest records no command: "
                     + ("the files it holds say how it was made" if manifest else "no manifest"))
    return lines


def render(findings: str, run: re.Pattern) -> str:
    results = HERE / "results"
    by_name = definitions()
    out = ["# The study", "",
           "Generated by `python experiments/findings/render.py` with FINDINGS.md (do not edit): each section of "
           "FINDINGS.md, the committed runs it rests on, and how each was made.", "",
           "| folder | holds |", "|---|---|", *(f"| `{k}/` | {v} |" for k, v in FOLDERS.items()), ""]
    for title, runs in sections(findings, run):
        out += [f"## {title}", ""]
        for r in runs:
            out += run_entry(r, results, by_name)
        out += ["" if runs else "(no committed run)", ""] if not runs else [""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip() + "\n"
