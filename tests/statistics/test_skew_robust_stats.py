"""The bootstrap-t test and interval (heldout.statistics.studentized) and the betting interval
(heldout.statistics.betting) that the verdict rests on when effects can be uneven."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from heldout.statistics.betting import betting_interval
from heldout.statistics.studentized import (
    RESAMPLES,
    _standard_errors,
    drift_factor,
    hall_inverse,
    hall_pivot,
    skewness,
    studentized_test,
)
from tests.skewed_nulls import Narrowing


def differences(seed: int, n_tasks: int, shift: float, episodes: int = 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.5, n_tasks)
    q = np.clip(p + shift, 0, 1)
    return (rng.binomial(episodes, q) - rng.binomial(episodes, p)) / episodes


@pytest.mark.parametrize("seed", range(40))
def test_the_test_rejects_exactly_when_its_interval_excludes_zero(seed: int):
    values = differences(seed, 40 + seed, shift=0.004 * seed)
    groups = np.arange(values.size) // (1 + seed % 4)
    for result in (studentized_test(values, seed=seed),
                   studentized_test(values, groups=groups, seed=seed)):
        interval = result.interval
        assert result.rejects == (interval.low > 0 or interval.high < 0)
        assert (result.p_better <= 0.025) == (interval.low > 0)
        assert (result.p_worse <= 0.025) == (interval.high < 0)
        assert interval.low <= interval.estimate <= interval.high


def test_the_standard_error_is_the_cluster_robust_one_with_one_pseudo_unit():
    # Two groups of two tasks with sums 0.6 and 0.2 and two single tasks with 0.1 and −0.3:
    # θ = 0.6/6 = 0.1; residuals 0.6 − 0.2, 0.2 − 0.2, 0.1 − 0.1, −0.3 − 0.1 = 0.4, 0, 0, −0.4;
    # se² = G/(G − 1)·(Σe² + Σe²/G)/W² = 4/3·(0.32 + 0.08)/36, and the interval's ends are θ
    # minus se times order statistics of t*, so (θ − low)/se is one of them.
    values = np.array([0.5, 0.1, 0.1, 0.1, 0.1, -0.3])
    groups = ["a", "a", "b", "b", "c", "d"]
    result = studentized_test(values, groups=groups)
    se = math.sqrt(4 / 3 * 0.40 / 36)
    assert result.interval.estimate == pytest.approx(0.1)
    assert result.units == 4 and "4 groups of 6 tasks" in result.method
    sums, sizes = np.array([0.6, 0.2, 0.1, -0.3]), np.array([2.0, 2, 1, 1])
    assert _standard_errors(sums, sizes, np.ones((1, 4)), 0.32 / 4)[0] == pytest.approx(se)
    # Every resample is at or above the observed t, or at or below it (ties are both).
    assert result.p_better + result.p_worse >= 1 + 1 / (RESAMPLES + 1)


@pytest.mark.parametrize("kappa", [-2.0, -0.3, 0.0, 0.05, 1.5])
def test_halls_transformation_is_increasing_and_inverted_exactly(kappa: float):
    t = np.linspace(-30, 30, 20_001)
    pivots = hall_pivot(t, kappa)
    assert np.all(np.diff(pivots) >= 0)
    back = np.array([hall_inverse(float(pivot), kappa) for pivot in pivots[::500]])
    assert back == pytest.approx(t[::500], abs=1e-6)


def test_the_skewness_is_that_of_the_mean_and_drift_dilutes_it():
    # Single tasks: κ = Σr³/(Σr²)^(3/2) = γ̂/√N with γ̂ = m3/m2^(3/2), the sample skewness.
    values = np.array([0.3, 0.1, 0.1, 0.0, 0.0, -0.9])
    r = values - values.mean()
    gamma = np.mean(r**3) / np.mean(r**2) ** 1.5
    ones = np.ones_like(values)
    kappa = skewness(values, ones, np.ones((1, 6)), 0.0, 1.0, 0.0)[0]
    assert kappa == pytest.approx(gamma / math.sqrt(6)) and kappa < 0
    # A normal run-level shift with the units' own variance halves the variance share.
    variance = _standard_errors(values, ones, np.ones((1, 6)), 0.0)[0] ** 2
    assert skewness(values, ones, np.ones((1, 6)), 0.0, 1.0, variance)[0] == pytest.approx(
        kappa * 0.5**1.5)


def test_the_runs_variance_on_few_degrees_of_freedom_widens_the_critical_value():
    # Cochran-Cox: the two parts' critical values weighted by their shares, over z. With the
    # tasks' variance 1 and the runs' 3 on 2 df: (1·1.960 + 3·4.303)/(4·1.960) = 1.897.
    z, t = sps.norm.ppf(0.975), sps.t.ppf(0.975, 2)
    assert drift_factor(1.0, 3.0, 2, 0.05) == pytest.approx((z + 3 * t) / (4 * z), rel=1e-12)
    assert drift_factor(1.0, 0.0, 2, 0.05) == drift_factor(1.0, 3.0, math.inf, 0.05) == 1.0
    d = differences(3, 164, 0.05)
    known = studentized_test(d, drift_variance=4e-4, seed=1)
    widths = [known.interval.high - known.interval.low]
    for df in (8, 3, 2):
        estimated = studentized_test(d, drift_variance=4e-4, drift_df=df, seed=1)
        widths.append(estimated.interval.high - estimated.interval.low)
        assert f"on {df} df" in estimated.method
        assert estimated.p_value >= known.p_value
    assert widths == sorted(widths) and widths[-1] > 1.3 * widths[0]


def test_a_near_degenerate_sample_is_decided_by_its_spread_not_by_infinite_resamples():
    # 99 tasks at +0.6 and one at −1: a third of the resamples miss the −1, and without the
    # pseudo-unit their t* would be +inf, and the test could never reject.
    result = studentized_test(np.r_[np.full(99, 0.6), -1.0])
    assert result.rejects and result.interval.low > 0.3
    assert result.p_value == 2 / (RESAMPLES + 1)


def test_units_of_one_value_fall_back_to_the_bound_on_how_many_could_differ():
    zeros = studentized_test(np.zeros(30))
    assert zeros.p_value == 1 and not zeros.rejects
    assert zeros.interval.low == pytest.approx(-(1 - 0.025 ** (1 / 30)))
    ones = studentized_test(np.ones(200))
    # On [−1, 1] the share that could differ, u = 1 − 0.025^(1/200), moves the mean by 2u.
    assert ones.rejects and ones.interval.low == pytest.approx(1 - 2 * (1 - 0.025 ** (1 / 200)))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="resamples"):
        studentized_test(np.ones(5), resamples=10)
    with pytest.raises(ValueError, match="one label per task"):
        studentized_test(np.ones(5), groups=[1, 2])
    with pytest.raises(ValueError, match=r"\[−1, 1\]"):
        betting_interval(np.array([0.5, 1.5]))


def test_the_betting_interval_holds_where_few_large_losses_hide():
    # 400 samples of 30 tasks from a null whose mean difference is 0 (10% of the tasks lose 80%
    # of their rate, the rest gain 8.9% of what they lack): the interval covers 0 in all but
    # at most α of them, whatever the shape. The bootstrap-t covers far less.
    population = Narrowing(0.3, 0.3, losers=0.1, loss=0.8)
    rng = np.random.default_rng(7)
    p, q = population.draw(rng, (400, 30))
    uniforms = rng.random((400, 30, 10))
    values = ((uniforms < q[..., None]).mean(-1) - (uniforms < p[..., None]).mean(-1))
    betting = [betting_interval(row, seed=i).interval for i, row in enumerate(values)]
    studentized = [studentized_test(row, seed=i, resamples=999).interval
                   for i, row in enumerate(values)]
    missed = np.mean([not (i.low <= 0 <= i.high) for i in betting])
    assert missed <= 0.05
    assert np.mean([not (i.low <= 0 <= i.high) for i in studentized]) > 2 * max(missed, 0.05)


def test_the_betting_interval_finds_a_clear_gain_and_ignores_the_task_order():
    values = differences(3, 60, shift=0.3)
    interval = betting_interval(values).interval
    assert interval.low > 0.1 and interval.low < values.mean() < interval.high
    reordered = betting_interval(values[::-1].copy()).interval
    assert (reordered.low, reordered.high) == (interval.low, interval.high)
    grouped = betting_interval(values, groups=np.arange(60) // 3).interval
    assert grouped.low < interval.low and "20 groups of 60 tasks" in grouped.method
