"""The split stage's tasks per split before it has run: what `heldout plan` counts and where
`heldout probe` takes a local agent's trial tasks (train only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def split_to_come(root: Path, params: dict[str, Any], command: str) -> dict[str, list[Any]]:
    """The split stage's tasks per split, computed here from the task source (nothing
    written); `command` names who asks, in the error a sealed source gets."""
    from heldout.custody.task_source import is_sealed_source
    from heldout.errors import ParamsError
    from heldout.tasks.sources import TasksConfig, load_tasks
    from heldout.tasks.split import SplitConfig, assign
    from stages.common import section

    config = section(params, "split", SplitConfig)
    tasks_config = section(params, "tasks", TasksConfig)
    if is_sealed_source(tasks_config.source):
        raise ParamsError(f"{command}: the task source is sealed; run the split stage first "
                          "(heldout stage split), and it reads the split's files")
    return assign(load_tasks(tasks_config.resolve(root)), config.salt, config.fractions,
                  config.hold_out)
