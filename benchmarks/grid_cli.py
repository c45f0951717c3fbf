"""The command line the simulation grids share: how many replications a cell, how many
worker processes, and the one-sided bound a null cell's false claim is held to."""

from __future__ import annotations

import argparse
import math


def grid_arguments(doc: str, also: str = "") -> argparse.Namespace:
    """Parse --replications and --workers, and print the bound those replications give."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    se = math.sqrt(0.025 * 0.975 / args.replications)
    print(f"{args.replications:,} replications a cell; one-sided bound 0.025 + 2.6·SE = "
          f"{0.025 + 2.6 * se:.4f}{also}")
    return args
