"""Best-of-k: what k episodes are worth when something must choose which one to submit.

pass@k credits a task when any of k episodes passes the hidden tests, as if an oracle picked the
right one; a deployed system has no oracle, only a selector it can run (the public tests, a
reward model, a verifier). Best-of-k draws k episodes, submits the first one the selector
accepts (the first of the k when it accepts none) and scores that one episode's hidden result.

Per task, of its n episodes: s the selector accepts, of which `accepted_passed` pass the hidden
tests, and `rejected_passed` of the n − s it rejects. Over every ordered draw of k of the n
episodes without replacement, the submitted episode is uniform over the accepted ones when the
draw holds any (probability 1 − C(n − s, k) / C(n, k), which is pass@k with s for c), else
uniform over the rejected ones. So

    best-of-k = (1 − m) · accepted_passed / s + m · rejected_passed / (n − s),
    m = C(n − s, k) / C(n, k),

the exact average of the procedure over the draws: an unbiased estimate of its success
probability on k fresh episodes, as pass@k is of 1 − (1 − p)^k. At k = 1 it is the pass rate;
a selector that accepts every passing episode and no other makes it pass@k; one that accepts
none or all makes it the pass rate at every k.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from heldout.statistics.estimators import pass_at_k


def best_of_k(n: ArrayLike, accepted: ArrayLike, accepted_passed: ArrayLike,
              rejected_passed: ArrayLike, ks: ArrayLike) -> np.ndarray:
    """Unbiased best-of-k per task and k, shape (tasks, len(ks)); counts are per task.

    Raises ValueError when a count is out of range (accepted > n, a passed count above the
    episodes it counts) or k is outside [1, n], as pass_at_k does."""
    n, accepted = np.asarray(n, dtype=np.int64), np.asarray(accepted, dtype=np.int64)
    accepted_passed = np.asarray(accepted_passed, dtype=np.int64)
    rejected_passed = np.asarray(rejected_passed, dtype=np.int64)
    if np.any(accepted_passed > accepted) or np.any(rejected_passed > n - accepted) \
            or np.any(accepted_passed < 0) or np.any(rejected_passed < 0):
        raise ValueError("best-of-k: a passed count exceeds the episodes it counts")
    ks = np.atleast_1d(ks)
    any_accepted = np.asarray(pass_at_k(n, accepted, ks)).reshape(n.shape + ks.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        # 0/0 only where its weight is 0: no accepted episode (any_accepted = 0) or no rejected
        # one (any_accepted = 1).
        accepted_rate = np.where(accepted > 0, accepted_passed / accepted, 0.0)[:, None]
        rejected_rate = np.where(n > accepted, rejected_passed / (n - accepted), 0.0)[:, None]
    return any_accepted * accepted_rate + (1 - any_accepted) * rejected_rate
