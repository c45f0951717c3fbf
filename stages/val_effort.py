"""Effort beside success on val (issue 41, item 1): each checkpoint's mean spend per episode
(tokens, turns, tool calls, cost) and, for every checkpoint but the base, its paired difference
from the base over the val tasks or groups, as the report gives the test split's. Read from the
rollout files a column at a time, so the score stage's tables stay the few columns it counts.

The clocks (heldout.report.effort.CLOCKS) change from run to run: they are logged to MLflow and
kept out of the scores, whose digest the selection and the test stage check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from heldout.report.effort import CLOCKS, MEASURES, Effort, effort_of, per_task_effort
from heldout.report.sections import PerArm
from stages.catalog import rollout_file


def _per_task(root: Path, name: str, task_ids: Sequence[str]) -> pd.DataFrame:
    path = root / rollout_file(name)
    present = set(pq.read_schema(path).names)
    columns = [column for column, _words in MEASURES if column in present]
    return per_task_effort(pd.read_parquet(path, columns=["task_id", *columns]), task_ids)


def val_effort(root: Path, checkpoints: Sequence[str], base: str | None,
               task_ids: Sequence[str], groups: Mapping[str, str]) -> dict[str, Effort]:
    """Each checkpoint against the base (the base against itself: its means, no difference);
    none when the base is not among the checkpoints."""
    if base not in checkpoints:
        return {}
    means = {name: _per_task(root, name, task_ids) for name in checkpoints}
    return {name: effort_of(PerArm(means[base], means[name]), task_ids, groups)
            for name in checkpoints}


def effort_record(effort: Effort) -> dict[str, Any]:
    """The scores' `effort` of one checkpoint: per measure its mean per episode and, against
    the base, the difference with its interval and the ratio; clocks left out."""
    return {"measures": {row.measure: {"mean": row.candidate, "base": row.base,
                                       "difference": row.difference, "low": row.low,
                                       "high": row.high, "ratio": row.ratio,
                                       "tasks": row.tasks, "method": row.method}
                         for row in effort.rows if row.measure not in CLOCKS},
            "not_recorded": [m for m in effort.not_recorded if m not in CLOCKS]}
