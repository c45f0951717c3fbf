"""Beneath the mean: each arm's tasks and episodes by outcome, a flag where one arm was
truncated far more often than the other, and the comparison broken down by group."""

from __future__ import annotations

import pandas as pd

from heldout.episodes.rows import FAILURES
from heldout.report.formatting import percent
from heldout.report.inputs import Arm
from heldout.report.sections import Beneath, GroupRow, Outcomes, PerArm, TaskFlip
from heldout.report.slices import MEASURED_FROM
from heldout.statistics.bca import difference_interval
from heldout.statistics.summary import CountsSummary


def _outcomes(arm: Arm, summary: CountsSummary) -> Outcomes:
    counts = arm.counts
    tasks, episodes = len(counts), int(counts["n"].sum())
    all_pass = int((counts["c"] == counts["n"]).sum())
    failures = {}
    for failure in FAILURES:
        count = int(counts[failure.count].sum())
        failures |= {failure.count: count, failure.rate: count / episodes}
    return Outcomes(
        tasks=tasks,
        episodes=episodes,
        all_pass=all_pass,
        all_pass_fraction=all_pass / tasks,
        all_fail=summary.all_fail,
        all_fail_fraction=summary.all_fail / tasks,
        failure_capable=summary.failure_capable,
        **failures,
        design_effect=summary.design_effect,
    )


def _group_breakdown(flips: list[TaskFlip], seed: int) -> list[GroupRow] | None:
    """Per group, when some group holds several tasks (else the per-task table says it all),
    with the interval of its tasks' paired differences from MEASURED_FROM tasks on."""
    rows = pd.DataFrame([flip.to_json() for flip in flips])
    if not 1 < rows["group"].nunique() < len(rows):
        return None
    table = rows.assign(base=rows["base_c"] / rows["base_n"],
                        candidate=rows["candidate_c"] / rows["candidate_n"])
    breakdown = []
    for group, tasks in table.groupby("group", sort=True):
        difference = tasks["candidate"].to_numpy() - tasks["base"].to_numpy()
        interval = (difference_interval(difference, seed=seed)
                    if difference.size >= MEASURED_FROM else None)
        breakdown.append(GroupRow(
            group=str(group), tasks=int(difference.size), base=float(tasks["base"].mean()),
            candidate=float(tasks["candidate"].mean()), difference=float(difference.mean()),
            improved=int((difference > 0).sum()), regressed=int((difference < 0).sum()),
            low=None if interval is None else interval.low,
            high=None if interval is None else interval.high,
            tied=int((difference == 0).sum())))
    return breakdown


def beneath_section(
    arms: PerArm[Arm], summaries: PerArm[CountsSummary], flips: list[TaskFlip], seed: int = 0
) -> Beneath:
    outcomes = PerArm(*(_outcomes(arm, summary)
                        for arm, summary in zip(arms, summaries, strict=True)))
    flags = []
    sides = list(zip(arms, outcomes, strict=True))
    for (arm, mine), (other_arm, theirs) in (sides, sides[::-1]):
        if mine.truncation_rate > 2 * theirs.truncation_rate:
            flags.append(
                f"{arm.name} was truncated in {percent(mine.truncation_rate)} of episodes, "
                f"more than twice {other_arm.name}'s {percent(theirs.truncation_rate)}: the "
                "token budget, not only skill, holds its pass rate down."
            )
    return Beneath(outcomes, flags, _group_breakdown(flips, seed))
