"""The verdict on a candidate against its base, decided before a word of it is written.

The rule, fixed before the test split is opened (DESIGN §5): "better" or "worse" only when the
paired task-bootstrap interval of candidate − base at CONFIDENCE excludes 0 and, where reruns
of one unchanged version measured a noise floor, the difference clears it; otherwise "no
difference detected". Each condition is a gate; a gate fires when its condition fails, and any
gate that fires holds the verdict at "no difference detected". The exact McNemar test of the
tasks on which the arms disagree is reported beside the verdict, never as a gate: it sees one
episode per task, the interval sees them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from heldout.statistics.intervals import Interval
from heldout.statistics.paired_tests import McNemarResult, mcnemar_exact, paired_bootstrap
from heldout.statistics.power import NoiseFloor, noise_floor

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference detected"
# Part of the rule, so not a parameter: a level chosen after seeing the data would be no rule.
CONFIDENCE = 0.95
# The gates, in the order the rule checks them.
INTERVAL_INCLUDES_ZERO = "interval includes 0"
WITHIN_NOISE_FLOOR = "within the noise floor"


@dataclass(frozen=True)
class Decision:
    """What the verdict was decided from, and the verdict the rule gives for it.

    difference: candidate − base, the mean over tasks of per-task pass rates, with its paired
        task-bootstrap interval at CONFIDENCE.
    test: the exact McNemar test at one sample index: b counts tasks only the base passed,
        c tasks only the candidate passed.
    floor: the noise floor from reruns of one unchanged version, or None without reruns.
    """

    difference: Interval
    test: McNemarResult
    floor: NoiseFloor | None

    @property
    def gates(self) -> tuple[str, ...]:
        """The gates that fired, in the order the rule checks them; none for better or worse."""
        fired = []
        if self.difference.low <= 0 <= self.difference.high:
            fired.append(INTERVAL_INCLUDES_ZERO)
        if self.floor is not None and abs(self.difference.estimate) < self.floor.floor:
            fired.append(WITHIN_NOISE_FLOOR)
        return tuple(fired)

    @property
    def verdict(self) -> str:
        if self.gates:
            return NO_DIFFERENCE
        return BETTER if self.difference.estimate > 0 else WORSE


def decide(
    base: ArrayLike,
    candidate: ArrayLike,
    *,
    base_passed: ArrayLike,
    candidate_passed: ArrayLike,
    rerun_scores: ArrayLike | None = None,
    seed: int | None = 0,
) -> Decision:
    """Decide the candidate against the base on the same tasks, given in the same order.

    base, candidate: per-task pass rates over all episodes (the interval's input).
    base_passed, candidate_passed: per task, whether the episode at one fixed sample index
    passed (the exact test's pairs). rerun_scores: pass@1 of ≥ 2 reruns of one unchanged
    version, from which the noise floor is computed (heldout.statistics.power.noise_floor), or
    None. `seed` seeds the bootstrap.
    """
    base_passed = np.asarray(base_passed, dtype=bool)
    candidate_passed = np.asarray(candidate_passed, dtype=bool)
    if base_passed.shape != candidate_passed.shape or base_passed.size != np.size(base):
        raise ValueError(
            f"one outcome per task in each arm: got {base_passed.size} and "
            f"{candidate_passed.size} outcomes for {np.size(base)} tasks"
        )
    difference = paired_bootstrap(candidate, base, CONFIDENCE, seed=seed)
    test = mcnemar_exact(int(np.sum(base_passed & ~candidate_passed)),
                         int(np.sum(~base_passed & candidate_passed)))
    floor = noise_floor(rerun_scores, CONFIDENCE) if rerun_scores is not None else None
    return Decision(difference, test, floor)
