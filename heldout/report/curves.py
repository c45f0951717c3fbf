"""pass@k and pass^k of both arms against k, with task-bootstrap bands, their paired difference
and where the curves cross: a candidate can lead at k = 1 and trail at k = 10 (more reach in
the base, more reliability in the candidate), which pass@1 alone would hide."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np

from heldout.report.inputs import Arm
from heldout.report.sections import Crossing, Curve, CurvePoint, DifferencePoint, PerArm
from heldout.statistics.intervals import Interval, task_bootstrap_ci
from heldout.statistics.paired_tests import paired_bootstrap


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
    arms: PerArm[Arm], estimator: Callable[..., Any], ks: list[int], seed: int
) -> Curve:
    """`estimator` (pass_at_k or pass_hat_k) per arm at every k, with task-bootstrap bands,
    their paired difference, and where the two curves cross."""
    per_task = arms.map(lambda arm: np.asarray(
        estimator(arm.counts["n"].to_numpy(), arm.counts["c"].to_numpy(), ks)))
    bands = per_task.map(lambda table: [
        CurvePoint(k, task_bootstrap_ci(table[:, column], seed=seed))
        for column, k in enumerate(ks)
    ])
    names = arms.map(lambda arm: arm.name)
    differences = []
    for column, k in enumerate(ks):
        difference = paired_bootstrap(per_task.candidate[:, column], per_task.base[:, column],
                                      seed=seed)
        differences.append(DifferencePoint(k, difference, _leader(difference, names)))
    return Curve(bands, differences, _crossings(differences))
