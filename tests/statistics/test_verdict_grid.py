"""The verdict's grid where effects are uneven, tasks come in groups and runs drift (issue 24).
Slow, by hand: `pytest -m slow -s tests/statistics/test_verdict_grid.py` (HELDOUT_GRID_REPLICATIONS
lowers the 2,000 replications a cell for a quick look; the bars are for 2,000). Each test
prints its table, then asserts every cell's bar at once.

Cells come from tests/skewed_nulls.py and are decided by heldout.statistics.decision.decide,
the entry point of the pipeline's report and of `heldout compare`: over both arms' paired runs
pooled (the pipeline's verdict, which carries their spread) where the cell has them, and then
on the first runs alone (`heldout compare` without --rerun-a/--rerun-b). The bars: a null
cell's one-sided false "better" at most 0.025 + 2.6·SE, its interval's coverage at least 0.93;
the +5-point power cell on the uniform set at least 0.90 with the reruns on; the −5-point
regression at n = 10 reported "worse" in at least 0.8 of runs. Cells whose groups are
withheld, and the power cells but those two, are printed for what they show and held to no
bar.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from stages.reruns import RerunsConfig
from tests.drifting_server import designs, replicate
from tests.skewed_nulls import Cell, Narrowing

pytestmark = pytest.mark.slow

REPLICATIONS = int(os.environ.get("HELDOUT_GRID_REPLICATIONS", "2000"))
FALSE_BETTER_BOUND = 0.025 + 2.6 * math.sqrt(0.025 * 0.975 / REPLICATIONS)
MIN_COVERAGE = 0.93
# The test access's default design (params.reruns): paired runs of each arm, episodes in each.
RUNS, RUN_EPISODES = RerunsConfig().runs, RerunsConfig().episodes
WORKERS = min(2, os.cpu_count() or 1)
ASYMMETRIC = {"U Beta(.3,.3), 10% lose 80%": Narrowing(0.3, 0.3, 0.10, 0.8),
              "skew Beta(.4,3), 10% lose 80%": Narrowing(0.4, 3.0, 0.10, 0.8),
              "ceiling Beta(5,.4), 5% lose 50%": Narrowing(5.0, 0.4, 0.05, 0.5)}
UNIFORM = Narrowing(1.0, 1.0, 0.0, 0.0)
CEILING = Narrowing(5.0, 0.4, 0.0, 0.0)


def run(cells: dict[str, Cell]) -> dict[str, dict[str, float]]:
    # The largest cells first, so that neither worker is left with a big one at the end.
    names = sorted(cells, key=lambda name: -cells[name].n_tasks * cells[name].episodes
                   * (1 + bool(cells[name].reruns)))
    with ProcessPoolExecutor(WORKERS) as pool:
        results = dict(zip(names, pool.map(Cell.rates, [cells[name] for name in names]),
                           strict=True))
    print(f"\n{REPLICATIONS:,} replications a cell; false 'better' bound "
          f"{FALSE_BETTER_BOUND:.4f}")
    columns = ("better", "worse", "covers", "verdict better", "verdict worse")
    print(f"{'cell':<62} {'better':>7} {'worse':>7} {'cover':>6} {'v.bet':>6} {'v.wor':>6}"
          f"  {'compare: better':>15} {'cover':>6}")
    for name in sorted(results):
        rates = results[name]
        shown = " ".join(f"{rates[key]:{7 if i < 2 else 6}.4f}" for i, key in enumerate(columns))
        compared = f"  {rates['compare better']:15.4f} {rates['compare covers']:6.4f}" \
            if "compare better" in rates else ""
        print(f"{name:<62} {shown}{compared}", flush=True)
    return results


def null_shortfalls(results: dict[str, dict[str, float]]) -> list[str]:
    """Every null cell's failures at once, with and without the reruns, so that one short
    cell does not hide another."""
    failures = []
    for name, rates in results.items():
        for prefix in ("", "compare ") if "compare better" in rates else ("",):
            if rates[prefix + "better"] > FALSE_BETTER_BOUND:
                failures.append(f"{name}: {prefix}false 'better' {rates[prefix + 'better']:.4f}"
                                f" > {FALSE_BETTER_BOUND:.4f}")
            if rates[prefix + "covers"] < MIN_COVERAGE:
                failures.append(f"{name}: {prefix}coverage {rates[prefix + 'covers']:.4f} < "
                                f"{MIN_COVERAGE}")
    return failures


def label(cell: Cell, name: str) -> str:
    draws = "CRN" if cell.crn else "indep"
    runs = f", {cell.reruns} runs" if cell.reruns else ""
    return f"{name}, N = {cell.n_tasks}, n = {cell.episodes}, {draws}{runs}"


@pytest.mark.parametrize("population", list(ASYMMETRIC))
def test_asymmetric_nulls_hold_their_size(population: str):
    # One run of each arm at n = 1, 5, 10 (`heldout compare`), and at 164 tasks also the
    # pipeline's default design: the paired runs of both arms (no drift) pooled.
    cells = [Cell(ASYMMETRIC[population], n_tasks, n, crn, REPLICATIONS)
             for n_tasks in (30, 50, 164) for n in (1, 5, 10) for crn in (True, False)]
    cells += [Cell(ASYMMETRIC[population], 164, RUN_EPISODES, crn, REPLICATIONS, reruns=RUNS)
              for crn in (True, False)]
    results = run({label(cell, population): cell for cell in cells})
    assert null_shortfalls(results) == []


def test_grouped_nulls_hold_their_size_when_the_groups_are_given():
    # 40 groups of 4 tasks sharing one pass rate and one effect: symmetric (±15% of the room
    # to the nearer edge) and narrowing (10% of the groups lose 80%).
    cells, withheld = {}, {}
    for shape, extra in (("symmetric", {"swing": 0.3}), ("narrowing", {})):
        population = UNIFORM if extra else Narrowing(1.0, 1.0, 0.10, 0.8)
        for n in (5, 10):
            for crn in (True, False):
                for hidden in (False, True):
                    cell = Cell(population, 160, n, crn, REPLICATIONS, group_size=4,
                                withhold_groups=hidden, **extra)
                    name = label(cell, f"{shape}, 40 groups of 4, groups "
                                       f"{'withheld' if hidden else 'given'}")
                    (withheld if hidden else cells)[name] = cell
    results = run(cells | withheld)
    assert null_shortfalls({name: results[name] for name in cells}) == []


def test_run_level_drift_is_held_by_the_reruns():
    cells = [Cell(UNIFORM, 164, RUN_EPISODES, crn, REPLICATIONS, drift=tau, reruns=RUNS)
             for tau in (0.1, 0.3) for crn in (True, False)]
    results = run({label(cell, f"identical, drift τ = {cell.drift}"): cell for cell in cells})
    # Without the reruns no test can see the drift: held to no bar, shown for contrast.
    with_reruns = {name: {key: value for key, value in rates.items()
                          if not key.startswith("compare ")} for name, rates in results.items()}
    assert null_shortfalls(with_reruns) == []


def test_ragged_episodes_hold_their_size():
    cells = [Cell(ASYMMETRIC["U Beta(.3,.3), 10% lose 80%"], 164, 10, crn, REPLICATIONS,
                  ragged=0.1) for crn in (True, False)]
    results = run({label(cell, "U narrowing, 10% of tasks at 1 episode"): cell
                   for cell in cells})
    assert null_shortfalls(results) == []


def test_power_and_harm():
    cells = {}
    for effect in (0.05, 0.10):
        for uneven in (False, True):
            for crn in (True, False):
                cell = Cell(UNIFORM, 164, RUN_EPISODES, crn, REPLICATIONS, shift=effect,
                            reruns=RUNS, uneven=uneven)
                cells[label(cell, f"+{effect:.2f} {'uneven' if uneven else 'uniform'}")] = cell
    for share in (0.03, 0.06):
        for crn in (True, False):
            cell = Cell(UNIFORM, 164, 10, crn, REPLICATIONS, flips=share)
            cells[label(cell, f"one-way flips {share:.0%}")] = cell
    for n in (1, 10):
        for crn in (True, False):
            cell = Cell(CEILING, 164, n, crn, REPLICATIONS, shift=-0.05)
            cells[label(cell, "ceiling −5")] = cell
    results = run(cells)
    failures = [f"{name}: better {rates['verdict better']:.4f} < 0.90"
                for name, rates in results.items()
                if name.startswith("+0.05 uniform") and rates["verdict better"] < 0.90]
    failures += [f"{name}: worse {rates['verdict worse']:.4f} < 0.8"
                 for name, rates in results.items()
                 if name.startswith("ceiling −5") and ", n = 10," in name
                 and rates["verdict worse"] < 0.8]
    failures += [f"{name}: called better" for name, rates in results.items()
                 if name.startswith("ceiling") and rates["better"] > 0]
    failures += [f"{name}: coverage {rates['covers']:.4f} < {MIN_COVERAGE}"
                 for name, rates in results.items()
                 if name.startswith("one-way") and rates["covers"] < MIN_COVERAGE]
    assert failures == [], "\n".join(failures)


def test_the_generators_draw_what_they_say():
    grouped = Cell(UNIFORM, 160, 2, True, 3, group_size=4, swing=0.3)
    (base,), (candidate,) = grouped.draws()
    rates = candidate.mean(axis=-1) - base.mean(axis=-1)
    assert base.shape == (3, 160, 2) and np.all(grouped.episodes_per_task() == 2)
    # Under common random numbers a group's tasks share p and q, not their outcomes.
    assert not np.all(rates.reshape(3, 40, 4) == rates.reshape(3, 40, 4)[..., :1])
    ragged = Cell(UNIFORM, 100, 10, False, 1, ragged=0.1)
    assert (ragged.episodes_per_task() == 1).sum() == 10
    assert Cell(UNIFORM, 100, 10, False, 1, flips=0.06).truth == 0.06
    # Paired runs: run r of both arms under the same uniforms (CRN) and each run its own shift.
    runs = Cell(UNIFORM, 50, 4, True, 2, drift=0.3, reruns=3)
    base, candidate = runs.draws()
    assert len(base) == len(candidate) == 3 and base[0].shape == (2, 50, 4)
    assert not np.array_equal(base[0], base[1])


def test_a_server_drifting_in_time_is_held():
    # tests/drifting_server.py: random walks with the runs turn about, at once or blocked
    # (with and without a reference beside each arm), per-run shifts, per task-and-run shocks
    # and an outage. Every null cell's verdict holds both one-sided bounds; the power cells
    # are printed for the cost of a reference.
    cells = designs()
    with ProcessPoolExecutor(WORKERS) as pool:
        results = list(pool.map(replicate, cells, [REPLICATIONS] * len(cells)))
    print(f"\n{REPLICATIONS:,} replications a cell; bound {FALSE_BETTER_BOUND:.4f}")
    failures = []
    for design, rates in zip(cells, results, strict=True):
        print(f"N = {design.tasks:>3} {design.name:<48} claim better {rates['claim better']:.4f}"
              f" worse {rates['claim worse']:.4f}  verdict better {rates['better']:.4f} "
              f"worse {rates['worse']:.4f}", flush=True)
        if not design.effect:
            failures += [f"N = {design.tasks} {design.name}: verdict {side} {rates[side]:.4f}"
                         for side in ("better", "worse") if rates[side] > FALSE_BETTER_BOUND]
    assert failures == [], "\n".join(failures)
