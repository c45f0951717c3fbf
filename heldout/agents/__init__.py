"""Agents: whatever turns a task into a completion. One protocol, many kinds.

`params.checkpoints.<name>` is `{agent: <kind>, ...settings}`; `make_agent` validates the
settings against the kind's own model, so a typo names the checkpoint and the field.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from heldout.errors import ParamsError
from heldout.tasks import Task

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


# kind -> "module:factory"; a factory takes (settings dict, AgentContext) and returns an Agent.
AGENT_KINDS = {
    "demo": "heldout.agents.demo:make",
    "oracle": "heldout.agents.canaries:make_oracle",
    "blind": "heldout.agents.canaries:make_blind",
    "openai": "heldout.agents.openai:make",
    "command": "heldout.agents.command:make",
    "python": "heldout.agents.python:make",
    "replay": "heldout.agents.replay:make",
}


def make_agent(name: str, settings: dict[str, Any], context: AgentContext) -> Agent:
    """The agent for checkpoint `name` from its params entry."""
    kind = settings.get("agent")
    if kind not in AGENT_KINDS:
        raise ParamsError(
            f"params.yaml: checkpoints.{name}.agent: {kind!r} is not an agent kind; "
            f"choose one of {', '.join(AGENT_KINDS)}"
        )
    module_name, factory = AGENT_KINDS[kind].split(":")
    module = importlib.import_module(module_name)
    rest = {key: value for key, value in settings.items() if key != "agent"}
    try:
        return getattr(module, factory)(rest, context)
    except ValidationError as error:
        lines = [
            f"params.yaml: checkpoints.{name}.{'.'.join(map(str, d['loc']))}: {d['msg']}"
            for d in error.errors()
        ]
        raise ParamsError("\n".join(lines)) from None


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
