"""Whether one arm was cut short by its budgets far more often than the other, judged with its
noise: the seed's "more than twice the other arm's rate" as a hypothesis tested over the tasks
(or groups), not a ratio of two point estimates, which voided a candidate truncating 1.8× the
base's share in a third of runs by chance (issue 38)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import unit_sums


def truncates_more(mine: ArrayLike, theirs: ArrayLike, *, ratio: float,
                   groups: ArrayLike | None = None) -> float:
    """One-sided p-value of H0: E[mine] <= ratio·E[theirs], against more.

    mine, theirs: per task, the share of its episodes each arm's budgets cut short, in the
    same task order. Each unit (task, or group of tasks with `groups`) gives
    w = mine − ratio·theirs, its tasks' mean, and the test is Student's one-sample t over the
    units (scipy.stats.ttest_1samp, alternative="greater"): under H0 the mean of w is at most
    0, so an arm that truncates like the other (w's mean −(ratio − 1)·E[theirs] < 0) is
    voided in fewer than α of runs, and one at exactly `ratio` times in α. Units that all
    share one w carry no spread: p is 0 when that w is above 0, else 1."""
    difference = np.asarray(mine, dtype=float) - ratio * np.asarray(theirs, dtype=float)
    sums, sizes, _ = unit_sums(difference, groups)
    units = sums / sizes
    if np.ptp(units) <= 1e-12:
        return 0.0 if units.size and units[0] > 1e-12 else 1.0
    return float(sps.ttest_1samp(units, 0.0, alternative="greater").pvalue)
