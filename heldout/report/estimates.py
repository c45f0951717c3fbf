"""The headline's estimators, in one place: each arm's pass@1 and the decided paired
difference. Every set of tasks the report states them for (all compared tasks; those less the
ones flagged as contaminated) goes through here, so the numbers are comparable by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from heldout.report.inputs import Arm
from heldout.report.sections import PerArm
from heldout.statistics.decision import Decision, decide
from heldout.statistics.summary import CountsSummary, summarize_counts


@dataclass(frozen=True)
class HeadlineEstimates:
    summaries: PerArm[CountsSummary]  # pass@1 with its interval, and the design effect
    decision: Decision


def headline_estimates(
    arms: PerArm[Arm], *, rerun_scores: Sequence[float] | None, seed: int
) -> HeadlineEstimates:
    summaries = arms.map(lambda arm: summarize_counts(
        arm.counts["c"].to_numpy(), arm.counts["n"].to_numpy(), [1], seed=seed))
    decision = decide(arms.base.rates, arms.candidate.rates, base_passed=arms.base.at_sample,
                      candidate_passed=arms.candidate.at_sample, rerun_scores=rerun_scores,
                      seed=seed)
    return HeadlineEstimates(summaries, decision)
