"""The episode loop: an agent acts, the environment answers, the budgets decide when it ends.

Pure: no orchestration and no I/O of its own. The loop is written as steps
(heldout.episodes.waits): it yields each call of the agent's and the environment's it waits on,
so the same loop runs in place (`run_loop`) or with hundreds of others on an event loop
(heldout.episodes.engine), and takes the same turns either way. Each turn is one model call
(`Session.act`) that may call one tool. The loop ends on `submit`, on the first
budget spent (turns, tool calls, tokens, cost, wall time), on a refusal or on an error, and says
which (`Outcome.end_reason`). It never scores: what is scored, and whether a budget's end is
scored at all, is the caller's (heldout.episodes.episode).

A single-shot agent (`complete`) is the loop with one turn that submits its completion.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from heldout.agents.protocol import (
    Action,
    Agent,
    Completion,
    EpisodeBrief,
    MultiTurnAgent,
    Observation,
    Session,
)
from heldout.episodes.budgets import BudgetExceeded, EpisodeBudgets
from heldout.episodes.environments import Environment
from heldout.episodes.waits import Steps, Wait, wait_here
from heldout.tasks.patches import MAX_DIFF_BYTES
from heldout.tasks.record import Task

# What a trajectory keeps of each text (messages, observations); the program itself is kept whole.
TEXT_LIMIT = 2000
# The most a tool call's arguments may be, as compact UTF-8 JSON: 1 MiB of code, about, the
# largest diff heldout applies (heldout.tasks.patches). A larger call is not run (the agent is
# told), and its trajectory step keeps TEXT_LIMIT characters of each argument with a marker.
MAX_ARGUMENT_BYTES = MAX_DIFF_BYTES
TIMINGS = ("started_s", "agent_s", "tool_s")
END_REASONS = ("submitted", "max_turns", "max_tool_calls", "max_tokens", "max_cost", "timeout",
               "refused", "error")


def turn_seed(episode_seed: int, turn: int) -> int:
    """The seed of one turn: the episode's own on the first turn (a single-shot agent draws what
    it always drew), then a function of (episode seed, turn) alone, so two checkpoints draw the
    same random numbers at every turn of the same episode."""
    if turn == 1:
        return episode_seed
    digest = hashlib.sha256(f"{episode_seed}\x00turn\x00{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass
class Step:
    """One turn of a trajectory: the model call, the tool it called and what it was told."""

    turn: int
    seed: int
    started_s: float
    agent_s: float
    tool: str | None
    arguments: dict[str, Any]
    message: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    observation: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    tool_s: float = 0.0


@dataclass
class Outcome:
    """How an episode's loop ended. `program` is what the agent submitted (None unless it
    did); `last_program` the last program it gave any tool."""

    end_reason: str
    steps: list[Step]
    program: str | None = None
    last_program: str | None = None
    finish_reason: str = "stop"
    error: str = ""
    tool_calls: int = 0

    @property
    def turns(self) -> int:
        return len(self.steps)

    @property
    def tokens_in(self) -> int:
        return sum(step.tokens_in for step in self.steps)

    @property
    def tokens_out(self) -> int:
        return sum(step.tokens_out for step in self.steps)

    @property
    def cost_usd(self) -> float:
        return sum(step.cost_usd for step in self.steps)

    def trajectory(self) -> list[dict[str, Any]]:
        """What happened, turn by turn: the same for the same episode on every run."""
        return [{key: value for key, value in asdict(step).items() if key not in TIMINGS}
                for step in self.steps]

    def timings(self) -> list[list[float]]:
        """When it happened: [started_s, agent_s, tool_s] per turn (differs run to run)."""
        return [[getattr(step, key) for key in TIMINGS] for step in self.steps]


class SingleShot:
    """A single-shot agent as a session: its one turn submits its completion. An agent whose
    `complete` takes `deadline_s` is given what is left of the episode's wall time; one with
    `complete_async` (a model endpoint's) makes the same call without a thread."""

    def __init__(self, agent: Agent, task: Task, sample: int, seed: int):
        self.agent, self.task, self.sample, self.seed = agent, task, sample, seed
        try:
            self.bounded = "deadline_s" in inspect.signature(agent.complete).parameters
        except (TypeError, ValueError):  # a callable without a signature: called as before
            self.bounded = False

    def act(self, observation: Observation, deadline_s: float) -> Action:
        bound = {"deadline_s": deadline_s} if self.bounded else {}
        return _submitted(self.agent.complete(self.task, self.sample, self.seed, **bound))

    def close(self) -> None:
        pass


class AsyncSingleShot(SingleShot):
    """A single-shot agent with `complete_async`: its one turn awaits it."""

    async def act_async(self, observation: Observation, deadline_s: float) -> Action:
        return _submitted(await self.agent.complete_async(self.task, self.sample, self.seed,
                                                          deadline_s=deadline_s))


def _submitted(completion: Completion) -> Action:
    return Action("submit", {"code": completion.text}, finish_reason=completion.finish_reason,
                  tokens_in=completion.tokens_in, tokens_out=completion.tokens_out,
                  cost_usd=completion.cost_usd)


def begin_session(agent: Agent | MultiTurnAgent, task: Task, sample: int, seed: int,
                  brief: EpisodeBrief) -> Session:
    if hasattr(agent, "begin"):
        return agent.begin(task, sample, seed, brief)
    single = AsyncSingleShot if hasattr(agent, "complete_async") else SingleShot
    return single(agent, task, sample, seed)


def run_loop(agent: Agent | MultiTurnAgent, environment: Environment, budgets: EpisodeBudgets,
             task: Task, sample: int, seed: int) -> Outcome:
    """Run one episode's turns in place until it ends; never raises for anything the agent
    does."""
    return wait_here(loop_steps(agent, environment, budgets, task, sample, seed))


def loop_steps(agent: Agent | MultiTurnAgent, environment: Environment,
               budgets: EpisodeBudgets, task: Task, sample: int, seed: int) -> Steps[Outcome]:
    """One episode's turns as steps (heldout.episodes.waits), ending in its Outcome."""
    brief = EpisodeBrief(tools=environment.tools, budgets=_finite(budgets.remaining()))
    outcome = Outcome("error", [])
    try:
        session = yield Wait("agent", partial(begin_session, agent, task, sample, seed, brief))
    except Exception as error:  # noqa: BLE001 - any agent failure is an episode outcome
        outcome.error = _error_text(error)
        return outcome
    observation = Observation(None, environment.opening(), {"task_id": task.id}, 1, seed,
                              brief.budgets)
    try:
        outcome.end_reason = yield from _turns(session, environment, budgets, observation,
                                               outcome, seed)
    except BudgetExceeded as spent:
        outcome.end_reason = spent.end_reason
    except Exception as error:  # noqa: BLE001 - a tool that failed (the sandbox) is an outcome
        outcome.end_reason, outcome.error = "error", f"environment: {error}"[:2000]
    except BaseException:  # the steps were abandoned (interrupted, cancelled): close in place
        with contextlib.suppress(Exception):
            session.close()
        raise
    outcome.last_program = environment.last_program
    outcome.tool_calls = int(budgets.tool_calls.used)
    with contextlib.suppress(Exception):  # a session that cannot close ended anyway
        yield Wait("agent", session.close)
    return outcome


def _turns(session: Session, environment: Environment, budgets: EpisodeBudgets,
           observation: Observation, outcome: Outcome, seed: int) -> Steps[str]:
    tools = {spec.name for spec in environment.tools}
    clock, started = budgets.wall.clock, budgets.wall.started
    while True:
        if budgets.turns.remaining < 1:
            return "max_turns"
        budgets.wall.check()
        if budgets.wall.remaining <= 0:
            return "timeout"
        turn = observation.turn
        called = clock()
        try:
            action = yield Wait.method("agent", session, "act", observation,
                                       budgets.wall.remaining)
        except Exception as error:  # noqa: BLE001 - any agent failure is an episode outcome
            if budgets.wall.remaining <= 0:
                return "timeout"
            outcome.error = _error_text(error)
            return "error"
        step = Step(turn, observation.seed, called - started, clock() - called, action.tool,
                    action.arguments, action.message[:TEXT_LIMIT], action.tokens_in,
                    action.tokens_out, action.cost_usd)
        outcome.steps.append(step)
        outcome.finish_reason = action.finish_reason
        budgets.turns.spend()
        budgets.wall.check()
        budgets.tokens.spend(action.tokens_out)
        budgets.cost.spend(action.cost_usd)
        if action.finish_reason == "refused":
            return "refused"
        submitted = yield from _answer(action, environment, budgets, tools, step, clock)
        if submitted is not None:
            outcome.program = submitted
            return "submitted"
        observation = Observation(action.tool, step.observation, step.data, turn + 1,
                                  turn_seed(seed, turn + 1), _finite(budgets.remaining()))


def _answer(action: Action, environment: Environment, budgets: EpisodeBudgets,
            tools: set[str], step: Step, clock: Any) -> Steps[str | None]:
    """Answer the action's tool call in `step`; the submitted program, if it submitted."""
    if action.problem:  # a call that could not be read is a call, and spends one
        budgets.tool_calls.spend()
        step.observation, step.data = action.problem[:TEXT_LIMIT], {"error": "malformed call"}
        return None
    if action.tool is None:
        step.observation = (f"No tool was called. Call one of: {', '.join(sorted(tools))}; "
                            "submit ends the episode.")
        step.data = {"error": "no tool call"}
        return None
    budgets.tool_calls.spend()
    size = argument_bytes(action.arguments)
    if size > MAX_ARGUMENT_BYTES:
        step.arguments = cut_arguments(action.arguments)
        step.observation = (f"The arguments of this call are {size:,} bytes as JSON; a tool "
                            f"call takes at most {MAX_ARGUMENT_BYTES:,} (1 MiB). It was not "
                            "run: send less code.")
        step.data = {"error": "arguments too large", "bytes": size, "limit": MAX_ARGUMENT_BYTES}
        return None
    if action.tool not in tools:
        step.observation = (f"There is no tool {action.tool[:100]!r}; the tools are "
                            f"{', '.join(sorted(tools))}.")
        step.data = {"error": "unknown tool"}
        return None
    began = clock()
    result = yield Wait("sandbox", partial(environment.call, action.tool, action.arguments))
    step.tool_s = clock() - began
    step.observation, step.data = result.text[:TEXT_LIMIT], result.data
    return result.submitted


def argument_bytes(arguments: dict[str, Any]) -> int:
    """The size of a call's arguments as compact UTF-8 JSON (lone surrogates counted as UTF-8
    would write them); what cannot be written as JSON at all counts as too large."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        return MAX_ARGUMENT_BYTES + 1
    return len(text.encode("utf-8", "surrogatepass"))


def cut_arguments(arguments: dict[str, Any]) -> dict[str, str]:
    """What a trajectory keeps of arguments too large to run: the first TEXT_LIMIT characters
    of each (a value that is not a string, as JSON), and how long it was."""
    kept = {}
    for key, value in list(arguments.items())[:20]:
        try:
            text = value if isinstance(value, str) else json.dumps(value, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = f"({type(value).__name__})"
        cut = f" [... cut: {len(text):,} characters in all]" if len(text) > TEXT_LIMIT else ""
        kept[str(key)[:100]] = text[:TEXT_LIMIT] + cut
    return kept


def _finite(remaining: dict[str, float]) -> dict[str, float]:
    return {kind: value for kind, value in remaining.items() if math.isfinite(value)}


def _error_text(error: Exception) -> str:
    return f"agent: {type(error).__name__}: {error}"[:2000]
