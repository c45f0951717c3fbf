"""An episode's budgets: what its agent may spend (turns, tool calls, tokens, cost, wall time)
and the limits its programs run under (time and memory in the sandbox).

The harness sets them all; a task's runtime.timeout_s and runtime.memory_mb override the
harness's limits for that task's programs, and `exec_limits` is the one place that says so.
An agent loop spends from a `Limit` (or reads a `WallTime`) and stops on `BudgetExceeded`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from heldout.episodes.harness import Harness
from heldout.tasks.record import Task


class BudgetExceeded(Exception):
    """An episode spent more of one budget than it had: an outcome of the episode, not an error
    of heldout's. `kind` names the budget: "turns", "tool_calls", "tokens", "cost_usd" or
    "wall_s"; `end_reason` is what a rollout row records when it ends an episode."""

    def __init__(self, kind: str, limit: float, used: float):
        self.kind = kind
        self.limit = limit
        self.used = used
        super().__init__(f"{kind} budget exceeded: {used:g} spent of {limit:g}")

    @property
    def end_reason(self) -> str:
        return END_REASONS[self.kind]


END_REASONS = {"turns": "max_turns", "tool_calls": "max_tool_calls", "tokens": "max_tokens",
               "cost_usd": "max_cost", "wall_s": "timeout"}


class _Budget:
    """What every budget offers, given its `kind`, `limit` and `used`."""

    kind: str
    limit: float
    used: float

    @property
    def remaining(self) -> float:
        return max(self.limit - self.used, 0.0)

    def check(self) -> None:
        """Raise BudgetExceeded if more than the limit was spent."""
        if self.used > self.limit:
            raise BudgetExceeded(self.kind, self.limit, self.used)


@dataclass
class Limit(_Budget):
    """A budget spent in units the episode counts: turns, tokens."""

    kind: str
    limit: float
    used: float = 0

    def spend(self, amount: float = 1) -> None:
        """Count `amount` as spent; spending past the limit raises BudgetExceeded (spending up
        to it exactly does not)."""
        self.used += amount
        self.check()


@dataclass
class WallTime(_Budget):
    """A budget of seconds, spent by the clock from the moment it is made."""

    limit: float
    clock: Callable[[], float] = time.monotonic
    kind: str = field(default="wall_s", init=False)
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def used(self) -> float:
        return self.clock() - self.started


@dataclass(frozen=True)
class ExecLimits:
    """What one program may take in the sandbox."""

    timeout_s: float
    memory_mb: int


def exec_limits(task: Task, given: ExecLimits) -> ExecLimits:
    """The limits the task's programs run under: `given`, less what the task's runtime sets."""
    runtime = task.runtime
    if runtime is None:
        return given
    return ExecLimits(runtime.timeout_s or given.timeout_s, runtime.memory_mb or given.memory_mb)


@dataclass
class EpisodeBudgets:
    """The budgets of one episode of one task under one harness. `tokens` is the harness's
    max_tokens, what the agent may generate in the episode (a single-turn agent asks for that
    many in its one request); `cost` is max_cost_usd (unlimited when unset); `wall` is
    agent_timeout_s, the whole episode's, the agent's calls and its tools' alike."""

    turns: Limit
    tool_calls: Limit
    tokens: Limit
    cost: Limit
    wall: WallTime
    execution: ExecLimits

    def remaining(self) -> dict[str, float]:
        """What is left of each budget, by kind (what an agent is told every turn)."""
        return {budget.kind: budget.remaining for budget in
                (self.turns, self.tool_calls, self.tokens, self.cost, self.wall)}

    @classmethod
    def start(
        cls, harness: Harness, task: Task, clock: Callable[[], float] = time.monotonic
    ) -> EpisodeBudgets:
        """Fresh budgets, their wall clock running from now."""
        return cls(
            turns=Limit("turns", harness.max_turns),
            tool_calls=Limit("tool_calls", harness.max_tool_calls),
            tokens=Limit("tokens", harness.max_tokens),
            cost=Limit("cost_usd", harness.max_cost_usd or math.inf),
            wall=WallTime(harness.agent_timeout_s, clock),
            execution=exec_limits(task, ExecLimits(harness.timeout_s, harness.sandbox.memory_mb)),
        )
