"""FINDINGS' atlas figure: how often the trigger changes the code of the kernels libraries ship, and which way.

Left, a heat map: one row per cell (library, its entries where sampled, arch), one column per ptxas release, the
share of the cell's kernels whose machine code the trigger changes (added to a kernel without it, or spelled out of
one born with it: the row says which). Right, per library the register change the trigger brings to the kernels it
changes (at each library's first release at sm_90a, the arch every library has), as a histogram. Both are read
from the same committed records the atlas's tables are (shipped.json, interpreted.json).
"""

from __future__ import annotations

import json

import matplotlib
import numpy as np

from experiments.analysis import static_runs as analysis
from experiments.findings.atlas import SHIPPED_ATLAS, TRITON_ATLAS, _shipped_templates, _templates
from experiments.findings.figures import BAND, _svg, _title, plt

SPAN = 48  # register changes drawn from -SPAN to +SPAN, the rest gathered at the ends


def _cells() -> list[tuple[str, str, dict]]:
    """(row label, direction, cell) for every committed atlas cell, wheels first."""
    shipped = json.loads((analysis.results_dir(SHIPPED_ATLAS) / "shipped.json").read_text())
    triton = json.loads((analysis.results_dir(TRITON_ATLAS) / "interpreted.json").read_text())
    rows = []
    for c in shipped["cells"]:
        entries = c.get("entries", "all")
        sample = "" if entries == "all" else (" sample" if "at most" in entries else f" {entries.strip('*')}")
        rows.append((f"{c['library']}{sample} {c['arch']}", "shipped", c))
    for c in triton["cells"]:
        born = _templates(c["releases"][0])[2]
        rows.append((f"{c['library']} {c['arch']}", "removed" if born else "added", c))
    return rows


def trigger_names(cell: dict, release: dict) -> dict:
    """The trigger template's summary in a release of a cell, whichever step made it."""
    template = _templates(release)[0] if "ops" in cell else _shipped_templates(release)[0]
    return release["names"][template]


def shares() -> tuple[list[str], list[str], np.ndarray, list[int]]:
    """Rows, releases, the share matrix (NaN where a cell has no such release) and each row's kernels."""
    cells = _cells()
    versions = sorted({r["ptxas_version"] for _, _, c in cells for r in c["releases"]},
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    m = np.full((len(cells), len(versions)), np.nan)
    kernels = []
    for i, (_, _, c) in enumerate(cells):
        for r in c["releases"]:
            m[i, versions.index(r["ptxas_version"])] = trigger_names(c, r)["changed"] / max(1, r["kernels"])
        kernels.append(max(r["kernels"] for r in c["releases"]))
    return [f"{label} ({direction})" for label, direction, _ in cells], versions, m, kernels


def register_changes() -> dict[str, dict[int, int]]:
    """Per library, the register change of each kernel the trigger changes: its largest sm_90a cell at its first
    release (a change holding no register change counts at 0); a library none of whose kernels change is left out."""
    out: dict[str, tuple[int, dict[int, int]]] = {}
    for _, _, c in _cells():
        if c["arch"] != "sm_90a":
            continue
        first = min(c["releases"], key=lambda r: tuple(int(x) for x in r["ptxas_version"].split(".")))
        if first["kernels"] > out.get(c["library"], (-1, {}))[0]:
            deltas = {int(d): n for d, n in trigger_names(c, first)["register_deltas"].items()}
            out[c["library"]] = (first["kernels"], deltas)
    return {name: deltas for name, (_, deltas) in sorted(out.items()) if deltas}


@_svg
def figure():
    """The heat map of shares beside the register-change histograms (one panel per library)."""
    labels, versions, m, kernels = shares()
    hist = register_changes()
    fig = plt.figure(figsize=(7.5, max(4.0, 0.22 * len(labels) + 1.6)), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=(1.45, 1))
    ax = left.subplots()
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad=BAND)
    z = np.ma.masked_invalid(m)
    mesh = ax.pcolormesh(np.arange(len(versions) + 1), np.arange(len(labels) + 1), z, cmap=cmap, vmin=0, vmax=1,
                         edgecolors="white", linewidth=0.5)
    for (i, j), v in np.ndenumerate(m):
        if v == v:
            ax.text(j + 0.5, i + 0.5, f"{v * 100:.0f}", ha="center", va="center", fontsize=5.5,
                    color="white" if v > 0.6 else "black")
    ax.set_yticks(np.arange(len(labels)) + 0.5, [f"{lab}, {k}" for lab, k in zip(labels, kernels, strict=True)],
                  fontsize=5.5)
    ax.invert_yaxis()
    ax.set_xticks(np.arange(len(versions)) + 0.5, versions, rotation=90)
    ax.set_xlabel("ptxas release (grey: not swept)")
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    left.colorbar(mesh, ax=ax, shrink=0.6, label="% of the cell's kernels whose code the trigger changes",
                  format=matplotlib.ticker.PercentFormatter(1.0))
    axes = right.subplots(len(hist), 1, sharex=True, squeeze=False)[:, 0]
    for a, (name, deltas) in zip(axes, hist.items(), strict=True):
        d = np.clip(np.repeat(list(deltas), list(deltas.values())), -SPAN, SPAN)
        a.hist(d, bins=np.arange(-SPAN - 2, SPAN + 3, 4), color="#1f77b4")
        a.axvline(0, color="black", lw=0.6)
        a.set_title(f"{name}: {len(d)} changed", loc="left", fontsize=6.5)
        a.tick_params(labelsize=6)
    axes[-1].set_xlabel(f"registers, with the trigger − without (sm_90a, ±{SPAN} at the ends)")
    _title(fig, f"The name in the wild ({SHIPPED_ATLAS}, {TRITON_ATLAS})")
    return fig
