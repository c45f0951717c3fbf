"""The agent protocol: what an agent is given (task, context) and what it returns.

Two shapes of agent share one episode loop (heldout.episodes.loop):
- a *single-shot* agent has `complete(task, sample, seed) -> Completion`: the loop takes its one
  completion as a `submit`;
- a *multi-turn* agent has `begin(task, sample, seed, brief) -> Session`: each `Session.act`
  is one model call (one turn) that returns an `Action`, a call of one of the episode's tools,
  and is answered with an `Observation`, until the agent submits or a budget ends the episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class ToolSpec:
    """A tool the environment offers: its name, what it does, and the JSON schema of its
    arguments (the OpenAI `tools` shape)."""

    name: str
    description: str
    parameters: dict[str, Any]

    def as_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class Action:
    """One turn of a multi-turn agent: at most one tool call, and what the model call cost.
    `tool` None is a turn that called no tool (the environment says so and the episode goes
    on); `problem` is set when the model's call could not be read (malformed arguments), and
    the environment answers with it instead of running the tool."""

    tool: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    finish_reason: str = "stop"
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    call_id: str = ""
    problem: str = ""


@dataclass(frozen=True)
class Observation:
    """What the agent is told after a turn: `text` as a developer would read it, `data` the
    same as plain data (e.g. {"passed": false, "failures": [...]}). `turn` is the number of the
    turn about to be taken, `seed` its seed, `remaining` what is left of each budget."""

    tool: str | None
    text: str
    data: dict[str, Any]
    turn: int
    seed: int
    remaining: dict[str, float]


@dataclass(frozen=True)
class EpisodeBrief:
    """What a multi-turn agent is told when its episode begins: the tools and the budgets."""

    tools: tuple[ToolSpec, ...]
    budgets: dict[str, float]


class Session(Protocol):
    def act(self, observation: Observation | None, deadline_s: float) -> Action:
        """One model call. On the first turn `observation` carries the task prompt under the
        harness template (its `tool` is None); the call must return within `deadline_s`
        seconds (what is left of the episode's wall time)."""
        ...

    def close(self) -> None:
        """The episode ended (however it ended); release what it held."""
        ...


class MultiTurnAgent(Protocol):
    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief) -> Session:
        """A new episode. `seed` is the episode's, as for `Agent.complete`; each turn's seed
        comes with its observation."""
        ...


class Agent(Protocol):
    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        """One episode. `seed` depends on (harness seed, task, sample), never on the checkpoint,
        so two checkpoints draw the same random numbers for the same episode. An agent whose
        call can be cut short (a request, a process) also takes `deadline_s`, a keyword: the
        seconds left of the episode's wall time (`agent_timeout_s`), which the episode loop
        passes and the whole call, retries included, must keep to."""
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


def observation_message(observation: Observation) -> dict[str, Any]:
    """An observation as the step protocol sends it (JSON)."""
    return {"type": "observation", "tool": observation.tool, "text": observation.text,
            "data": observation.data, "turn": observation.turn, "seed": observation.seed,
            "remaining": observation.remaining}


def task_message(task: Task, sample: int, seed: int, brief: EpisodeBrief) -> dict[str, Any]:
    """The first message of the step protocol: the task as an agent may see it, the tools and
    the budgets."""
    return {"type": "task", "task": task_view(task, sample, seed),
            "tools": [tool.as_openai()["function"] for tool in brief.tools],
            "budgets": brief.budgets}


_ACTION_FIELDS = {"tool", "arguments", "message", "finish_reason", "tokens_in", "tokens_out",
                  "cost_usd"}


def action_from_message(message: Any) -> Action:
    """An action the step protocol received: {"tool": name, "arguments": {...}} and optionally
    "message", "finish_reason", "tokens_in", "tokens_out", "cost_usd". A malformed one is an
    Action whose `problem` says what is wrong (the episode goes on; the agent is told)."""
    if not isinstance(message, dict):
        return Action(None, problem=f"an action is a JSON object, not {type(message).__name__}")
    unknown = set(message) - _ACTION_FIELDS
    tool, arguments = message.get("tool"), message.get("arguments", {})
    problems = [f"unknown fields {sorted(unknown)}"] if unknown else []
    if tool is not None and not isinstance(tool, str):
        problems.append("tool must be a string or null")
    if not isinstance(arguments, dict):
        problems.append("arguments must be an object")
    counts = {}
    for name in ("tokens_in", "tokens_out"):
        value = message.get(name, 0)
        if type(value) is not int or not 0 <= value <= 10**9:
            problems.append(f"{name} must be an integer in [0, 10**9]")
            value = 0
        counts[name] = value
    cost = message.get("cost_usd", 0.0)
    if type(cost) not in (int, float) or not 0 <= cost <= 10**6:
        problems.append("cost_usd must be a number in [0, 10**6]")
        cost = 0.0
    text = message.get("message", "")
    finish = message.get("finish_reason", "stop")
    if not isinstance(text, str) or finish not in FINISH_REASONS:
        problems.append(f"message must be a string and finish_reason one of {FINISH_REASONS}")
        text, finish = "", "stop"
    return Action(
        tool if isinstance(tool, str) else None,
        arguments if isinstance(arguments, dict) else {},
        message=text, finish_reason=finish, cost_usd=float(cost),
        problem="; ".join(problems), **counts,
    )
