"""The verdict's rule as numbers, fixed before the test split is opened (DESIGN §5): its
level, its power, its gates' thresholds, where the betting interval decides, and the critical
value and the units an effect needs that follow from them (heldout.statistics.decision applies
them)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from heldout.statistics.betting import betting_detectable
from heldout.statistics.power import RunDrift, required_units
from heldout.statistics.studentized import drift_factor

# Part of the rule, so not parameters: a level chosen after seeing the data would be no rule.
# α is the literal and the confidence 1 − α (exactly 0.95): 1 − 0.95 is 0.050000000000000044.
ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
POWER = 0.8
MIN_UNITS = 30  # tasks, and groups: below this the interval's own coverage is not to be trusted
MIN_FAILURE_CAPABLE = 50  # tasks some arm fails at least once: fewer cannot show a difference
# From this many to MIN_FAILURE_CAPABLE failure-capable tasks the verdict stands with a
# warning; below it the comparison is void.
WARN_FAILURE_CAPABLE = 30
TRUNCATION_RATIO = 2.0
TRUNCATION_FLOOR = 0.02  # a truncation rate below 2% is too rare to void anything
# Below this many tasks or groups the interval is widened to the betting interval: in
# simulation the resampling methods' false "better" reached 0.07-0.15 at 30 tasks on skewed
# nulls and was within its bound from 164 (benchmarks/verdict_simulation.py).
BETTING_BELOW = 100
# ... and below this many of them whose difference is not 0. A unit whose arms tie says
# nothing of the tails, so the resampling methods' accuracy rests on the units that differ:
# on skewed and near-ceiling sets of 100-164 tasks only 4-75 differ, and there the
# bootstrap-t said "better" to 0.025-0.057 of nulls. 75 holds every null cell of the grid and
# keeps the bootstrap-t for the +5-point power cells, where 81-129 tasks differ (50 left a
# cell at 0.037; 100 cost a third of the power on a U-shaped set: docs/statistics.md).
DIFFERING_BELOW = 75



def rule_settings() -> dict[str, float]:
    """The constants the rule decides with, as a closed access records them beside its
    verdict: a later report that decides otherwise can say which of them changed."""
    return {"alpha": ALPHA, "power": POWER, "min_units": MIN_UNITS,
            "min_failure_capable": MIN_FAILURE_CAPABLE,
            "warn_failure_capable": WARN_FAILURE_CAPABLE, "truncation_ratio": TRUNCATION_RATIO,
            "truncation_floor": TRUNCATION_FLOOR, "betting_below": BETTING_BELOW,
            "differing_below": DIFFERING_BELOW}


def betting_decides(units: int, differing: float) -> bool:
    """Whether the betting interval widens the verdict's: below BETTING_BELOW tasks or groups,
    or below DIFFERING_BELOW of them whose difference is not 0."""
    return units < BETTING_BELOW or differing < DIFFERING_BELOW


def critical_value(runs: tuple[float, float, int] | None = None) -> float:
    """The bootstrap-t's critical value in standard errors: z₁₋α/₂, or with `runs` (the
    tasks' share of the variance, the runs' share, the runs' degrees of freedom) widened as
    the runs' estimated variance widens it (heldout.statistics.studentized.drift_factor).
    Where the betting test decides too, what it needs is betting_detectable's, not a
    critical value: its half-width is not a multiple of the standard error."""
    z = float(sps.norm.ppf(1 - ALPHA / 2))
    return z if runs is None else z * drift_factor(*runs, ALPHA)


def run_variance(drift: RunDrift | None) -> float:
    """What whole runs add to the variance of the difference: 0 without reruns."""
    return drift.variance if drift is not None else 0.0


def shares(sd: float, units: int, drift: RunDrift | None) -> tuple[float, float, int] | None:
    return None if drift is None else (sd**2 / units, drift.variance, drift.df)


def units_for(effect: float, sd: float, drift: RunDrift | None,
              differing_share: float = 1.0) -> int | None:
    """Tasks (or groups) the verdict needs to find `effect` with probability POWER, at the
    paired sd and the runs' spread measured and the share of units that differ; None when
    the runs' variance alone keeps it out of reach (more runs would bring it in). Where the
    betting interval decides (betting_decides at that many units, that share of them
    differing) the effect must also be one the betting test finds with probability POWER on
    units spread with that sd (betting_detectable on their normal quantiles), as the
    verdict's MDE is; with reruns the t critical value at the units found (three rounds: it
    moves little once the tasks' share is known)."""
    switch = max(BETTING_BELOW, math.ceil(DIFFERING_BELOW / differing_share - 1e-9)) \
        if differing_share > 0 else math.inf
    variance = run_variance(drift)

    found: int | None = 1
    for _ in range(3):
        found = required_units(effect, sd, variance, critical_value(shares(sd, found, drift)),
                               POWER)
        if found is None:
            return None
    # No unit differing at all: the betting test decides at any size (capped for the search).
    switch = min(switch, 100_000)
    if found < switch:
        betting = _betting_units(effect, sd, found, int(switch))
        if betting < switch:
            return betting
    return max(found, int(switch))


def _betting_units(effect: float, sd: float, least: int, switch: int) -> int:
    """The fewest units from `least` on at which the betting test finds `effect` with
    probability POWER on units spread with `sd` (their normal quantiles), or `switch`, where
    it no longer decides."""
    def found(units: int) -> bool:
        spread = sd * sps.norm.ppf((np.arange(units) + 0.5) / units)
        return betting_detectable(np.clip(spread, -1, 1), confidence=CONFIDENCE,
                                  power=POWER) <= abs(effect)

    if found(least):
        return least
    low, high = least, switch
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if found(middle) else (middle, high)
    return high
