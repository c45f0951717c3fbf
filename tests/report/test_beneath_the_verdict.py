"""Beneath the verdict (issue 41, items 2, 3 and 5): best-of-k against a brute-force count of
every ordered draw, the slices by the base's rate on hand-built tasks, group rows with
intervals, and the claim every headline states."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from heldout.report import build_report
from heldout.report.core import Report
from heldout.report.output import headline_markdown
from heldout.report.slices import Passable
from heldout.statistics.bca import difference_interval
from heldout.statistics.best_of_k import best_of_k
from heldout.statistics.estimators import pass_at_k
from tests.report.test_report import full_markdown, passing, rollouts


def brute_force_best_of_k(accepted: list[bool], passed: list[bool], k: int) -> float:
    """Average over every ordered draw of k episodes of the hidden result of the first one
    the selector accepts (the first drawn when it accepts none)."""
    draws = list(itertools.permutations(range(len(passed)), k))
    return sum(passed[next((i for i in draw if accepted[i]), draw[0])]
               for draw in draws) / len(draws)


@pytest.mark.parametrize("seed", range(6))
def test_best_of_k_is_the_average_over_every_draw_of_k_episodes(seed):
    rng = np.random.default_rng(seed)
    accepted, passed = rng.random(6) < 0.5, rng.random(6) < 0.5
    counts = ([6], [accepted.sum()], [(accepted & passed).sum()], [(~accepted & passed).sum()])
    for k in range(1, 7):
        expected = brute_force_best_of_k(list(accepted), list(passed), k)
        assert best_of_k(*counts, [k])[0, 0] == pytest.approx(expected, abs=1e-12)


def test_a_perfect_selector_gives_pass_at_k_and_a_blind_one_the_pass_rate():
    n, c, ks = np.array([10, 10, 7]), np.array([3, 0, 7]), [1, 2, 4]
    perfect = best_of_k(n, c, c, np.zeros(3, int), ks)
    assert perfect == pytest.approx(pass_at_k(n, c, ks))
    for accepted in (np.zeros(3, int), n):  # accepts none, or all: a random pick
        blind = best_of_k(n, accepted, np.where(accepted > 0, c, 0),
                          np.where(accepted > 0, 0, c), ks)
        assert blind == pytest.approx(np.repeat((c / n)[:, None], 3, axis=1))
    with pytest.raises(ValueError, match="exceeds"):
        best_of_k([4], [1], [2], [0], [1])


def with_public(table: pd.DataFrame, accepted: dict[str, list[bool]]) -> pd.DataFrame:
    return table.assign(public_passed=[accepted[task][sample] for task, sample in
                                       zip(table["task_id"], table["sample"], strict=True)])


def test_the_report_puts_best_of_k_beside_pass_at_k():
    # t0: the public tests accept episodes 0 and 1, of which 0 passes hidden; episode 3 passes
    # hidden unaccepted. At k = 2: P(an accepted one is drawn) = 1 - C(2,2)/C(4,2) = 5/6, then
    # hidden 1/2; else hidden 1/2 (of 2 rejected). best-of-2 = 5/12 + 1/12 = 1/2.
    # t1: none accepted, 1 of 4 passes: the pass rate, 1/4.
    outcomes = {"t0": [True, False, False, True], "t1": [False, True, False, False]}
    accepted = {"t0": [True, True, False, False], "t1": [False] * 4}
    base = with_public(rollouts("base", outcomes), accepted)
    candidate = with_public(rollouts("cand", outcomes), accepted)
    report = build_report(base, candidate)
    at_2 = next(point for point in report.best_of_k.curve.arms.base if point.k == 2)
    assert at_2.interval.estimate == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert report.best_of_k.accepted.base == pytest.approx(2 / 8)
    metrics = report.metrics
    assert metrics["base_best_of_2"] == pytest.approx(0.375)
    assert metrics["candidate_best_of_2"] == pytest.approx(0.375)
    markdown = full_markdown(report)
    assert "best-of-k / pass@k" in markdown and "the public tests accept (25.0%" in markdown
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.best_of_k == report.best_of_k
    # no public tests anywhere: no curve, and the report says why
    plain = build_report(rollouts("base", outcomes), rollouts("cand", outcomes))
    assert plain.best_of_k is None
    assert "Best-of-k: not computed" in full_markdown(plain)


def four_episodes(rates: dict[str, list[int]]) -> dict[str, list[bool]]:
    return {task: [bool(x) for x in episodes] for task, episodes in rates.items()}


# Episodes 0 and 2 (even) set the base's slice; 1 and 3 (odd) measure it.
BASE = four_episodes({"t1": [0, 1, 0, 0], "t2": [0, 0, 0, 0], "t3": [0, 0, 0, 0],
                      "t4": [1, 1, 0, 1], "t5": [1, 1, 1, 0]})
CANDIDATE = four_episodes({"t1": [1, 1, 1, 1], "t2": [1, 0, 1, 0], "t3": [0, 0, 0, 0],
                           "t4": [1, 1, 1, 0], "t5": [1, 1, 1, 1]})


def test_slices_are_set_by_the_bases_even_episodes_and_measured_by_its_odd_ones():
    report = build_report(rollouts("base", BASE), rollouts("cand", CANDIDATE),
                          passable=Passable(frozenset({"t3", "t9"}), "a reference checkpoint"))
    never, sometimes, always = report.slices.by_base_rate
    # never: t1 (odd 1/2, cand 1), t2 (odd 0, cand 1/2), t3 (0, 0)
    assert (never.slice, never.tasks) == ("never", 3)
    assert never.base == pytest.approx(1 / 6) and never.candidate == pytest.approx(0.5)
    assert never.difference == pytest.approx(1 / 3)
    assert (never.improved, never.regressed, never.tied) == (2, 0, 1)
    expected = difference_interval(np.array([0.5, 0.5, 0.0]), seed=0)
    assert (never.low, never.high) == pytest.approx((expected.low, expected.high))
    # one task each: unmeasured, with the numbers still shown
    assert (sometimes.tasks, sometimes.difference, sometimes.low) == (1, pytest.approx(-0.25),
                                                                      None)
    assert "unmeasured" in sometimes.method
    assert (always.tasks, always.difference) == (1, pytest.approx(0.5))
    # t3 fails in both arms every time, and the reference passed it
    assert (report.slices.both_fail.tasks, report.slices.both_fail.shown_passable) == (1, 1)
    assert report.metrics["slice_never_difference"] == pytest.approx(1 / 3)
    markdown = full_markdown(report)
    assert "By how often the base passed" in markdown
    assert ("1 task; 1 shown passable (genuine failures of both arms) and 0 never shown "
            "passable (maybe no policy can pass them), by a reference checkpoint") in markdown
    assert Report.from_json(json.loads(json.dumps(report.to_json()))).slices == report.slices


def test_one_base_episode_per_task_is_sliced_on_itself_and_says_it_regresses():
    report = build_report(rollouts("base", passing(6, range(3))),
                          rollouts("cand", passing(6, range(1, 5))))
    assert "regress toward the mean" in report.slices.sliced_by
    never, _, always = report.slices.by_base_rate
    assert (never.tasks, never.difference, always.tasks) == (3, pytest.approx(2 / 3), 3)
    assert report.slices.both_fail.shown_passable is None
    assert "not known" in full_markdown(report)


def test_group_rows_carry_an_interval_from_three_tasks_on():
    outcomes_base = {f"t{i}": [False, False] for i in range(5)}
    outcomes_cand = {"t0": [True, True], "t1": [True, False], "t2": [False, False],
                     "t3": [True, True], "t4": [False, False]}
    groups = {"t0": "a", "t1": "a", "t2": "a", "t3": "b", "t4": "b"}
    report = build_report(rollouts("base", outcomes_base), rollouts("cand", outcomes_cand),
                          groups=groups)
    a, b = report.beneath.groups
    expected = difference_interval(np.array([1.0, 0.5, 0.0]), seed=0)
    assert (a.low, a.high, a.tied) == (pytest.approx(expected.low),
                                       pytest.approx(expected.high), 1)
    assert (b.tasks, b.low, b.high, b.tied) == (2, None, None, 1)
    assert "unmeasured" in full_markdown(report)


def test_every_headline_says_what_its_claim_is_about():
    report = build_report(rollouts("base", passing(40, range(10))),
                          rollouts("cand", passing(40, range(30))))
    text = headline_markdown(report)
    assert "The claim: cand against base, these two checkpoints as they are" in text
    assert "the 40 tasks both files hold" in text and "training seeds per arm" in text
    piped = build_report(rollouts("base", passing(40, range(10))),
                         rollouts("cand", passing(40, range(30))),
                         protocol={"split": {"test_version": "abc"}})
    assert "the test split's 40 tasks" in piped.headline.claim
    assert Report.from_json(piped.to_json()).headline.claim == piped.headline.claim
