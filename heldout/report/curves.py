"""pass@k and pass^k of both arms against k, with one arm's interval as each band, their paired
difference and where the curves cross: a candidate can lead at k = 1 and trail at k = 10 (more
reach in the base, more reliability in the candidate), which pass@1 alone would hide. Bands and
differences rest on the tasks' groups when they have them, as pass@1 does."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np

from heldout.report.inputs import Arm
from heldout.report.sections import Crossing, Curve, CurvePoint, DifferencePoint, PerArm
from heldout.statistics.bca import arm_estimate_interval, difference_interval
from heldout.statistics.intervals import Interval


def _leader(difference: Interval, names: PerArm[str]) -> str | None:
    """The arm ahead where the paired interval excludes 0; none where it includes 0, so a
    "crossing" is never read off point estimates alone."""
    if difference.low <= 0 <= difference.high or abs(difference.estimate) <= 1e-12:
        return None
    return names.candidate if difference.estimate > 0 else names.base


def _crossings(differences: list[DifferencePoint]) -> list[Crossing]:
    """Where the leader changes between consecutive k at which one arm leads beyond its
    interval."""
    led = [point for point in differences if point.leader is not None]
    return [
        Crossing(before.k, after.k, before.leader, after.leader)
        for before, after in pairwise(led)
        if before.leader != after.leader
    ]


def curve(
    arms: PerArm[Arm], estimator: Callable[..., Any], ks: list[int], seed: int,
    groups: np.ndarray | None = None,
) -> Curve:
    """`estimator` (pass_at_k or pass_hat_k) per arm at every k (curve_of); `groups`: one label
    per compared task, or None (heldout.statistics.grouping)."""
    per_task = arms.map(lambda arm: np.asarray(
        estimator(arm.counts["n"].to_numpy(), arm.counts["c"].to_numpy(), ks)))
    return curve_of(per_task, ks, arms.map(lambda arm: arm.name), seed, groups)


def curve_of(
    per_task: PerArm[np.ndarray], ks: list[int], names: PerArm[str], seed: int,
    groups: np.ndarray | None = None,
) -> Curve:
    """Each arm's per-task estimates (tasks × ks, in one task order) averaged at every k, with
    bands (arm_estimate_interval, the headline's own interval: the band at k = 1 is its pass@1
    interval), their paired difference (difference_interval), and where the two curves cross.
    """
    bands = per_task.map(lambda table: [
        CurvePoint(k, arm_estimate_interval(table[:, column], groups=groups, seed=seed))
        for column, k in enumerate(ks)])
    differences = []
    for column, k in enumerate(ks):
        difference = difference_interval(
            per_task.candidate[:, column] - per_task.base[:, column], groups=groups, seed=seed)
        differences.append(DifferencePoint(k, difference, _leader(difference, names)))
    return Curve(bands, differences, _crossings(differences))
