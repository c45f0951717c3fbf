"""The headline's estimators, in one place: each arm's pass@1 and the decided paired
difference. Every set of tasks the report states them for (all compared tasks; those less the
ones flagged as contaminated) goes through here, so the numbers are comparable by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from heldout.report.inputs import Arm
from heldout.report.sections import PerArm
from heldout.statistics.decision import Decision, Gate, decide
from heldout.statistics.grouping import group_labels
from heldout.statistics.intervals import Interval
from heldout.statistics.power import Reruns
from heldout.statistics.summary import CountsSummary, summarize_counts
from heldout.statistics.timing import Timing, arms_timing

# The test stage runs run r of the base, then run r of the candidate, turn about; when its own
# record says otherwise, the arms' runs did not interleave.
TEST_RUNS_APART = ("the test access ran the arms' runs one after the other, not turn about: "
                   "drift between them is not controlled")


@dataclass(frozen=True)
class HeadlineEstimates:
    summaries: PerArm[CountsSummary]  # per-arm counts summarized, with the design effect
    pass_at_1: PerArm[Interval]  # each arm's pass@1 (its summary's): monotone, exact at the edges
    decision: Decision


def headline_estimates(
    arms: PerArm[Arm], *, groups: Mapping[str, str] | None,
    reruns: Reruns | None, mismatch: str | None, seed: int, reference: Interval | None = None,
    judge: tuple[Gate, ...] = (),
) -> HeadlineEstimates:
    """`reference`: a reference checkpoint's movement between the arms' times (its run beside
    the candidate minus its run beside the base), the drift control of arms run apart.
    `judge`: the judge's voiding gates (heldout.statistics.judge_trust)."""
    labels = group_labels(arms.base.counts.index, groups)
    summaries = arms.map(lambda arm: summarize_counts(
        arm.counts["c"].to_numpy(), arm.counts["n"].to_numpy(), [1], groups=labels, seed=seed))
    pass_at_1 = summaries.map(lambda summary: summary.pass_at_1)
    episodes = arms.map(lambda arm: int(arm.counts["n"].min()))
    common = np.minimum(*(arm.counts["n"].to_numpy() for arm in arms))
    rates = arms.map(lambda arm: arm.rates)
    episodes_differ = None
    if arms.base.counts["n"].tolist() != arms.candidate.counts["n"].tolist():
        # Decided on the episodes both arms ran, so that a significant harm is still found;
        # a gain at unequal n is not decided (Decision: the gate lets only a harm through).
        rates = arms.map(lambda arm: arm.first_rates(common))
        episodes_differ = (f"the arms ran different numbers of episodes per task "
                           f"({episodes.base} and {episodes.candidate} at the fewest): compare "
                           f"at one n (decided on each task's first {int(common.min())}"
                           f"{'' if common.min() == common.max() else '+'} episodes in both)")
    run_differences = None
    if reruns is not None and reruns.samples_per_run and all(arm.episodes is not None
                                                              for arm in arms):
        run_differences = np.subtract(*(arm.run_rates(reruns.samples_per_run, len(reruns.base))
                                        for arm in (arms.candidate, arms.base)))
    decision = decide(
        rates.base, rates.candidate, n_episodes=common, episodes_differ=episodes_differ,
        base_passed=arms.base.at_sample, candidate_passed=arms.candidate.at_sample,
        groups=labels, truncation=tuple(truncation_rate(arm) for arm in arms),
        task_truncation=tuple((arm.counts["truncations"] / arm.counts["n"]).to_numpy(float)
                              for arm in arms),
        reruns=reruns, run_differences=run_differences, mismatch=mismatch,
        timing=arms_time(arms, reruns, reference), judge=judge, seed=seed)
    return HeadlineEstimates(summaries, pass_at_1, decision)


def arms_time(arms: PerArm[Arm], reruns: Reruns | None, reference: Interval | None) -> Timing:
    """When the arms ran: the test stage's record where it made one, else the rows' own."""
    if reruns is not None and reruns.interleaved is not None:
        return Timing(apart=None if reruns.interleaved else TEST_RUNS_APART)
    return arms_timing(arms.base.span, arms.candidate.span,
                       names=(arms.base.name, arms.candidate.name), reference=reference)


def truncation_rate(arm: Arm) -> float:
    return float(arm.counts["truncations"].sum() / arm.counts["n"].sum())
