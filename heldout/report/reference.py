"""A reference checkpoint run beside each arm: the drift control of arms that ran at different
times (heldout.statistics.timing). Its run beside the base and its run beside the candidate
are compared as the arms are; how far it moved between them is the drift a claim must clear."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from heldout.report.estimates import headline_estimates
from heldout.report.inputs import ReportInputError, check_rollouts, pair_arms, read_span
from heldout.report.slices import Passable
from heldout.statistics.intervals import Interval
from heldout.statistics.timing import interleaved


def reference_movement(beside_base: pd.DataFrame, beside_candidate: pd.DataFrame, *,
                       base: pd.DataFrame, candidate: pd.DataFrame,
                       groups: Mapping[str, str] | None) -> Interval:
    """The reference's pass@1 beside the candidate minus beside the base, with its interval.
    Refused unless each of its runs interleaves in time with its arm and both are one
    checkpoint."""
    for table, label in ((beside_base, "the reference beside A"),
                         (beside_candidate, "the reference beside B")):
        check_rollouts(table, label)
    checkpoints = {str(name) for table in (beside_base, beside_candidate)
                   if "checkpoint" in table.columns for name in table["checkpoint"].unique()}
    if len(checkpoints) > 1:
        raise ReportInputError(
            f"the reference's two runs are of {len(checkpoints)} checkpoints "
            f"({', '.join(sorted(checkpoints))}): run one reference checkpoint beside each arm")
    for reference, arm, letter in ((beside_base, base, "A"), (beside_candidate, candidate, "B")):
        ran, beside = read_span(reference), read_span(arm)
        if ran is None or beside is None:
            raise ReportInputError(
                f"the reference beside {letter}: when it or {letter} ran is not recorded (rows "
                "without started_at), so it cannot be shown to have run beside it")
        if not interleaved(ran, beside):
            raise ReportInputError(
                f"the reference beside {letter} ran {ran}, not beside {letter} ({beside}): run "
                f"it turn about with {letter}, or at the same time")
    paired = pair_arms(beside_base, beside_candidate, names=("reference beside A",
                                                             "reference beside B"),
                       sample=0, allow_harness_mismatch=False)
    return headline_estimates(paired.arms, groups=groups, reruns=None, mismatch=None,
                              seed=0).decision.difference


def passable_by_reference(*runs: pd.DataFrame) -> Passable:
    """The tasks a reference checkpoint passed in any run (an errored episode passes nothing):
    where both arms fail them, the failure is theirs, not the task's."""
    passed = set()
    for table in runs:
        won = table["passed"].astype(bool) & (table["status"] != "error")
        passed |= set(table.loc[won, "task_id"].astype(str))
    return Passable(frozenset(passed), "the reference checkpoint's runs")
