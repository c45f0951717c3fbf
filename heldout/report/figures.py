"""Every figure heldout draws, as PNG bytes: the report's, and the pipeline's val pass@k plot.

Drawn with matplotlib's object API (no pyplot, no display, no backend chosen for the process,
no global state), so they can be written as files and inlined in the HTML alike, and they
render offline, unlike DVC's HTML plots, which load their chart library from the network.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from heldout.report.core import Report
from heldout.report.sections import PerArm

ARM_COLORS = PerArm(base="#6b7280", candidate="#2f6fdd")
FLIP_COLORS = {"improved": "#15803d", "regressed": "#b91c1c", "both pass": "#60a5fa",
               "both fail": "#9ca3af"}
# Beyond this many tasks the forest plot drops its task labels: they would overlap.
LABELLED_TASKS_AT_MOST = 80


# The report's figures carry no Software tag, so their bytes do not change with matplotlib's
# version. plots/val_passk.png has always carried it (None keeps matplotlib's default), and
# keeps it so that the pipeline's output stays byte for byte what it was.
WITHOUT_SOFTWARE_TAG = {"Software": None}


def _png(figure: Figure, metadata: dict[str, Any] | None = WITHOUT_SOFTWARE_TAG) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata=metadata)
    return buffer.getvalue()


def pass_k_figure(report: Report) -> bytes:
    """pass@k and pass^k against k for both arms, with each arm's interval as its band, and
    best-of-k dashed beside pass@k where a selector accepted episodes."""
    figure = Figure(figsize=(10, 4.2), dpi=110, layout="constrained")
    for axes, (curve, label) in zip(
        figure.subplots(1, 2), ((report.pass_at_k, "pass@k"), (report.pass_hat_k, "pass^k")),
        strict=True,
    ):
        for name, points, color in zip(report.names, curve.arms, ARM_COLORS, strict=True):
            ks = [point.k for point in points]
            axes.fill_between(ks, [point.interval.low for point in points],
                              [point.interval.high for point in points],
                              color=color, alpha=0.18, linewidth=0)
            axes.plot(ks, [point.interval.estimate for point in points], marker="o",
                      markersize=4, color=color, label=name)
        if label == "pass@k" and report.best_of_k is not None:
            for name, points, color in zip(report.names, report.best_of_k.curve.arms,
                                           ARM_COLORS, strict=True):
                axes.plot([point.k for point in points],
                          [point.interval.estimate for point in points], linestyle="--",
                          marker="s", markersize=3, color=color, label=f"{name} best-of-k")
        ks = [point.k for point in curve.arms.base]
        axes.set_xscale("log", base=2)
        axes.set_xticks(ks, [str(k) for k in ks])
        axes.minorticks_off()
        axes.set_ylim(0, 1.02)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.set_xlabel("k (episodes per task)")
        axes.set_title(f"{label} (unbiased, task average)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=9)
    return _png(figure)


def forest_figure(report: Report) -> bytes:
    """Each task's difference in pass rate (candidate − base), most improved on top, with the
    paired mean difference and its interval."""
    rows = report.flips.tasks
    difference = report.headline.decision.difference
    labelled = len(rows) <= LABELLED_TASKS_AT_MOST
    height = 1.6 + 0.16 * len(rows) if labelled else 7.0
    figure = Figure(figsize=(7.5, height), dpi=110, layout="constrained")
    axes = figure.subplots()
    positions = list(range(len(rows), 0, -1))
    axes.axvspan(100 * difference.low, 100 * difference.high, color="#2f6fdd", alpha=0.15,
                 label="paired 95% interval")
    axes.axvline(100 * difference.estimate, color="#2f6fdd", linewidth=1.5,
                 label=f"mean {100 * difference.estimate:+.1f} points")
    axes.axvline(0, color="black", linewidth=0.8)
    for flip, color in FLIP_COLORS.items():
        chosen = [(y, 100 * row.difference) for y, row in zip(positions, rows, strict=True)
                  if row.flip == flip]
        if chosen:
            axes.scatter([x for _, x in chosen], [y for y, _ in chosen], s=14, color=color,
                         label=f"{flip} (pass rate over every episode)", zorder=3)
    if labelled:
        axes.set_yticks(positions, [row.task_id + (" (flagged)" if row.flagged else "")
                                    for row in rows], fontsize=7)
    else:
        axes.set_yticks([])
    axes.set_ylim(0.3, len(rows) + 0.7)
    axes.set_xlim(-105, 105)
    axes.set_xlabel(f"{report.names.candidate} − {report.names.base} "
                    "(points of pass rate, all episodes)")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    return _png(figure)


def val_selection_figure(selection: dict[str, Any]) -> bytes:
    """Validation score per checkpoint with its interval; the chosen checkpoint marked, and
    under each the share of resamples the rule picks it in (where the selection has them)."""
    table = selection["table"]
    shares = selection.get("pick_stability", {}).get("shares", {})
    figure = Figure(figsize=(max(5.0, 0.8 * len(table) + 2), 4), dpi=110, layout="constrained")
    axes = figure.subplots()
    for x, row in enumerate(table):
        chosen = row["checkpoint"] == selection.get("chosen")
        color = "#d97706" if chosen else "#2f6fdd"
        axes.errorbar([x], [row["value"]],
                      yerr=[[row["value"] - row["low"]], [row["high"] - row["value"]]],
                      fmt="*" if chosen else "o", markersize=14 if chosen else 6, color=color,
                      capsize=4)
        if chosen:
            axes.annotate("chosen", (x, row["high"]), textcoords="offset points",
                          xytext=(0, 6), ha="center", color=color, fontweight="bold")
        if row["checkpoint"] in shares:
            axes.annotate(f"picked {shares[row['checkpoint']]:.0%}", (x, row["low"]),
                          textcoords="offset points", xytext=(0, -12), ha="center",
                          fontsize=7, color=color)
    axes.set_xticks(range(len(table)), [row["checkpoint"] for row in table], rotation=30,
                    ha="right")
    axes.set_xlim(-0.7, len(table) - 0.3)  # room for the "chosen" label at either end
    axes.set_ylim(0, 1.05)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_ylabel(f"val {selection.get('metric', 'score')}")
    axes.set_title(f"selection: {selection.get('rule', '')}", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    return _png(figure)


def draw_figures(report: Report) -> dict[str, bytes]:
    """Every figure the report has data for, by name (figures/<name>.png)."""
    figures = {"pass_k": pass_k_figure(report), "forest": forest_figure(report)}
    selection = (report.protocol or {}).get("selection") or {}
    if selection.get("table"):
        figures["val_selection"] = val_selection_figure(selection)
    return figures


def checkpoints_pass_at_k_figure(
    curves: Mapping[str, Mapping[int, float]], *, title: str, highlight: str | None = None
) -> bytes:
    """pass@k against k (log 2 axis), one line per checkpoint; `highlight` drawn bold. The
    pipeline's plots/val_passk.png."""
    figure = Figure(figsize=(7, 4.5), dpi=120)
    axes = figure.subplots()
    colors = colormaps["viridis"]([i / max(len(curves) - 1, 1) for i in range(len(curves))])
    for (name, curve), color in zip(curves.items(), colors, strict=True):
        ks = sorted(curve)
        bold = name == highlight
        axes.plot(ks, [curve[k] for k in ks], marker="o", markersize=3, label=name,
                  color="black" if bold else color, linewidth=2.5 if bold else 1.2,
                  linestyle="--" if bold else "-")
    axes.set_xscale("log", base=2)
    ks = sorted({k for curve in curves.values() for k in curve})
    axes.set_xticks(ks, [str(k) for k in ks])
    axes.minorticks_off()
    axes.set_xlabel("k (episodes per task)")
    axes.set_ylabel("pass@k (unbiased, task average)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    return _png(figure, metadata=None)
