"""A ladder, not a point: reduce under the plain predicate, then under rising thresholds of one property of the
difference (``--ladder 'capmerc_bytes - baseline_capmerc_bytes >= 1024,4096,16384'``), and say what each level
needs to keep. Each level is an ordinary reduction in ``DIR/level-<k>`` (resumable like any), and
``DIR/ladder.json`` lists the levels; the candidates the levels share come from the cache.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ptxprobe.core.cache import atomic_write
from ptxprobe.core.errors import SpecError
from ptxprobe.reduce.keep import parse_keep
from ptxprobe.reduce.run import NO_DIFFERENCE, Request, reduce_request

LADDER = "ladder.json"


def parse_ladder(text: str) -> tuple[str, list[float]]:
    """``EXPR >= T1,T2,...`` -> (EXPR, thresholds rising); every level's ``--keep`` is checked before any work."""
    expr, sep, values = text.rpartition(">=")
    if not sep or not expr.strip():
        raise SpecError(f"--ladder {text!r}: expected EXPR >= T1,T2,... (e.g. 'registers - baseline_registers >= "
                        "8,16,32')")
    try:
        thresholds = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise SpecError(f"--ladder {text!r}: the thresholds must be numbers, got {values.strip()!r}") from None
    if not thresholds:
        raise SpecError(f"--ladder {text!r}: no thresholds after >=")
    thresholds = sorted(set(thresholds))
    for t in thresholds:
        parse_keep(level_keep(expr, t))
    return expr.strip(), thresholds


def level_keep(expr: str, threshold: float) -> str:
    value = int(threshold) if float(threshold).is_integer() else threshold
    return f"{expr.strip()} >= {value}"


def run_ladder(req: Request, expr: str, thresholds: list[float], progress=None) -> dict:
    """The plain level, then each threshold until one has no difference to start from (higher ones cannot)."""
    out = Path(req.out)
    levels: list[dict] = []
    keeps = [None, *(level_keep(expr, t) for t in thresholds)]
    for k, keep in enumerate(keeps):
        res = reduce_request(replace(req, keep=keep, out=str(out / f"level-{k}")), progress)
        rec = res.record
        levels.append({"level": k, "keep": keep, "status": res.status, "dir": str(res.out),
                       "instructions": rec.get("after", {}).get("instructions"),
                       "remains": rec.get("after", {}).get("in_words"), "why": rec.get("why"),
                       "deltas": rec.get("minimal_pair", {}).get("deltas"), "ptxas_calls": rec.get("ptxas_calls"),
                       "wall_seconds": rec.get("wall_seconds"), "one_minimal": rec.get("one_minimal")})
        if res.status == NO_DIFFERENCE:
            break
    doc = {"expression": expr, "thresholds": thresholds, "levels": levels,
           "input": {"instructions": rec.get("before", {}).get("instructions")} if levels else {}}
    atomic_write(out / LADDER, (json.dumps(doc, indent=1, default=str) + "\n").encode())
    return doc
