"""The verdict's deciding test where the differences can be skewed (more than one episode
per task, or groups, or reruns): the intersection-union of the bootstrap-t and the sign-flip
test, joined below BETTING_BELOW units (or DIFFERING_BELOW that differ) by the hedged-capital
betting test, and its interval (heldout.statistics.decision's docstring says why)."""

from __future__ import annotations

import math

import numpy as np

from heldout.statistics.betting import betting_interval
from heldout.statistics.intervals import Interval
from heldout.statistics.paired_tests import PermutationTest
from heldout.statistics.power import RunDrift
from heldout.statistics.rule import (
    ALPHA,
    BETTING_BELOW,
    CONFIDENCE,
    DIFFERING_BELOW,
    betting_decides,
    run_variance,
)
from heldout.statistics.studentized import studentized_test


def noise(drift: RunDrift | None) -> float:
    """The episodes' noise the runs' variance carries, taken out of the units' part."""
    return drift.noise if drift is not None else 0.0


def skew_robust(differences: np.ndarray, signs: PermutationTest, groups: np.ndarray | None,
                 drift: RunDrift | None, seed: int | None
                 ) -> tuple[PermutationTest, Interval, bool]:
    """The intersection-union test of the bootstrap-t and the sign-flip test and, where
    betting_decides, the hedged-capital betting test; its interval (the bootstrap-t's, widened
    to the betting interval where betting decides); and whether the betting test decided.
    p is the largest of the tests' p-values, so the p printed is
    the deciding procedure's, and it rejects exactly when its interval excludes 0."""
    studentized = studentized_test(differences, groups=groups, confidence=CONFIDENCE,
                                   drift_variance=run_variance(drift),
                                   drift_df=drift.df if drift is not None else math.inf,
                                   noise_variance=noise(drift), seed=seed)
    # The p reported is one of the tests', written with that one's resolution.
    candidates = [(studentized.p_value, studentized.resamples, studentized.p_floor,
                   studentized.method),
                  (signs.p_value, signs.draws, signs.floor, signs.method)]
    difference, betting_decided = studentized.interval, False
    if betting_decides(studentized.units, signs.nonzero_units):
        betting = betting_interval(differences, groups=groups, confidence=CONFIDENCE,
                                   seed=seed)
        why = _why_betting(studentized.units, signs.nonzero_units)
        candidates.append((betting.p_value, None, 0.0, f"{betting.interval.method} ({why})"))
        low = min(difference.low, betting.interval.low)
        high = max(difference.high, betting.interval.high)
        betting_decided = True
        if (low, high) != (difference.low, difference.high):
            difference = Interval(difference.estimate, low, high,
                                  f"{difference.method}, widened to the "
                                  f"{betting.interval.method} ({why})")
    p_value, draws, floor, _ = max(candidates, key=lambda candidate: candidate[0])
    methods = [candidate[3] for candidate in candidates]
    test = PermutationTest(
        signs.statistic, p_value, signs.units, signs.nonzero_units, draws is None, draws,
        f"{', '.join(methods[:-1])} and {methods[-1]}, all rejecting (p the largest)",
        bool(p_value <= ALPHA), floor)
    return test, difference, betting_decided


def _why_betting(units: int, differing: int) -> str:
    if units < BETTING_BELOW:
        return f"fewer than {BETTING_BELOW} units"
    return f"{differing} of {units} units differ, fewer than {DIFFERING_BELOW}"
