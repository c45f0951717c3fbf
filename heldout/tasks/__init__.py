"""Tasks: the record (`record`), its kinds (`kinds`, one module each), where tasks come from
(`sources`), the split by group (`split`). The names below are the public API the README
documents."""

from heldout.tasks.kinds import TASK_KINDS
from heldout.tasks.record import NonBlank, Task, TaskRuntime, tasks_digest
from heldout.tasks.sources import (
    HUMANEVAL,
    TasksConfig,
    load_humaneval,
    load_jsonl,
    load_jsonl_bytes,
    load_tasks,
)

__all__ = [
    "HUMANEVAL", "TASK_KINDS", "NonBlank", "Task", "TaskRuntime", "TasksConfig", "load_humaneval",
    "load_jsonl", "load_jsonl_bytes", "load_tasks", "tasks_digest",
]
