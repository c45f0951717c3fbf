"""Figures as PNG files (matplotlib, no display needed): they render offline, unlike
DVC's HTML plots, which load their chart library from the network."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def pass_at_k_curves(
    curves: dict[str, dict[int, float]], path: Path, *, title: str, highlight: str | None = None
) -> Path:
    """pass@k against k (log 2 axis), one line per checkpoint; `highlight` drawn bold."""
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    colors = plt.cm.viridis([i / max(len(curves) - 1, 1) for i in range(len(curves))])
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
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
