"""The agent protocol: what an agent is given (task, context) and what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from heldout.tasks.record import Task

FINISH_REASONS = ("stop", "length", "refused")


@dataclass(frozen=True)
class Completion:
    """What an agent produced for one episode. `finish_reason == "length"` marks a completion
    cut by the token budget; "refused" one the model declined to give."""

    text: str
    finish_reason: str = "stop"
    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 1
    cost_usd: float = 0.0


class Agent(Protocol):
    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        """One episode. `seed` depends on (harness seed, task, sample), never on the checkpoint,
        so two checkpoints draw the same random numbers for the same episode."""
        ...


class AgentSettings(BaseModel):
    """Base of every agent kind's settings: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class AgentContext:
    """What an agent may know about the harness it runs under."""

    template: str
    temperature: float
    top_p: float
    max_tokens: int
    max_turns: int
    timeout_s: float
    project_root: str


def task_view(task: Task, sample: int, seed: int) -> dict[str, Any]:
    """What an external agent is shown of a task: never the hidden tests or the reference."""
    view = {
        "id": task.id,
        "prompt": task.prompt,
        "entry_point": task.entry_point,
        "kind": task.kind,
        "sample": sample,
        "seed": seed,
    }
    if task.public_tests:
        view["public_tests"] = task.public_tests
    return view
