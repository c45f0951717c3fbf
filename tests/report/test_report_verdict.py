"""The verdict in the paired report (issue 15): the deciding test on every episode, the interval,
the gates before the claim, and what the verdict rests on, on rollouts worked out on paper.
The rule itself is tested in tests/statistics/test_decision.py; here, what the report makes of
it."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest

from heldout.files import json_bytes
from heldout.report import (
    BETTER,
    NO_DIFFERENCE,
    WORSE,
    Report,
    build_report,
    headline_markdown,
)
from heldout.statistics.betting import betting_detectable, betting_interval
from heldout.statistics.decision import (
    HARDEN_THE_SET,
    INTERVAL_INCLUDES_ZERO,
    NOT_COMPARABLE,
    TEST_DOES_NOT_REJECT,
    TOO_FEW_UNITS,
    TRUNCATION_IMBALANCE,
)
from heldout.statistics.power import Reruns
from tests.report.test_report import (
    OTHER_HARNESS,
    PROTOCOL,
    fixed_ten_of_200,
    full_markdown,
    passing,
    rollouts,
)

# Three runs of pass@1 0.40, 0.45, 0.50 whose episodes explain a variance of 0.0012.
DRIFTING = Reruns((0.40, 0.45, 0.50), (0.55, 0.45, 0.50))


@pytest.mark.parametrize("episodes", [1, 3])
def test_fixing_ten_tasks_of_200_and_breaking_none_is_better(episodes: int):
    report = fixed_ten_of_200(episodes)
    headline, difference = report.headline, report.headline.decision.difference
    assert headline.pass_at_1.base.estimate == pytest.approx(0.40)
    assert headline.pass_at_1.candidate.estimate == pytest.approx(0.45)
    assert difference.estimate == pytest.approx(0.05)
    # Ten differences of 1 among 200: sd = sqrt((10·0.95² + 190·0.05²)/199) = 0.2185, over
    # sqrt(200) tasks: 0.01545, whatever the episodes per task (the unit is the task).
    assert headline.standard_error == pytest.approx(0.01545, abs=5e-5)
    assert 0 < difference.low < 0.05 < difference.high
    if episodes == 1:
        # Newcombe's paired score interval (method 10) for b = 0, c = 10, both = 80, N = 200:
        # Wilson (z = 1.95996) for the candidate's 90/200 is [0.38264, 0.51924] and for the
        # base's 80/200 [0.33461, 0.46916]; φ = (80·110 − 0·10 − 200/2)/√(90·110·80·120) =
        # 8700/9748.8 = 0.89241; low = 0.05 − √(0.06736² − 2φ·0.06736·0.06916 + 0.06916²) =
        # 0.05 − 0.03171 = 0.01829, high = 0.05 + √(0.06540² − 2φ·0.06540·0.06924 + 0.06924²)
        # = 0.05 + 0.03145 = 0.08145.
        assert difference.method == "newcombe paired score"
        assert (difference.low, difference.high) == pytest.approx((0.01829, 0.08145), abs=5e-5)
    else:
        # Only 10 of the 200 tasks differ: the betting interval, valid at any size, decides.
        assert difference.method == (
            "bootstrap-t over 200 tasks, 9,999 resamples, widened to the hedged-capital "
            "betting over 200 tasks (10 of 200 units differ, fewer than 75)")
    # The deciding test flips the signs of the 10 differences of +1 (of rates over every
    # episode, so the same at 1 and 3 episodes): only the two all-equal patterns reach
    # |Σ| = 10, p = 2·0.5^10, McNemar's exact p on the 10 discordant pairs at sample 0.
    test = headline.decision.test
    assert (test.statistic, test.units, test.nonzero_units, test.exact) == (10, 200, 10, True)
    if episodes == 1:
        assert test.p_value == pytest.approx(2 * 0.5**10, rel=1e-12) and test.rejects
    else:
        # The betting test decides beside it, and the p printed is the largest: its own.
        differences = np.r_[np.ones(10), np.zeros(190)]
        betting = betting_interval(differences, seed=0)
        assert test.p_value == pytest.approx(betting.p_value, rel=1e-9)
        assert 2 * 0.5**10 < test.p_value < 0.05 and test.rejects
    mcnemar = headline.decision.mcnemar
    assert (mcnemar.b, mcnemar.c, mcnemar.n_discordant) == (0, 10, 10)
    assert mcnemar.pvalue == pytest.approx(2 * 0.5**10, rel=1e-12)
    assert mcnemar.midp == pytest.approx(0.5**10, rel=1e-12)
    assert report.verdict == BETTER and "excludes 0" in headline.reason
    assert headline.decision.gates == ()
    assert report.metrics["mcnemar_p"] == pytest.approx(2 * 0.5**10, rel=1e-5)
    assert report.metrics["test_p"] == pytest.approx(test.p_value, rel=1e-5)
    assert report.metrics["verdict"] == 1 and report.metrics["decidable"] == 1
    flips = report.flips
    assert flips.improved == [f"t{i:03d}" for i in range(80, 90)]
    assert (flips.regressed, flips.both_pass, flips.both_fail, flips.tied) == ([], 80, 110, 0)
    # At one episode the exact test's MDE is (z.975 + z.8)·0.01545 = 4.3 points. At three the
    # betting test decides, and the MDE is the effect it finds in 80% of draws of differences
    # spread like these, whatever the normal formula says (4.9 points, above its 4.3).
    se = 0.21849 / np.sqrt(200)
    if episodes == 1:
        assert report.power.mde == pytest.approx((1.95996 + 0.84162) * se, rel=1e-4)
    else:
        found = betting_detectable(np.r_[np.ones(10), np.zeros(190)], seed=0)
        assert report.power.mde == pytest.approx(found, rel=1e-9)
        assert report.power.mde > (1.95996 + 0.84162) * se
    # The +5 observed is above either MDE (and the betting test found it): not underpowered.
    assert report.power.underpowered is False
    # The default k stop at n/2: at 3 episodes, pass@1 alone.
    assert [point.k for point in report.pass_at_k.arms.base] == [1]


def test_breaking_ten_tasks_is_worse():
    report = build_report(rollouts("fixed", passing(200, range(90))),
                          rollouts("broken", passing(200, range(80))))
    decision = report.headline.decision
    assert (decision.mcnemar.b, decision.mcnemar.c) == (10, 0)
    assert decision.test.statistic == -10 and decision.test.rejects
    assert decision.difference.high < 0 and report.verdict == WORSE
    assert report.flips.regressed == [f"t{i:03d}" for i in range(80, 90)]
    assert report.metrics["verdict"] == -1


def test_no_discordant_pairs_gives_p_1_and_no_difference_detected():
    # Sample 0 agrees on every task; sample 1 differs both ways, so the rates differ a little.
    base = {"t0": [True, True], "t1": [True, False], "t2": [False, False], "t3": [False, True],
            "t4": [True, True], "t5": [False, False]}
    candidate = {"t0": [True, True], "t1": [True, True], "t2": [False, False],
                 "t3": [False, False], "t4": [True, False], "t5": [False, False]}
    # 50 tasks both arms fail in every episode change no pair and no rate, and bring the set
    # to what the rule needs before it says anything: 56 tasks (≥ 30), 55 that an arm fails.
    both_fail = {f"f{i:02d}": [False, False] for i in range(50)}
    report = build_report(rollouts("base", base | both_fail),
                          rollouts("cand", candidate | both_fail))
    decision = report.headline.decision
    mcnemar = decision.mcnemar
    assert (mcnemar.b, mcnemar.c) == (0, 0)
    assert mcnemar.pvalue == 1.0 and mcnemar.midp == 1.0
    # The deciding test on the rates: t1 +0.5, t3 −0.5, t4 −0.5, Σ = −0.5; every one of the 8
    # sign patterns gives |Σ| of 0.5 or 1.5, at least the observed: p = 1.
    assert (decision.test.nonzero_units, decision.test.p_value) == (3, 1.0)
    assert decision.support.failure_capable == 55 and decision.support.tasks == 56
    assert report.verdict == NO_DIFFERENCE and "includes 0" in report.headline.reason
    assert report.power.underpowered is True
    assert ("Underpowered: only 3 task(s) or group(s) differ at all between the arms (fewer "
            "than 10); with 3 the paired test can reach at best p = 0.25."
            ) in report.power.warnings


def test_every_task_passing_in_both_arms_reports_the_exact_bound_and_says_so():
    report = build_report(rollouts("base", passing(20, range(20), 2)),
                          rollouts("cand", passing(20, range(20), 2)))
    headline = report.headline
    # Clopper-Pearson for 20 of 20: [0.025^(1/20), 1] = [0.8316, 1]; the difference's bound is
    # ±(1 − 0.025^(1/20)) = ±0.1684, since no task differing in 20 bounds the share that could.
    exact_low = 0.025 ** (1 / 20)
    for interval in headline.pass_at_1:
        assert interval.method == "clopper-pearson: all 20 tasks pass"
        assert (interval.low, interval.high) == pytest.approx((exact_low, 1.0))
    # Below 100 tasks it is widened to the betting interval, which on 20 zeros is wider.
    difference = headline.decision.difference
    assert difference.method.startswith("bootstrap-t over 20 tasks, 9,999 resamples; all 20 "
                                        "units equal, clopper-pearson bound, widened to the "
                                        "hedged-capital betting over 20 tasks")
    betting = betting_interval(np.zeros(20), seed=0).interval
    assert (difference.low, difference.high) == (betting.low, betting.high)
    assert difference.low < -(1 - exact_low) and difference.high > 1 - exact_low
    # The statistics alone find no difference; the gates void the comparison before that: 20
    # tasks are too few, and a set with no task either arm fails cannot show a difference.
    decision = headline.decision
    assert decision.claim == NO_DIFFERENCE
    assert report.verdict == ("not decidable: 20 tasks in 20 groups, fewer than 30: add tasks, "
                              "not episodes")
    assert [gate.name for gate in decision.gates if gate.voids] == [TOO_FEW_UNITS,
                                                                    HARDEN_THE_SET]
    text = headline_markdown(report)
    assert "exact Clopper-Pearson bound" in text and "zero-width" in text
    assert ("Why: 20 tasks in 20 groups, fewer than 30: add tasks, not episodes; only 0 tasks "
            "that either arm ever fails (fewer than 30): harden the set; by the statistics "
            "alone, the paired test does not reject (p = 1 > α = 0.05) and the 95% interval "
            "includes 0.") in text
    assert report.power.mde is None


# --------------------------------------------------------------------------------------------
# What the verdict rests on, and the gates that void it


def test_the_headline_shows_beside_the_verdict_what_it_rests_on():
    # fixed_ten_of_200 with three paired runs and the protocol card (its test set opened
    # once). The runs' differences 0.15, 0, 0 (sd 0.0866) carry 0.0025 on 2 degrees of freedom;
    # only 10 tasks differ, so the betting interval would decide (√(2 log 40) = 2.716), but the
    # runs' critical value is wider: Cochran-Cox (0.000239·1.960 + 0.0025·4.303)/0.002739 =
    # 4.099, and the verdict's MDE is (4.099 + z.8)·√(0.21849²/200 + 0.0025) = 0.2585;
    # ties: t000-t079 pass in both, t090-t199 fail in both.
    base, candidate = passing(200, range(80)), passing(200, range(90))
    report = build_report(rollouts("base", base), rollouts("fixed", candidate),
                          reruns=DRIFTING, protocol=PROTOCOL)
    support = ("Rests on 200 tasks in 200 groups, 1 episode(s) each (3 runs pooled); ties: 80 "
               "pass in both, 110 fail in both; minimum detectable effect of the verdict 25.9 "
               "points; run-level drift measured by 3 paired runs of each arm (their "
               "difference's sd 8.7 points: 5.0 carried, on 2 df); "
               "test accesses so far: 1; gates fired: the paired test does not reject, "
               "interval includes 0.")
    assert report.headline.notes[0] == support
    assert report.headline.decision.support.mde == pytest.approx(0.2585, abs=1e-4)
    text = headline_markdown(report)
    verdict = text.index("No difference detected: fixed 45.0% vs base 40.0%, +5.0 points [")
    assert text.index(f"> {support}") > verdict

    # In groups the interval and the test rest on the 40 groups, and the line says so; without
    # reruns or a protocol card it says there was no drift and gives no access count. The 10
    # gains fall in 10 of the 40 groups and no group loses: the sign-flip test rejects (p =
    # 2·0.5^10), but at 40 groups a few groups with large losses could be missing from the
    # sample, and the betting interval, which assumes nothing else, includes 0.
    grouped = build_report(rollouts("base", base), rollouts("fixed", candidate),
                           groups={f"t{i:03d}": f"g{i % 40}" for i in range(200)})
    assert grouped.headline.notes[0].startswith(
        "Rests on 200 tasks in 40 groups, 1 episode(s) each; ties: 80 pass in both, 110 fail "
        "in both; minimum detectable effect of the verdict ")
    assert grouped.headline.notes[0].endswith(
        "; run-level drift not measured; gates fired: the paired test does not reject, "
        "interval includes 0.")
    # The betting test decides beside the other two, so the deciding test does not reject
    # either: the p printed is the verdict's own.
    assert grouped.headline.decision.test.method == (
        "bootstrap-t over 40 groups of 200 tasks, 9,999 resamples, sign-flip permutation "
        "over 40 groups, exact and hedged-capital betting over 40 groups of 200 tasks (fewer "
        "than 100 units), all rejecting (p the largest)")
    assert not grouped.headline.decision.test.rejects
    assert grouped.headline.decision.test.p_value > 0.05 > 2 * 0.5**10
    assert "hedged-capital betting over 40 groups" in grouped.headline.decision.difference.method


def test_with_several_episodes_the_flips_follow_the_pass_rates_not_one_sample():
    # The example: two tasks at 8/10 in the base and 1/10 in the candidate. At sample 0
    # HumanEval/115 passes then fails, HumanEval/150 fails in both: read at one sample the
    # second was "both fail", while the rates over every episode say both regressed by 70.
    regressing = {
        "HumanEval/115": ([True] * 8 + [False] * 2, [False] * 9 + [True]),
        "HumanEval/150": ([False] + [True] * 8 + [False], [False] * 9 + [True]),
        "HumanEval/2": ([True] * 5 + [False] * 5, [True] + [False] * 5 + [True] * 4),  # 5/10
        "HumanEval/0": ([True] * 10, [True] * 10),
        "HumanEval/1": ([False] * 10, [False] * 10),
    }
    report = build_report(
        rollouts("base", {task: arms[0] for task, arms in regressing.items()}),
        rollouts("cand", {task: arms[1] for task, arms in regressing.items()}))
    flips = report.flips
    assert flips.regressed == ["HumanEval/115", "HumanEval/150"] and flips.improved == []
    assert (flips.both_pass, flips.both_fail, flips.tied) == (1, 1, 1)
    by_task = {row.task_id: row for row in flips.tasks}
    assert by_task["HumanEval/150"].difference == pytest.approx(-0.7)
    assert by_task["HumanEval/2"].flip == "tied"
    # McNemar at sample 0 is reported as what it is: it sees HumanEval/115 alone.
    assert (report.headline.decision.mcnemar.b, report.headline.decision.mcnemar.c) == (1, 0)
    assert (report.metrics["regressed"], report.metrics["tied"]) == (2, 1)
    text = full_markdown(report)
    assert "| HumanEval/150 | 8/10 | 1/10 | -70.0 | regressed |" in text
    assert ("By pass rate over every episode: 0 improved, 2 regressed, 1 pass in both, 1 fail "
            "in both, 1 tied in between.") in text


def mismatched_harness() -> Report:
    """fixed_ten_of_200, the candidate under another harness, compared all the same."""
    return build_report(rollouts("base", passing(200, range(80))),
                        rollouts("fixed", passing(200, range(90)), harness=OTHER_HARNESS),
                        allow_harness_mismatch=True)


def test_an_allowed_harness_mismatch_leaves_the_comparison_not_decidable():
    report = mismatched_harness()
    decision = report.headline.decision
    # The same numbers as fixed_ten_of_200, which the statistics alone call better.
    assert decision.claim == BETTER and decision.test.rejects and decision.difference.low > 0
    assert report.verdict == ("not decidable: the arms ran under different harnesses, so part "
                              "of any difference may be the harness's")
    assert [(gate.name, gate.voids) for gate in decision.gates] == [(NOT_COMPARABLE, True)]
    assert (report.metrics["decidable"], report.metrics["verdict"]) == (0, 0)
    text = headline_markdown(report)
    assert text.startswith("Not decidable (not comparable): fixed 45.0% vs base 40.0%, +5.0 "
                           "points [+1.8, +8.1], p = 0.00195 — 200 tasks × 1 episode\n")
    assert ("Why: the arms ran under different harnesses, so part of any difference may be the "
            "harness's; by the statistics alone it would be better.") in text


def truncated_base() -> Report:
    """fixed_ten_of_200 with the base truncated in 20 of its 200 episodes, the candidate in
    none."""
    truncated = {(f"t{i:03d}", 0): "truncated" for i in range(100, 120)}
    return build_report(rollouts("base", passing(200, range(80)), statuses=truncated),
                        rollouts("fixed", passing(200, range(90))))


@pytest.mark.parametrize("build, verdict, gates", [
    (fixed_ten_of_200, BETTER, []),
    (lambda: build_report(rollouts("base", passing(200, range(80))),
                          rollouts("fixed", passing(200, range(90))),
                          reruns=DRIFTING),
     NO_DIFFERENCE, [TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]),
    (lambda: build_report(rollouts("base", passing(20, range(5))),
                          rollouts("fixed", passing(20, range(8)))),
     "not decidable: 20 tasks in 20 groups, fewer than 30: add tasks, not episodes (at the "
     "spread seen, a difference of 15.0 points is found in 80% of runs with about 79 tasks "
     "or groups)",
     [TOO_FEW_UNITS, HARDEN_THE_SET, TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]),
    (mismatched_harness, "not decidable: the arms ran under different harnesses, so part of "
                         "any difference may be the harness's", [NOT_COMPARABLE]),
    (truncated_base, "not decidable: the base was truncated in 10.0% of episodes, more than "
                     "twice the other arm's 0.0% (one-sided p = 2.4e-06 over the tasks): "
                     "budgets, not skill, may decide the difference",
     [TRUNCATION_IMBALANCE]),
], ids=["better", "drifting", "too-few-tasks", "harness-mismatch", "truncation"])
def test_the_headline_json_round_trips_with_its_verdict_and_gates(build, verdict, gates):
    report = build()
    decision = report.headline.decision
    assert report.verdict == verdict
    # Every gate that fired, those that void first: 5 vs 8 of 20 (c = 3, p = 0.25) also
    # fails the statistics, which the voiding gates come before.
    assert [gate.name for gate in decision.gates] == gates
    written = json.loads(json_bytes(report.to_json()))
    headline = written["headline"]
    assert {"test", "mcnemar", "support", "gates", "mismatch"} <= set(headline)
    assert headline["verdict"] == verdict
    assert headline["gates"] == [asdict(gate) for gate in decision.gates]
    again = Report.from_json(written)
    assert again.verdict == report.verdict
    assert again.headline.decision.gates == decision.gates
    assert again.headline == report.headline and again == report
    assert again.to_json() == written


def test_a_task_that_ran_one_episode_among_tasks_that_ran_ten_never_decides_by_sample_0():
    """100 tasks, 10 episodes each but t000 with 1, in both arms. Over every episode the
    candidate is far better (it passes 8 of 10 where the base passes 2), but at sample 0 the
    base passes and the candidate fails on every task. The interval and the sign come from the
    procedure that decides, on every episode, never from sample 0."""
    ragged = {"t000": 1}
    base = {f"t{i:03d}": [True] + [k < 1 for k in range(ragged.get(f"t{i:03d}", 10) - 1)]
            for i in range(100)}
    candidate = {task: [False] + [k < 8 for k in range(len(episodes) - 1)]
                 for task, episodes in base.items()}
    report = build_report(rollouts("base", base), rollouts("step_9", candidate))
    decision = report.headline.decision
    assert decision.mcnemar.b == 100 and decision.mcnemar.c == 0  # sample 0: base always
    assert decision.difference.estimate == pytest.approx((0.6 * 99 - 1) / 100)
    assert decision.difference.low > 0 and "Newcombe" not in decision.difference.method
    assert decision.test.rejects and decision.claim == BETTER
