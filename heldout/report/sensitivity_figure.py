"""The harness sweep's figure (plots/sensitivity.png): pass@1 with its task interval under each
setting, one panel per checkpoint and one for the reference, the pinned setting marked.

Drawn like heldout.report.figures: matplotlib's object API, no pyplot, no global state.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

PINNED_COLOR, MOVED_COLOR, STILL_COLOR = "#d97706", "#b91c1c", "#2f6fdd"


def sensitivity_figure(
    panels: Mapping[str, Sequence[Mapping]], *, pinned: str, title: str
) -> bytes:
    """`panels`: per checkpoint (and the reference), its settings in order, each
    {"setting", "estimate", "low", "high", "moved"}: pass@1, its interval, and whether the
    paired difference from the pinned setting excludes 0 (drawn red). The pinned setting is a
    star, with a dotted line at its pass@1 across the panel."""
    count = max(len(panels), 1)
    widest = max((len(rows) for rows in panels.values()), default=1)
    figure = Figure(figsize=(max(4.5, 0.7 * widest + 2.2) * min(count, 3),
                             3.8 * -(-count // 3)), dpi=110, layout="constrained")
    axes_grid = figure.subplots(-(-count // 3), min(count, 3), squeeze=False, sharey=True)
    flat = [axes for row in axes_grid for axes in row]
    for axes, (name, rows) in zip(flat, panels.items(), strict=False):
        for x, row in enumerate(rows):
            is_pinned = row["setting"] == pinned
            color = PINNED_COLOR if is_pinned else MOVED_COLOR if row["moved"] else STILL_COLOR
            axes.errorbar([x], [row["estimate"]],
                          yerr=[[row["estimate"] - row["low"]], [row["high"] - row["estimate"]]],
                          fmt="*" if is_pinned else "o", markersize=13 if is_pinned else 6,
                          color=color, capsize=4)
            if is_pinned:
                axes.axhline(row["estimate"], color=PINNED_COLOR, linestyle=":", linewidth=1)
        axes.set_xticks(range(len(rows)), [row["setting"] for row in rows], rotation=30,
                        ha="right", fontsize=8)
        axes.set_xlim(-0.6, len(rows) - 0.4)
        axes.set_ylim(0, 1.05)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.set_title(name, fontsize=10)
        axes.grid(axis="y", alpha=0.3)
    for axes in flat[len(panels):]:
        axes.set_visible(False)
    for row in axes_grid:
        row[0].set_ylabel("val pass@1 (task interval)")
    figure.suptitle(title, fontsize=10)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
