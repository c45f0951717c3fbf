"""The episodes' noise counted once (issue 38 item 3): the runs' spread carries it whole, so
the tasks' part of the variance is taken net of it, estimated as the units × runs interaction
of a two-way design; and below 100 units the p printed is the deciding procedure's own."""

from __future__ import annotations

import numpy as np
import pytest

from heldout.statistics.betting import betting_interval
from heldout.statistics.decision import decide
from heldout.statistics.power import Reruns, run_drift


def two_way_noise(units: np.ndarray) -> float:
    """By hand: residual mean square of a units × runs table over G·R."""
    runs, count = units.shape
    residual_ss = sum((units[r, g] - units[:, g].mean() - units[r, :].mean() + units.mean()) ** 2
                      for r in range(runs) for g in range(count))
    return residual_ss / ((count - 1) * (runs - 1)) / (count * runs)


def test_the_noise_is_the_two_way_interaction_over_tasks_or_groups():
    rng = np.random.default_rng(3)
    differences = rng.normal(0.05, 0.2, (4, 12))
    reruns = Reruns(tuple(rng.random(4)), tuple(rng.random(4)))
    assert run_drift(reruns, differences).noise == pytest.approx(two_way_noise(differences),
                                                                rel=1e-12)
    # Groups of equal size: the units are the groups' means.
    groups = np.repeat(np.arange(4), 3)
    means = differences.reshape(4, 4, 3).mean(axis=2)
    assert run_drift(reruns, differences, groups).noise == pytest.approx(
        two_way_noise(means), rel=1e-12)
    # Without the runs' per-task rates there is nothing to net: counted twice, wide.
    assert run_drift(reruns).noise == 0.0
    with pytest.raises(ValueError, match="one row per run"):
        run_drift(reruns, differences[:3])


def test_netting_the_noise_narrows_the_interval_and_never_hides_the_runs():
    rng = np.random.default_rng(11)
    tasks, runs, episodes = 150, 4, 10
    p = rng.beta(1, 1, tasks)
    base = rng.random((runs, tasks, episodes)) < p[None, :, None]
    candidate = rng.random((runs, tasks, episodes)) < np.clip(p + 0.04, 0, 1)[None, :, None]
    per_run = base.mean(axis=2), candidate.mean(axis=2)
    reruns = Reruns(*(tuple(rates.mean(axis=1)) for rates in per_run))
    arguments = dict(n_episodes=runs * episodes, base_passed=base[0, :, 0],
                     candidate_passed=candidate[0, :, 0], reruns=reruns)
    twice = decide(per_run[0].mean(axis=0), per_run[1].mean(axis=0), **arguments)
    once = decide(per_run[0].mean(axis=0), per_run[1].mean(axis=0),
                  run_differences=per_run[1] - per_run[0], **arguments)
    assert once.drift.noise > 0 and twice.drift.noise == 0
    width = {name: d.difference.high - d.difference.low for name, d in
             (("once", once), ("twice", twice))}
    assert width["once"] < width["twice"]
    assert once.support.mde < twice.support.mde
    # The runs' own spread is still carried whole: the interval is never narrower than the
    # runs' t interval alone would be.
    assert width["once"] / 2 >= 3.18 * np.sqrt(once.drift.variance) * 0.9


def test_below_100_units_the_p_printed_rejects_exactly_when_the_interval_excludes_0():
    rng = np.random.default_rng(2)
    for shift in (0.0, 0.05, 0.1, 0.2):
        p = rng.beta(1, 1, 60)
        base = rng.binomial(10, p) / 10
        candidate = rng.binomial(10, np.clip(p + shift, 0, 1)) / 10
        decision = decide(base, candidate, n_episodes=10, base_passed=base > 0.5,
                          candidate_passed=candidate > 0.5)
        betting = betting_interval(candidate - base, seed=0)
        assert decision.test.p_value >= betting.p_value
        excludes = not decision.difference.low <= 0 <= decision.difference.high
        assert excludes == decision.test.rejects == (decision.test.p_value <= 0.05)
