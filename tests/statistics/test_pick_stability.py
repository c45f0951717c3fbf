"""Honest selection (issue 41 item 4): how often the rule picks each checkpoint over resamples of
the val tasks or groups, and the winner's-curse inflation of the pick's val score, against cases
computed by hand or by enumerating every resample."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from heldout.canonical import content_digest
from heldout.statistics.bca import mean_standard_error
from heldout.statistics.pick_stability import (
    PICK_RESAMPLES,
    expected_max_normal,
    honest_selection,
    rule_picks,
)
from heldout.statistics.selection import SelectConfig, select_checkpoint


def counts_of(passes: dict[str, list[int]], n: int = 1) -> pd.DataFrame:
    """Per-task counts (one episode each unless n is given) of checkpoints, by name."""
    return pd.DataFrame([
        {"checkpoint": name, "task_id": f"t{index}", "n": n, "c": c}
        for name, column in passes.items() for index, c in enumerate(column)
    ])


def share_tolerance(share: float, resamples: int) -> float:
    """Four Monte Carlo standard errors of a share estimated from `resamples` resamples."""
    return 4 * math.sqrt(max(share * (1 - share), 1e-4) / resamples)


def test_a_checkpoint_ahead_on_every_task_is_picked_in_every_resample_and_gains_nothing():
    # "a" is listed second, so `best`'s tie rule (the earlier one) can never hand it the pick.
    behind = [0, 0, 1, 0, 1, 0, 0, 0, 0, 1] * 3
    ahead = [1] * 30
    selection = select_checkpoint(counts_of({"b": behind, "a": ahead}), ["b", "a"],
                                  SelectConfig())
    stability, curse = selection["pick_stability"], selection["winners_curse"]
    assert selection["chosen"] == "a"
    assert stability["shares"] == {"b": 0.0, "a": 1.0}
    assert (stability["resamples"], stability["unit"], stability["units"]) == (
        PICK_RESAMPLES, "tasks", 30)
    # a passes every task, so each resample's a scores 1 as the whole set does: no inflation.
    assert curse["inflation"] == 0.0
    assert curse["configurations_tried"] == 2


def test_a_checkpoint_ahead_by_varying_margins_is_never_inflated():
    rng = np.random.default_rng(3)
    low = rng.binomial(10, 0.2, size=60)
    high = low + rng.integers(1, 4, size=60)  # ahead on every task, by 1-3 passes of 10
    selection = select_checkpoint(counts_of({"low": list(low), "high": list(high)}, n=10),
                                  ["low", "high"], SelectConfig())
    curse = selection["winners_curse"]
    assert selection["pick_stability"]["shares"]["high"] == 1.0
    # The pick never changes, so the curse is the mean of its resampled score minus that
    # score's centre, the same mean over the same resamples: 0 but for rounding, where against
    # the whole set's score it would be off by the resamples' Monte Carlo error.
    assert abs(curse["inflation"]) < 1e-12
    assert 0 < curse["monte_carlo_error"] < 0.002
    assert curse["if_all_level"] == pytest.approx(
        selection["table"][1]["se"] / math.sqrt(math.pi))


# Three tasks: a passes t0, b passes t1, neither passes t2. A resample of three draws gives a
# the pick (`best`, ties to the earlier a) when it draws t0 at least as often as t1: by symmetry
# half of the 20 resamples where the two counts differ, plus the 7 where they are equal (t2 three
# times; each task once, in 3! orders), so 17 of the 27 equally likely resamples.
HAND = {"a": [1, 0, 0], "b": [0, 1, 0]}
HAND_SHARE_A = Fraction(17, 27)


def enumerated(values: np.ndarray, labels: list[str] | None, rule: str
               ) -> tuple[dict[int, Fraction], Fraction]:
    """Every resample with replacement of the units (tasks, or groups) as equally likely: the
    exact share of each checkpoint the rule picks, and the exact mean of the pick's resampled
    score minus its whole-set score. The rule is written out here from docs/stages.md, its
    standard error is mean_standard_error's over the resample's units."""
    units = sorted(set(labels)) if labels is not None else list(range(len(values)))
    members = {unit: [task for task in range(len(values))
                      if (labels[task] if labels is not None else task) == unit]
               for unit in units}
    whole = values.mean(axis=0)
    picked: dict[int, Fraction] = {}
    gain = Fraction(0)
    draws = list(itertools.product(units, repeat=len(units)))
    for draw in draws:
        tasks = [task for unit in draw for task in members[unit]]
        copies = [index for index, unit in enumerate(draw) for _ in members[unit]]
        means = values[tasks].mean(axis=0)
        best = int(np.argmax(means))  # the first of the highest
        if rule == "best":
            pick = best
        else:
            error = mean_standard_error(values[tasks, best],
                                        groups=copies if labels is not None else None)
            pick = next(j for j in range(values.shape[1]) if means[j] >= means[best] - error)
        picked[pick] = picked.get(pick, Fraction(0)) + Fraction(1, len(draws))
        gain += Fraction(means[pick] - whole[pick]) / len(draws)
    return picked, gain


def test_the_hand_computed_share_is_the_enumerated_one_and_the_bootstraps():
    values = np.array([HAND["a"], HAND["b"]], dtype=float).T
    exact, gain = enumerated(values, None, "best")
    assert exact[0] == HAND_SHARE_A
    selection = select_checkpoint(counts_of(HAND), ["a", "b"], SelectConfig())
    share = selection["pick_stability"]["shares"]["a"]
    assert abs(share - float(HAND_SHARE_A)) < share_tolerance(share, PICK_RESAMPLES)
    finer = honest_selection(values, labels=None, names=["a", "b"], rule="best", chosen=0,
                             standard_error=selection["table"][0]["se"], seed=5,
                             resamples=40_000)
    share = finer["pick_stability"]["shares"]["a"]
    assert abs(share - float(HAND_SHARE_A)) < share_tolerance(share, 40_000)
    curse = finer["winners_curse"]
    assert gain > 0  # a pick on three tasks is lifted by its luck
    assert abs(curse["inflation"] - float(gain)) < 4 * curse["monte_carlo_error"]


# Three groups of uneven size and three checkpoints whose order changes from one resample of the
# groups to another, under the one-standard-error rule (which reads the resample's own cluster
# standard error of its best) and under `best`.
GROUPED = np.array([
    # a     b     c
    [0.6, 0.5, 0.9],
    [0.7, 0.4, 0.8],   # g0: tasks 0, 1
    [0.6, 0.9, 0.1],
    [0.5, 0.7, 0.3],
    [0.4, 0.8, 0.2],   # g1: tasks 2, 3, 4
    [0.9, 0.6, 0.65],  # g2: task 5
])
# No resample puts two checkpoints' means, or a mean and the one-SE floor, within 0.011 of each
# other, so the enumeration and the bootstrap cannot part on rounding. Exact shares (a, b, c):
# best 4/27, 19/27, 4/27; one_se 16/27, 7/27, 4/27. Resampled task by task they would be about
# (0.30, 0.59, 0.11) and (0.61, 0.37, 0.02), which the test would tell apart.
GROUP_LABELS = ["g0", "g0", "g1", "g1", "g1", "g2"]


@pytest.mark.parametrize("rule", ["best", "one_se"])
def test_group_resample_shares_match_the_enumeration_of_all_27_resamples(rule):
    exact, gain = enumerated(GROUPED, GROUP_LABELS, rule)
    assert exact == {"best": {0: Fraction(4, 27), 1: Fraction(19, 27), 2: Fraction(4, 27)},
                     "one_se": {0: Fraction(16, 27), 1: Fraction(7, 27),
                                2: Fraction(4, 27)}}[rule]
    whole = GROUPED.mean(axis=0)
    chosen = int(np.argmax(whole))
    result = honest_selection(GROUPED, labels=np.array(GROUP_LABELS), names=["a", "b", "c"],
                              rule=rule, chosen=chosen, standard_error=0.1, seed=2,
                              resamples=40_000)
    stability = result["pick_stability"]
    assert (stability["unit"], stability["units"]) == ("groups", 3)
    for index, name in enumerate(["a", "b", "c"]):
        share = stability["shares"][name]
        expected = float(exact.get(index, 0))
        assert abs(share - expected) < share_tolerance(expected, 40_000), (name, share, expected)
    curse = result["winners_curse"]
    assert abs(curse["inflation"] - float(gain)) < 4 * curse["monte_carlo_error"] + 1e-12


def test_the_rule_ties_to_the_earlier_and_one_se_reads_the_best_ones_own_error():
    means = np.array([[0.5, 0.5, 0.4], [0.57, 0.6, 0.58], [0.3, 0.1 + 0.2, 0.0],
                      [0.55, 0.6, 0.58]])
    errors = np.array([[0.0, 0.0, 0.0], [0.05, 0.01, 0.05], [0.0, 0.0, 0.0],
                       [0.01, 0.06, 0.01]])
    # 0.1 + 0.2 is 0.30000000000000004: a tie in the last ulp is a tie, to the earlier column.
    assert rule_picks(means, errors, "best").tolist() == [0, 1, 0, 1]
    # one_se: the earliest within the best's own standard error (0.01 in the second row, where
    # the others' 0.05 would reach back to the first column; 0.06 in the last, which does).
    assert rule_picks(means, errors, "one_se").tolist() == [0, 1, 0, 0]
    assert rule_picks(means, None, "last", final=2).tolist() == [2, 2, 2, 2]


def test_expected_maxima_of_normals_are_the_closed_forms():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-9)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), abs=1e-9)
    assert expected_max_normal(5) == pytest.approx(1.162964, abs=1e-6)  # Tippett 1925's table


def test_for_level_checkpoints_the_pick_is_lifted_by_sigma_times_the_expected_max():
    """Two equally good checkpoints with independent errors: the pick's val score sits, on
    average, σ·E[max of 2 Z] = σ/√π above the truth, which if_all_level predicts; the bootstrap
    reads the observed gap as real and finds about 1/√2 of it (E φ(Z) = 1/(2√π) of σ√2)."""
    rng = np.random.default_rng(41)
    lifted, predicted, bootstrapped = [], [], []
    for replication in range(400):
        values = rng.binomial(1, 0.5, size=(100, 2)).astype(float)
        chosen = int(np.argmax(values.mean(axis=0)))
        curse = honest_selection(
            values, labels=None, names=["a", "b"], rule="best", chosen=chosen,
            standard_error=mean_standard_error(values[:, chosen]), seed=replication,
        )["winners_curse"]
        lifted.append(values[:, chosen].mean() - 0.5)
        predicted.append(curse["if_all_level"])
        bootstrapped.append(curse["inflation"])
    lifted_mean, error = np.mean(lifted), np.std(lifted) / math.sqrt(len(lifted))
    assert np.mean(predicted) == pytest.approx(0.05 / math.sqrt(math.pi), rel=0.03)
    assert abs(np.mean(predicted) - lifted_mean) < 4 * error
    assert 0.6 < np.mean(bootstrapped) / np.mean(predicted) < 0.8  # 1/√2 ≈ 0.707


def test_rule_last_chooses_nothing_so_nothing_is_inflated_and_the_shares_are_its_own():
    selection = select_checkpoint(counts_of(HAND), ["a", "b"],
                                  SelectConfig(rule="last", final="b"))
    curse = selection["winners_curse"]
    assert selection["pick_stability"]["shares"] == {"a": 0.0, "b": 1.0}
    assert (curse["inflation"], curse["if_all_level"], curse["monte_carlo_error"]) == (0, 0, 0)
    assert "0 by construction" in curse["note"]
    assert curse["configurations_tried"] == 2


def test_the_record_says_what_it_counted_and_is_the_same_on_every_run():
    counts = counts_of({"a": [1, 0, 1, 1, 0, 1], "b": [0, 1, 1, 0, 1, 1], "c": [0] * 6})
    first = select_checkpoint(counts, ["a", "b", "c"], SelectConfig(), seed=0)
    again = select_checkpoint(counts, ["a", "b", "c"], SelectConfig(), seed=0)
    assert content_digest(first) == content_digest(again)
    curse = first["winners_curse"]
    assert curse["configurations_tried"] == 3
    assert "3 checkpoints" in curse["counted"]
    assert "sensitivity sweep" in curse["not_counted"]
    assert f"in {first['pick_stability']['shares']['a']:.0%} of 2,000 resamples" in curse["note"]
    assert f"{100 * curse['inflation']:+.1f} points" in curse["note"]
    assert "σ·E[max of 3 Z]" in curse["note"]


def test_resampling_is_fast_enough_for_sixty_tasks_and_twelve_checkpoints():
    import time

    values = np.random.default_rng(0).random((60, 12))
    names = [f"c{j}" for j in range(12)]
    started = time.perf_counter()
    for rule in ("best", "one_se"):
        honest_selection(values, labels=None, names=names, rule=rule, chosen=0,
                         standard_error=0.04, seed=0)
    assert time.perf_counter() - started < 0.5
