"""Effort beside success (issue 41, item 1): what each arm spent per episode (tokens in and out,
turns, tool calls, the agent's seconds, the judge's CPU seconds, cost), and the candidate's paired
difference from the base with its interval over tasks, or over groups where tasks come in groups,
as the pass rate's is. A policy can raise its success rate by spending more of each: "+5 points
at 2.3x the tokens" must be readable beside the verdict.

A measure is reported when both arms' rows hold it for some compared task; a task where either
arm has no value (a row from a file that does not record it) is left out of that measure alone,
and the row says on how many tasks it rests. A measure no row of either arm recorded (all zero,
as a demo agent's tokens; or missing, as the test split's outcome files' clocks) is listed as
not recorded, never shown as 0 against 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from heldout.report.sections import PerArm, _FlatRecord
from heldout.statistics.bca import bca_interval
from heldout.statistics.grouping import group_labels

# (rollout column, words), in the order a reader weighs them.
MEASURES = (("tokens_out", "output tokens"), ("tokens_in", "input tokens"),
            ("turns", "turns"), ("tool_calls", "tool calls"), ("agent_s", "agent seconds"),
            ("exec_cpu_s", "judge CPU seconds"), ("cost_usd", "cost (USD)"))
RESAMPLES = 2000
# Wall-clock and CPU seconds: measured, not reproduced, so they go to MLflow and never into a
# file whose digest a later stage checks (the val scores, the test results).
CLOCKS = ("agent_s", "exec_cpu_s")


@dataclass(frozen=True)
class EffortRow(_FlatRecord):
    """One measure: each arm's mean per episode (averaged over tasks, as pass@1 is), the
    candidate's paired difference with its interval, their ratio, and the tasks it rests on."""

    measure: str
    words: str
    base: float
    candidate: float
    difference: float
    low: float | None  # None: one task or group, no interval
    high: float | None
    method: str
    ratio: float | None  # candidate / base; None when the base spent none
    tasks: int


@dataclass(frozen=True)
class Effort:
    rows: list[EffortRow]
    not_recorded: list[str]  # measures neither arm's rows hold

    def to_json(self) -> dict:
        return {"rows": [row.to_json() for row in self.rows],
                "not_recorded": self.not_recorded}

    @classmethod
    def from_json(cls, data: Mapping) -> Effort:
        return cls([EffortRow.from_json(row) for row in data["rows"]], data["not_recorded"])

    def metrics(self) -> dict[str, float]:
        """metrics/test.json's effort: each arm's mean per episode and the difference."""
        return {key: value for row in self.rows for key, value in (
            (f"base_{row.measure}", row.base), (f"candidate_{row.measure}", row.candidate),
            (f"{row.measure}_difference", row.difference))}

    def line(self, names: PerArm[str]) -> str | None:
        """The headline block's one line, or None when nothing was recorded."""
        if not self.rows:
            return None
        parts = [f"{row.words} {_ratio(row)} ({effort_number(row.candidate)} vs "
                 f"{effort_number(row.base)}, {effort_signed(row.difference)} "
                 f"{effort_bounds(row)})" for row in self.rows]
        return f"Effort per episode, {names.candidate} against {names.base}: " + "; ".join(parts)


def effort_number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def effort_signed(value: float) -> str:
    return ("+" if value >= 0 else "-") + effort_number(abs(value))


def effort_bounds(row: EffortRow) -> str:
    if row.low is None or row.high is None:
        return "(no interval: one unit)"
    return f"[{effort_signed(row.low)}, {effort_signed(row.high)}]"


def _ratio(row: EffortRow) -> str:
    return "no base spend" if row.ratio is None else f"{row.ratio:.2f}x"


def per_task_effort(table: pd.DataFrame, task_ids: Sequence[str]) -> pd.DataFrame:
    """Each task's mean per episode of every measure the table holds (NaN where its rows give
    none), tasks × measures in the order of `task_ids`."""
    columns = [column for column, _words in MEASURES if column in table.columns]
    values = table[columns].apply(pd.to_numeric, errors="coerce").astype(float)
    return values.groupby(table["task_id"].astype(str).to_numpy()).mean().reindex(
        [str(task) for task in task_ids])


def effort_section(tables: PerArm[pd.DataFrame], task_ids: Sequence[str],
                   groups: Mapping[str, str] | None = None, seed: int = 0) -> Effort:
    """Each measure both arms' rows hold, over the compared `task_ids`."""
    return effort_of(tables.map(lambda table: per_task_effort(table, task_ids)), task_ids,
                     groups, seed)


def effort_of(means: PerArm[pd.DataFrame], task_ids: Sequence[str],
              groups: Mapping[str, str] | None = None, seed: int = 0) -> Effort:
    """effort_section from each arm's per_task_effort over the same `task_ids`."""
    rows, not_recorded = [], []
    labels = group_labels(task_ids, groups)
    for column, words in MEASURES:
        if not all(column in arm.columns for arm in means):
            not_recorded.append(column)
            continue
        base, candidate = (arm[column].to_numpy() for arm in means)
        both = np.isfinite(base) & np.isfinite(candidate)
        if not both.any() or not (np.any(base[both] != 0) or np.any(candidate[both] != 0)):
            not_recorded.append(column)
            continue
        difference = candidate[both] - base[both]
        estimate, low, high, method = _interval(
            difference, None if labels is None else labels[both], seed)
        base_mean, candidate_mean = float(base[both].mean()), float(candidate[both].mean())
        rows.append(EffortRow(
            measure=column, words=words, base=base_mean, candidate=candidate_mean,
            difference=estimate, low=low, high=high, method=method,
            ratio=candidate_mean / base_mean if base_mean > 0 else None,
            tasks=int(both.sum())))
    return Effort(rows, not_recorded)


def _interval(difference: np.ndarray, labels: np.ndarray | None,
              seed: int) -> tuple[float, float | None, float | None, str]:
    if difference.size < 2 or (labels is not None and len(set(labels)) < 2):
        return float(difference.mean()), None, None, "one unit: no interval"
    interval = bca_interval(difference, groups=labels, n_boot=RESAMPLES, seed=seed)
    return interval.estimate, interval.low, interval.high, interval.method
