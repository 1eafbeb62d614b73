"""One figure per FINDINGS.md question, drawn from the data the sections compute; each function returns SVG text.

render.py writes them to docs/figures/ and its ``--check`` compares them byte for byte, so the output must not vary
between runs: the Agg backend, a fixed hash salt for the SVG's ids, no date or creator in the metadata, fixed figure
sizes, text kept as text (``svg.fonttype = none``, which also keeps the files small). The same matplotlib version
draws the same bytes; another version may not, and then the check says so.
"""

from __future__ import annotations

import functools
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

STYLE = {"svg.hashsalt": "ptxprobe", "svg.fonttype": "none", "font.family": "DejaVu Sans", "font.size": 8,
         "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7, "legend.fontsize": 7,
         "axes.spines.top": False, "axes.spines.right": False, "path.simplify": True}
VERSION_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
GREY, BAND = "#7f7f7f", "#d9d9d9"


def _svg(draw):
    """Run ``draw`` (which returns a figure) under the fixed style and return the figure as SVG text."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs) -> str:
        with plt.rc_context(STYLE):
            fig = draw(*args, **kwargs)
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
            plt.close(fig)
        return buf.getvalue()
    return wrapper


def _pct(x):
    return (np.asarray(x, dtype=float) - 1) * 100


def _margins(ax, margin: float, aa_half_width: float | None = None, aa_label: str = "") -> None:
    """The ±margin equivalence lines and, where given, the A/A band around zero (all in per cent)."""
    if aa_half_width is not None:
        ax.axvspan(-aa_half_width * 100, aa_half_width * 100, color=BAND, zorder=0, label=aa_label)
    for s in (-1, 1):
        ax.axvline(s * margin * 100, color=GREY, ls="--", lw=0.8, zorder=1,
                   label=f"equivalence margin ±{margin * 100:g} %" if s > 0 else None)
    ax.axvline(0, color="black", lw=0.6, zorder=1)


def _legend_below(fig, axes, ncol: int = 2) -> None:
    """One legend under the figure, with the labelled handles of ``axes`` in order."""
    handles, labels = [], []
    for ax in axes:
        h, la = ax.get_legend_handles_labels()
        handles += h
        labels += la
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)


def _title(fig, text: str) -> None:
    fig.suptitle(text, fontsize=9, x=0.01, ha="left")


def _forest(ax, rows: pd.DataFrame, labels: list[str], colours: list[str]) -> None:
    """Ratio (``ratio``, ``low``, ``high``) per row as a point with its interval, top row first."""
    y = np.arange(len(rows))[::-1]
    x, lo, hi = _pct(rows.ratio), _pct(rows.low), _pct(rows.high)
    for yi, xi, li, hi_, c in zip(y, x, lo, hi, colours, strict=True):
        if np.isnan(xi):
            continue
        ax.plot([li, hi_], [yi, yi], color=c, lw=1.2, solid_capstyle="butt", zorder=3)
        ax.plot([xi], [yi], "o", color=c, ms=3, zorder=4)
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.tick_params(axis="y", length=0)


@_svg
def machine_code(cutlass: pd.DataFrame, control: pd.DataFrame, kernels: dict[str, int], runs: list[str]):
    """Heatmaps arch x ptxas release of the share of kernels whose machine code the name changes: ``cutlass_`` above,
    the control ``xutlass_`` below (matrices as ``static_runs.change_matrix`` gives them, in the order to draw;
    ``kernels``: how many kernels each arch's share is of)."""
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 4.4), sharex=True, layout="constrained")
    archs, versions = list(cutlass.index), list(cutlass.columns)
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad=BAND)
    for ax, m, name in zip(axes, (cutlass, control), ("`cutlass_` name", "control `xutlass_` name"), strict=True):
        z = np.ma.masked_invalid(m.loc[archs, versions].to_numpy(dtype=float))
        mesh = ax.pcolormesh(np.arange(len(versions) + 1), np.arange(len(archs) + 1), z, cmap=cmap, vmin=0, vmax=1,
                             edgecolors="white", linewidth=0.5)
        for (i, j), v in np.ndenumerate(z.filled(np.nan)):
            if v == v and 0 < v < 1:
                ax.text(j + 0.5, i + 0.5, f"{v:.0%}".replace("%", ""), ha="center", va="center", fontsize=5.5,
                        color="black")
        ax.set_yticks(np.arange(len(archs)) + 0.5, [f"{a} ({kernels[a]})" for a in archs])
        ax.set_title(name.replace("`", ""), loc="left")
        ax.tick_params(length=0)
        for s in ax.spines.values():
            s.set_visible(False)
    axes[-1].set_xticks(np.arange(len(versions)) + 0.5, versions, rotation=90)
    axes[-1].set_xlabel("ptxas release (grey: the release does not accept the arch)")
    fig.colorbar(mesh, ax=axes, shrink=0.8, label="share of the arch's kernels (n) whose code changes",
                 format=matplotlib.ticker.PercentFormatter(1.0))
    _title(fig, "Does the name change the machine code? (" + ", ".join(runs) + ")")
    return fig


@_svg
def speed(effects: pd.DataFrame, margin: float, aa_half_width: float, run: str):
    """Forest plot of the ``cutlass_`` throughput ratios with their intervals, one row per kernel x problem x ptxas
    (``effects``: ``label``, ``ptxas``, ``ratio``, ``low``, ``high``, ``identical_code``; top row first), the
    equivalence margin and the A/A band (± the run's median A/A half-width)."""
    fig, ax = plt.subplots(figsize=(7.5, 0.13 * len(effects) + 1.8), layout="constrained")
    versions = list(dict.fromkeys(effects.ptxas))
    colour = dict(zip(versions, VERSION_COLOURS, strict=False))
    _margins(ax, margin, aa_half_width, f"A/A half-width, median over the run's groups (±{aa_half_width * 100:.3f} %)")
    _forest(ax, effects, list(effects.label), [colour[v] for v in effects.ptxas])
    same = effects.identical_code.to_numpy()
    y = np.arange(len(effects))[::-1]
    if same.any():
        ax.plot(np.zeros(same.sum()), y[same], "x", color=GREY, ms=4, zorder=4,
                label="identical machine code (not timed)")
    for v in versions:
        ax.plot([], [], "o-", color=colour[v], ms=3, label=f"ptxas {v}: ratio and interval")
    ax.set_xlabel("cutlass_ name vs the baseline name: throughput change (%)")
    _title(fig, f"Does it change speed? The cutlass_ name on the H200 ({run})")
    _legend_below(fig, [ax])
    return fig


@_svg
def other_kernels(cute: pd.DataFrame, hopper: pd.DataFrame, margin: float, hopper_aa: float, runs: tuple[str, str]):
    """Two forest plots: CuTe DSL kernels under their own (``cutlass``) name and the control against the trigger-free
    spelling (``cute``), and the Gluon Hopper attention's ``cutlass_`` and control names against its baseline
    (``hopper``); both with ``label``, ``role`` (trigger/control), ``ratio``, ``low``, ``high``."""
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 0.13 * (len(cute) + len(hopper)) + 2.4), layout="constrained",
                             height_ratios=[len(cute) + 3, len(hopper) + 3])
    colour = {"trigger": VERSION_COLOURS[1], "control": VERSION_COLOURS[0]}
    for ax, t, title, aa in ((axes[0], cute, f"CuTe DSL kernels, ahead of time ({runs[0]})", None),
                             (axes[1], hopper, f"The Gluon Hopper attention ({runs[1]})", hopper_aa)):
        _margins(ax, margin, aa, f"A/A half-width, median over the run's groups (±{aa * 100:.2f} %)" if aa else "")
        _forest(ax, t, list(t.label), [colour[r] for r in t.role])
        ax.set_title(title, loc="left")
    axes[0].plot([], [], "o-", color=colour["trigger"], ms=3, label="the DSL's own cutlass name")
    axes[0].plot([], [], "o-", color=colour["control"], ms=3, label="control zutlass")
    axes[1].plot([], [], "o-", color=colour["trigger"], ms=3, label="cutlass_ name")
    axes[1].plot([], [], "o-", color=colour["control"], ms=3, label="control xutlass_")
    axes[0].set_xlabel("vs the trigger-free spelling (xutlass): throughput change (%)")
    axes[1].set_xlabel("vs the baseline name: throughput change (%)")
    for ax in axes:
        ax.legend(loc="lower left", frameon=False)
    _title(fig, "Other people's kernels under the name, on the H200")
    return fig


@_svg
def measurement(groups: dict[str, pd.DataFrame], goals: dict[str, float]):
    """The interleaved design across its runs: each group's A/A 95 % half-width with the median and the maximum
    against their goals (left), and each planted slowdown as measured against its planted size (right).
    ``groups``: run -> ``gpu_runs.groups`` of it; ``goals``: ``aa_halfwidth_median_max``, ``aa_halfwidth_max_max``."""
    runs = list(groups)
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.5, 0.3 * len(runs) + 3), layout="constrained",
                                      width_ratios=[1.3, 1])
    y = np.arange(len(runs))[::-1]
    for yi, run in zip(y, runs, strict=True):
        hw = groups[run].aa_half_width.to_numpy() * 100
        left.plot(hw, np.full(len(hw), yi), "|", color=GREY, ms=6, alpha=0.6, zorder=2)
        left.plot([np.median(hw)], [yi], "D", color=VERSION_COLOURS[0], ms=4, zorder=3)
        left.plot([hw.max()], [yi], "v", color=VERSION_COLOURS[1], ms=5, zorder=3)
    left.axvline(goals["aa_halfwidth_median_max"] * 100, color=VERSION_COLOURS[0], ls="--", lw=0.8,
                 label=f"goal for the median (≤ {goals['aa_halfwidth_median_max'] * 100:g} %)")
    left.axvline(goals["aa_halfwidth_max_max"] * 100, color=VERSION_COLOURS[1], ls="--", lw=0.8,
                 label=f"goal for the maximum (≤ {goals['aa_halfwidth_max_max'] * 100:g} %)")
    left.plot([], [], "|", color=GREY, ms=6, label="one group")
    left.plot([], [], "D", color=VERSION_COLOURS[0], ms=4, label="median")
    left.plot([], [], "v", color=VERSION_COLOURS[1], ms=5, label="maximum")
    left.set_yticks(y, [f"{r} ({len(groups[r])})" for r in runs])
    left.set_xlim(left=0)
    left.set_xlabel("A/A 95 % half-width (%); run (n groups)")
    left.set_title("A/A half-widths", loc="left")

    sizes = sorted({c.split("_")[1] for g in groups.values() for c in g.columns
                    if c.startswith("planted_") and c.endswith("_measured")}, key=float)
    width = 0.8 / len(runs)
    right.axhline(1, color="black", lw=0.8, zorder=1, label="measured as planted")
    for i, f in enumerate(sizes):
        for k, run in enumerate(runs):
            m = groups[run][f"planted_{f}_measured"].dropna().to_numpy() / float(f)
            x = i - 0.4 + width * (k + 0.5)
            right.plot(np.full(len(m), x), m, "_", color=GREY, ms=5, alpha=0.6, zorder=2)
            right.plot([x], [np.median(m)], "o", color=VERSION_COLOURS[k % len(VERSION_COLOURS)], ms=3.5, zorder=3,
                       label=f"{run}: median" if i == 0 else None)
    right.plot([], [], "_", color=GREY, ms=5, label="one group, measured ÷ planted")
    right.set_xticks(range(len(sizes)), [f"{float(f) * 100:g} %" for f in sizes])
    right.set_xlabel("planted slowdown (runs in legend order)")
    right.set_ylabel("measured ÷ planted")
    right.set_title("Planted slowdowns, measured", loc="left")
    _legend_below(fig, [left, right], ncol=3)
    _title(fig, "How good is the measurement? The interleaved design on the H200")
    return fig
