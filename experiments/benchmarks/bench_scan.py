"""ptxas-scan speed: one full scan per ptxas binary the toolchain knows (target < 20 s each, 2 cores).

python experiments/benchmarks/bench_scan.py
"""

from __future__ import annotations

import json
import os

from ptxprobe.api import discover
from ptxprobe.api import scan_ptxas as scan

if __name__ == "__main__":
    out = []
    for t in discover(("ptxas",)):
        r = scan(t.path)
        out.append(
            {
                "ptxas": t.version,
                "origin": t.origin,
                "mbytes": round(os.path.getsize(r.real_path) / 2**20, 1),
                "seconds": round(r.seconds, 3),
                "sites": len(r.sites),
                "has_cutlass": "cutlass" in r.literals,
            }
        )
    print(json.dumps(out, indent=1))
