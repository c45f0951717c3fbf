"""Which group each compared task belongs to, from every source that says: the task source's
own groups, a `group` column of a rollout table, a groups file. The paired test and interval
resample groups, not tasks, so tasks of one family (one repository, one template) count once.

Sources must agree: a task two sources put in different groups is an error naming both, never
a silent choice of one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from heldout.json_lines import LineError, read_line
from heldout.report.inputs import ReportInputError

GROUPS_SHAPE = '{"task_id": ..., "group": ...}'


def table_groups(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(task, group) from a rollout table's `group` column; none without one. Rows without a
    group say nothing."""
    if "group" not in table.columns:
        return []
    named = table[["task_id", "group"]].dropna().drop_duplicates()
    return [(str(task), str(group)) for task, group in named.itertuples(index=False)]


def read_groups_file(path: Path) -> list[tuple[str, str]]:
    """(task, group) from a JSON Lines file of GROUPS_SHAPE objects; every bad line named."""
    try:
        raw_lines = path.read_bytes().splitlines()
    except OSError as error:
        raise ReportInputError(f"{path}: cannot read the groups file: {error.strerror}") from None
    pairs, problems = [], []
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            record = read_line(raw)
        except LineError as error:
            problems.append(f"{path}:{number}: {error}")
            continue
        if not (isinstance(record, dict) and isinstance(record.get("task_id"), str)
                and isinstance(record.get("group"), str) and record["group"]):
            problems.append(f"{path}:{number}: not {GROUPS_SHAPE} with string values")
            continue
        pairs.append((record["task_id"], record["group"]))
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ReportInputError(f"the groups file has bad lines: {shown}{more}")
    return pairs


def task_groups(sources: Sequence[tuple[str, Iterable[tuple[str, str]]]]) -> dict[str, str] | None:
    """One group per task from every (label, pairs) source; None when no source names any.
    A task given two groups, by one source or two, is a ReportInputError naming both."""
    groups: dict[str, tuple[str, str]] = {}  # task -> (group, the source that said so)
    for label, pairs in sources:
        for task, group in pairs:
            known = groups.setdefault(task, (group, label))
            if known[0] != group:
                raise ReportInputError(
                    f"task {task!r} is in group {known[0]!r} by {known[1]} and in group "
                    f"{group!r} by {label}: one task, one group")
    return {task: group for task, (group, _label) in groups.items()} or None


def compare_groups(source: tuple[str, Iterable[tuple[str, str]]],
                   tables: Mapping[Path, pd.DataFrame],
                   given: tuple[str, Iterable[tuple[str, str]]]) -> dict[str, str] | None:
    """`heldout compare`'s groups: the task source's and the groups file's (each a label and
    its (task, group) pairs) and each rollout table's `group` column, checked to agree
    (task_groups)."""
    return task_groups([
        source,
        *((f"the 'group' column of {path}", table_groups(table)) for path, table in tables.items()),
        given,
    ])
