"""The seed's noise floor, t₀.₉₇₅(R − 1)·sd·√2 of one configuration's R run-level pass@1,
posted from the reruns as information beside the verdict (issue 41, item 6): worked on paper."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats as sps

from heldout.statistics.power import Reruns, RunDrift, noise_floor, run_drift


def test_the_floor_is_t_times_the_base_runs_sd_times_root_two():
    # The base's four runs: 0.40, 0.42, 0.44, 0.46 (mean 0.43, deviations ∓0.03, ∓0.01):
    # sd = √(0.002/3) = 0.0258199; t₀.₉₇₅ on 3 df = 3.1824463 (the t table);
    # floor = 3.1824463 × 0.0258199 × 1.4142136 = 0.1162065.
    drift = run_drift(Reruns((0.40, 0.42, 0.44, 0.46), (0.50, 0.51, 0.55, 0.52)))
    floor = noise_floor(drift, 0.95)
    assert floor.runs == 4
    assert floor.run_sd == pytest.approx(math.sqrt(0.002 / 3), rel=1e-12)
    assert floor.t == pytest.approx(3.1824463, abs=1e-7)
    assert floor.floor == pytest.approx(0.1162065, abs=1e-7)
    assert floor.floor == pytest.approx(
        sps.t.ppf(0.975, 3) * statistics.stdev([0.40, 0.42, 0.44, 0.46]) * math.sqrt(2),
        rel=1e-12)
    # Twelve runs (the default) of the same spread sit on t₀.₉₇₅(11) = 2.2009852.
    twelve = noise_floor(run_drift(Reruns((0.40, 0.42, 0.44, 0.46) * 3, (0.5,) * 12)), 0.95)
    assert twelve.t == pytest.approx(2.2009852, abs=1e-7)


def test_the_floor_is_the_bases_spread_not_the_paired_drift_the_verdict_carries():
    # Both arms move together run by run: the paired differences are 0.05 in every run, so
    # the drift the verdict carries is 0, while rerunning the base alone moves it by 0.10 a
    # run: sd 0.1, floor 4.3026527 × 0.1 × √2 = 0.6084870 (t₀.₉₇₅ on 2 df = 4.3026527).
    drift = run_drift(Reruns((0.40, 0.50, 0.60), (0.45, 0.55, 0.65)))
    assert drift.run_sd == 0
    assert noise_floor(drift, 0.95).floor == pytest.approx(0.6084870, abs=1e-7)


def test_no_floor_where_the_base_runs_were_not_kept():
    # A RunDrift read back from a report.json written before the base's runs' sd was kept.
    assert noise_floor(RunDrift(4, 0.02), 0.95) is None
