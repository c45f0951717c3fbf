"""One version's per-task success counts summarized: pass@1 with its interval over tasks or
groups, pass@k and pass^k, the tasks that can show a difference, and the design effect
(DESIGN §5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from heldout.statistics._arrays import check_successes, whole_numbers
from heldout.statistics.bca import arm_estimate_interval
from heldout.statistics.estimators import pass_at_k, pass_hat_k
from heldout.statistics.intervals import Interval
from heldout.statistics.power import DesignEffect, design_effect


@dataclass(frozen=True)
class CountsSummary:
    """Per-version summary of per-task success counts (c successes out of n episodes)."""

    n_tasks: int
    pass_at_1: Interval
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]
    failure_capable: int
    all_fail: int
    design_effect: DesignEffect | None


def estimate_intervals(
    estimator: Callable[[ArrayLike, ArrayLike, ArrayLike], float | np.ndarray],
    n: ArrayLike,
    c: ArrayLike,
    ks: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    n_boot: int = 4000,
    seed: int | None = 0,
) -> list[Interval]:
    """One arm's `estimator` (pass_at_k or pass_hat_k) at each k of ks: the task average of
    its unbiased per-task estimates with one arm's interval over them (arm_estimate_interval),
    over the `groups` (one label per task) when given.

    The one function behind every pass@k and pass^k interval heldout shows, pass@1 (k = 1)
    included: the report's headline and its pass@k and pass^k tables, `heldout score`, the val
    scores and the selection table. The unit of uncertainty is the task, or its group.
    """
    table = np.asarray(estimator(n, c, np.atleast_1d(ks)))
    return [arm_estimate_interval(table[..., column], groups=groups, confidence=confidence,
                                  n_boot=n_boot, seed=seed)
            for column in range(table.shape[-1])]


def summarize_counts(
    counts: ArrayLike,
    n: ArrayLike,
    ks: ArrayLike | None = None,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    n_boot: int = 4000,
    seed: int | None = 0,
) -> CountsSummary:
    """Summary of one version's per-task success counts.

    pass@1 is the task average of c_j/n_j with one arm's interval (estimate_intervals at
    k = 1), over the `groups` (one label per task) when given;
    pass@k and pass^k are task averages of the unbiased per-task estimators (pass_at_k,
    pass_hat_k) for k in ks, by default the powers of two up to the smallest n. Also counts the
    failure-capable tasks (not all-pass: the only ones that can show a difference), the
    all-fail tasks, and the design effect (None when it cannot be estimated: fewer than 2
    tasks or a single episode per task). DESIGN §5.
    """
    counts, n = check_successes(counts, n)
    counts, n = counts.ravel(), n.ravel()
    if counts.size == 0:
        raise ValueError("summarize_counts needs at least one task")
    if ks is None:
        ks = 2 ** np.arange(int(n.min()).bit_length())
    ks = np.atleast_1d(whole_numbers("ks", ks))
    at_k = pass_at_k(n, counts, ks).mean(axis=0)
    hat_k = pass_hat_k(n, counts, ks).mean(axis=0)
    clustering = design_effect(counts, n) if counts.size >= 2 and n.sum() > counts.size else None
    return CountsSummary(
        n_tasks=int(counts.size),
        pass_at_1=estimate_intervals(pass_at_k, n, counts, 1, groups=groups,
                                     confidence=confidence, n_boot=n_boot, seed=seed)[0],
        pass_at_k={int(k): float(v) for k, v in zip(ks, at_k, strict=True)},
        pass_hat_k={int(k): float(v) for k, v in zip(ks, hat_k, strict=True)},
        failure_capable=int(np.sum(counts < n)),
        all_fail=int(np.sum(counts == 0)),
        design_effect=clustering,
    )
