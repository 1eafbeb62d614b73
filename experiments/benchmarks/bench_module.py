"""A library's module of many entries: the rename sweep against bare whole-module ptxas calls making the same
assemblies, on the same machine, with the same parallelism and a cold cache.

    python experiments/benchmarks/bench_module.py --lib vllm-0.34.0-…whl \\
        --module _C_stable_libtorch.abi3.7.sm_90.ptx --ptxas 13.0 --out DIR

The module is taken from the library with ptxprobe's own extraction (``cuobjdump``, never parsed by hand; a wheel is
unzipped), written to a scratch PTX file and swept by the CLI in a fresh process with an empty cache (names
``{base}``, ``cutlass_{base}``, ``xutlass_{base}`` as the sweep repeats them), the rename check and every entry's
cubin facts included. The bare loop then runs ptxas on exactly the renamed modules and repeat indices the sweep
assembled (its log says which), as many at once as the sweep's pool, with the same flags. Writes DIR/bench.json:
both wall times, their ratio (goal: at most 1.3), the per-entry answer counts, the library's sha256 and the tool
hashes. No third-party PTX or cubin is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from ptxprobe.api import STAGE, Cache, apply_template, discover, entries_of, rename_entries, select_ptxas, sha256_file
from ptxprobe.api import extract_library as extract

NAMES = "{base},cutlass_{base},xutlass_{base}"


def module_text(lib: str, module: str) -> tuple[str, dict]:
    """The module's PTX and where it came from (library, member, sha256s)."""
    cache = Cache()
    ext = extract(lib, cache)
    for library in ext.libraries:
        for m in library.modules:
            if m.name == module:
                text = cache.get(STAGE, ext.key, m.file).decode()
                return text, {"library": Path(lib).name, "library_sha256": ext.sha256, "member": library.member,
                              "member_sha256": library.sha256, "module": m.name, "module_sha256": m.sha256,
                              "target": m.target, "isa": m.version, "entries": len(m.entries),
                              "stubs_left_out": len(m.stubs), "cuobjdump": ext.cuobjdump}
    raise SystemExit(f"{lib}: no module {module}")


def bare_loop(ptx: str, arch: str, tool, assemblies: list[tuple[str, int]], jobs: int, flags: list[str]) -> float:
    """Wall seconds of ptxas on each (name template, repeat) module, ``jobs`` at a time, in the sweep's order."""
    entries = entries_of(ptx)
    base = rename_entries(ptx, {e: apply_template(NAMES.split(",")[0], e) for e in entries}).ptx
    with tempfile.TemporaryDirectory(prefix="bench-module-") as d:
        files = {}
        for template in dict.fromkeys(t for t, _ in assemblies):
            names = {apply_template(NAMES.split(",")[0], e): apply_template(template, e) for e in entries}
            path = Path(d) / f"m{len(files)}.ptx"
            path.write_text(rename_entries(base, names).ptx)
            files[template] = path

        def one(k: int) -> None:
            template, _ = assemblies[k]
            out = Path(d) / f"{k}.cubin"
            subprocess.run([tool.path, *flags, "-v", f"--gpu-name={arch}", str(files[template]), "-o", str(out)],
                           check=True, capture_output=True)

        t = time.perf_counter()
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, range(len(assemblies))))
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--ptxas", default="13.0")
    ap.add_argument("--arch", default=None, help="default: the module's own target")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ptx, origin = module_text(args.lib, args.module)
    arch = args.arch or origin["target"]
    tool = select_ptxas(arch, args.ptxas, discover(("ptxas",)))[0]
    jobs = os.cpu_count() or 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-module-run-") as d:
        src = Path(d) / args.module
        src.write_text(ptx)
        env = {**os.environ, "PTXPROBE_CACHE": str(Path(d) / "cache")}
        argv = [sys.executable, "-m", "ptxprobe", "rename-sweep", "--ptx", str(src), "-s", f"archs={arch}",
                "-s", f"ptxas={args.ptxas}", "-s", f"names={NAMES}", "-j", str(jobs), "-o", str(Path(d) / "run"),
                "-q"]
        t = time.perf_counter()
        rc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL).returncode
        sweep_wall = time.perf_counter() - t
        rows = pd.read_parquet(Path(d) / "run" / "results.parquet")
    runs = rows.drop_duplicates("assembly_key").sort_values("run_at")
    assemblies = list(zip(runs["name_template"], runs["repeat"], strict=True))
    flags = [f for f in str(runs["ptxas_flags"].iloc[0]).split() if f]
    bare_wall = bare_loop(ptx, arch, tool, assemblies, jobs, flags)
    base = rows[rows.name_template == "{base}"].groupby("kernel").registers.first()
    trig = rows[rows.name_template == "cutlass_{base}"].groupby("kernel").registers.first()
    first = rows[rows.repeat == 0]
    triggered_differs = first[(first.name_template == "cutlass_{base}") & first.verdict.str.startswith("differs")]
    result = {
        **origin,
        "arch": arch, "ptxas": tool.version, "ptxas_sha256": tool.sha256, "jobs": jobs, "exit_code": rc,
        "variants": len(rows), "ptxas_runs": len(assemblies), "assemblies": [list(a) for a in assemblies],
        "sweep_wall_s": round(sweep_wall, 2), "bare_ptxas_wall_s": round(bare_wall, 2),
        "ratio": round(sweep_wall / bare_wall, 3), "goal_ratio": 1.3,
        "kernels": int(first.kernel.nunique()),
        "kernels_whose_registers_change_with_cutlass": int((base != trig).sum()),
        "kernels_whose_code_differs_with_cutlass": int(triggered_differs.kernel.nunique()),
        "renamed_with_module": bool(rows.renamed_with_module.all()),
        "host": platform.node(), "cpus": jobs, "python": platform.python_version(),
        "ptxprobe_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True).stdout.strip(),
        "lib_file_sha256": sha256_file(args.lib),
    }
    (out / "bench.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("module", "ptxas", "variants", "ptxas_runs", "sweep_wall_s",
                                             "bare_ptxas_wall_s", "ratio")}))


if __name__ == "__main__":
    main()
