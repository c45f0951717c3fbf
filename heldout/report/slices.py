"""Slices (issue 41, item 2): where the difference comes from. The compared tasks split by how
often the base passed them (never, sometimes, always), each slice with the paired difference,
its interval and its ties; and the tasks both arms always failed, split by whether anything
(a reference checkpoint, a canary) has shown them passable at all.

A policy that improved only where the base already succeeded now and then sharpened what it
had; one that improved where the base never passed reached further. But a slice chosen by the
base's own episodes and measured on them regresses toward the mean: a task the base "never"
passed in 3 episodes can only go up. So the slice is set by the base's even-numbered episodes
and its difference measured with the odd-numbered ones (with all of the candidate's), which
share no noise with the slice; only an arm of one episode per task is sliced and measured on
the same episodes, and the record says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from heldout.report.inputs import Arm
from heldout.report.sections import PerArm, _FlatRecord
from heldout.statistics.bca import difference_interval

SLICES = ("never", "sometimes", "always")
MEASURED_FROM = 3  # tasks: fewer, and a slice's interval is not worth drawing


@dataclass(frozen=True)
class SliceRow(_FlatRecord):
    """One slice: its tasks, each arm's pass rate there, the paired difference with its
    interval (None under MEASURED_FROM tasks or a single group: unmeasured) and its ties."""

    slice: str
    tasks: int
    base: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    method: str
    improved: int
    regressed: int
    tied: int


@dataclass(frozen=True)
class BothFail(_FlatRecord):
    """The compared tasks neither arm passed in any episode, and how many of them a reference
    run or canary has passed: those are genuine failures of both; the rest may be tasks no
    policy can pass (a broken test, an impossible budget). None: nothing was run to tell."""

    tasks: int
    shown_passable: int | None
    evidence: str  # what was counted as showing a task passable, or why nothing was


@dataclass(frozen=True)
class Passable:
    """Task ids some run other than the two arms passed, and what that run was."""

    task_ids: frozenset[str]
    evidence: str


@dataclass(frozen=True)
class Slices:
    by_base_rate: list[SliceRow]
    sliced_by: str  # which of the base's episodes set the slice and which measure it
    both_fail: BothFail

    def to_json(self) -> dict[str, Any]:
        return {"by_base_rate": [row.to_json() for row in self.by_base_rate],
                "sliced_by": self.sliced_by, "both_fail": self.both_fail.to_json()}

    def metrics(self) -> dict[str, float | int]:
        """metrics/test.json's slices: each slice's tasks and difference, the both-fail split."""
        metrics: dict[str, float | int] = {f"slice_{row.slice}_tasks": row.tasks
                                           for row in self.by_base_rate}
        metrics |= {f"slice_{row.slice}_difference": row.difference
                    for row in self.by_base_rate if row.difference is not None}
        if self.both_fail.shown_passable is not None:
            metrics["both_fail_shown_passable"] = self.both_fail.shown_passable
        return metrics

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Slices:
        return cls([SliceRow.from_json(row) for row in data["by_base_rate"]],
                   data["sliced_by"], BothFail.from_json(data["both_fail"]))


def _halves(base: Arm) -> tuple[np.ndarray, np.ndarray, str]:
    """The base's rate on the episodes that set each task's slice and on those that measure
    its difference, per compared task, and the words for which is which."""
    episodes = base.episodes.sort_values(["task_id", "sample"], kind="stable")
    if int(base.counts["n"].min()) < 2:
        return base.rates, base.rates, (
            "the base's one episode per task both sets the slice and measures it, so the "
            "slices regress toward the mean (a task never passed can only go up)")
    odd = (episodes.groupby("task_id").cumcount() % 2).to_numpy(bool)
    rates = [episodes[mask].groupby("task_id")["passed"].mean()
             .reindex(base.counts.index).to_numpy(float) for mask in (~odd, odd)]
    return rates[0], rates[1], (
        "the base's even-numbered episodes set each task's slice; its odd-numbered ones and "
        "all of the candidate's measure the difference, so no slice is measured on the "
        "episodes that chose it")


def _slice_row(name: str, base: np.ndarray, candidate: np.ndarray,
               labels: np.ndarray | None, seed: int) -> SliceRow:
    difference = candidate - base
    tasks = int(difference.size)
    ties = {"improved": int((difference > 0).sum()), "regressed": int((difference < 0).sum()),
            "tied": int((difference == 0).sum())}
    if tasks == 0:
        return SliceRow(name, 0, None, None, None, None, None, "no task", **ties)
    means = {"base": float(base.mean()), "candidate": float(candidate.mean()),
             "difference": float(difference.mean())}
    if tasks < MEASURED_FROM or (labels is not None and np.unique(labels).size < 2):
        return SliceRow(name, tasks, **means, low=None, high=None,
                        method=f"unmeasured: fewer than {MEASURED_FROM} tasks or 2 groups",
                        **ties)
    interval = difference_interval(difference, groups=labels, seed=seed)
    return SliceRow(name, tasks, **means, low=interval.low, high=interval.high,
                    method=interval.method, **ties)


def slices_section(arms: PerArm[Arm], labels: np.ndarray | None, both_fail: Collection[str],
                   passable: Passable | None, seed: int) -> Slices:
    """The slices of the compared tasks (in the arms' task order; `labels`: their groups, or
    None); `both_fail`: the tasks neither arm ever passed (the flips'); `passable`: what shows
    tasks passable, or None when nothing was run to tell."""
    sets_slice, measures, sliced_by = _halves(arms.base)
    kind = np.select([sets_slice == 0, sets_slice == 1], ["never", "always"], "sometimes")
    rows = [_slice_row(name, measures[kind == name], arms.candidate.rates[kind == name],
                       None if labels is None else labels[kind == name], seed)
            for name in SLICES]
    if passable is None:
        split = BothFail(len(both_fail), None, "not known: no reference checkpoint or canary "
                                               "ran on these tasks")
    else:
        split = BothFail(len(both_fail), len(set(both_fail) & passable.task_ids),
                         passable.evidence)
    return Slices(rows, sliced_by, split)
