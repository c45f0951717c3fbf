"""Which tasks share a group, as the labels the intervals and tests resample by.

Tasks of one group (one template, one repository: the split key) are not independent, so every
interval over them resamples groups, not tasks (heldout.statistics.bca). The pipeline knows
groups as a mapping from task id to group key (Task.group, a groups file); the statistics take
one label per task, in the order of the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


def group_labels(task_ids: Iterable[str], groups: Mapping[str, str] | None) -> np.ndarray | None:
    """Per task id, its group's label (a task `groups` omits is its own group); None when there
    are no groups or every task is its own group, where the tasks themselves are the units and
    the ungrouped interval (Wilson for binary tasks, scipy's BCa) applies unchanged."""
    if groups is None:
        return None
    labels = np.array([groups.get(task, task) for task in task_ids])
    return None if np.unique(labels).size == labels.size else labels
