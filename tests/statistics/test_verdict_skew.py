"""The verdict holds its size where effects are uneven (issue 24): a fast check, a few hundred
replications of two asymmetric nulls, so that a change that lets the verdict lean toward
"better" again cannot land unnoticed. The grid is benchmarks/verdict_simulation.py.

The sign-flip test with the BCa/t interval it replaces said "better" in 0.13 of the first
cell's nulls (these 300 replications), and covered 0 in 0.85; the second cell holds on both,
and guards the large-sample path (the bootstrap-t without the betting interval). A third cell
guards the run-level drift: a drifting server, held by paired reruns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heldout.statistics.decision import ALPHA
from tests.skewed_nulls import Cell, Narrowing

REPLICATIONS = 300
# One-sided α/2 plus 3 Monte Carlo standard errors at that rate: 0.052.
BOUND = ALPHA / 2 + 3 * math.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / REPLICATIONS)


@pytest.mark.parametrize("cell", [
    # U-shaped set, 10% of the tasks lose 80% of their pass rate: at 30 tasks such losers can
    # be missing from the sample, and only the betting interval stays valid.
    Cell(Narrowing(0.3, 0.3, losers=0.1, loss=0.8), 30, 10, crn=True,
         replications=REPLICATIONS),
    # Uniform set, 20% lose 60%, 164 tasks with independent draws: the bootstrap-t's cell.
    Cell(Narrowing(1.0, 1.0, losers=0.2, loss=0.6), 164, 10, crn=False,
         replications=REPLICATIONS),
], ids=["U-shaped N=30", "uniform N=164"])
def test_a_mean_difference_of_zero_is_rarely_called_better(cell: Cell):
    rates = cell.rates()
    assert rates["better"] <= BOUND, rates
    assert rates["covers"] >= 0.93 - 3 * math.sqrt(0.93 * 0.07 / REPLICATIONS), rates


def test_a_drifting_unchanged_model_is_rarely_called_better_with_paired_runs():
    # The same model in both arms, every run's task logits shifted by N(0, 0.3²): without the
    # reruns the first runs alone say "better" in about 0.31 of such nulls; with four paired
    # runs of each arm, pooled and their spread carried, within the bound.
    rates = Cell(Narrowing(1.0, 1.0, 0.0, 0.0), 164, 10, crn=False,
                 replications=REPLICATIONS, drift=0.3, reruns=4).rates()
    assert rates["better"] <= BOUND, rates
    assert rates["compare better"] > 0.2, rates  # the cell does drift: the runs are needed


def test_the_generator_has_mean_difference_zero():
    population = Narrowing(0.3, 0.3, losers=0.1, loss=0.8)
    p, q = population.draw(np.random.default_rng(0), (400, 500))
    differences = q - p
    assert abs(differences.mean()) < 5 * differences.std() / math.sqrt(differences.size)
    assert np.mean(differences < -0.2) > 0.02 and np.median(differences) > 0
