"""The embedded default's multi-turn policies: scripted, so every stage can exercise episodes
with tools offline, and so budgets and the public-versus-hidden alarm have effects to measure.

Every draw comes from the turn's seed (heldout.episodes.loop.turn_seed), never from the
checkpoint, so two demo checkpoints draw the same random numbers at every turn (common random
numbers), as single-shot ones do.

- `tester`: reads the task (a turn without a tool), writes a draft, runs the public tests,
  revises after each failure (each revision more likely right, by `revision_gain` in logit) and
  submits the first program the public tests pass. It never submits untested code, so a turn
  budget that cuts its revisions short ends its episode unsubmitted: its number falls with
  max_turns.
- `guesser`: draws an independent program each turn and runs the public tests on it; it submits
  the first that passes them, or its last guess on its last turn. More turns, more guesses.
- `hacker`: learned the public tests instead of the task. It submits a lookup table from the
  public tests' inputs to their expected outputs that returns None for anything else: it passes
  the public tests and fails the hidden ones.
"""

from __future__ import annotations

import ast
from typing import Any

from heldout.agents.canaries import body_indent
from heldout.agents.demo import DemoAgent, DemoSettings
from heldout.agents.protocol import (
    Action,
    AgentContext,
    EpisodeBrief,
    Observation,
)
from heldout.agents.repository_policies import RepositorySession
from heldout.tasks.kinds import task_kind
from heldout.tasks.python_program import parse_cases
from heldout.tasks.record import Task

__all__ = ["DemoSettings", "make"]


def make(settings: DemoSettings, context: AgentContext) -> DemoAgent | MultiTurnDemo:
    if settings.policy == "single":
        return DemoAgent(settings)
    return MultiTurnDemo(DemoAgent(settings))


class MultiTurnDemo:
    def __init__(self, agent: DemoAgent):
        self.agent = agent

    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief
              ) -> DemoSession | RepositorySession:
        tools = {tool.name for tool in brief.tools}
        can_test = "run_public_tests" in tools and bool(task.public_tests)
        if task.kind == "repository":
            return RepositorySession(self.agent, task, can_test, self.agent.settings.policy)
        return DemoSession(self.agent, task, can_test)


class DemoSession:
    def __init__(self, agent: DemoAgent, task: Task, can_test: bool):
        self.agent, self.task, self.can_test = agent, task, can_test
        self.policy = agent.settings.policy
        self.revisions = 0
        self.tried = ""

    def act(self, observation: Observation, deadline_s: float) -> Action:
        return getattr(self, f"_{self.policy}")(observation)

    def close(self) -> None:
        pass

    def _tester(self, observation: Observation) -> Action:
        if observation.turn == 1:
            return Action(None, message="Reading the task before writing code.",
                          tokens_out=8)
        if observation.tool == "run_public_tests":
            if observation.data.get("passed"):
                return self._call("submit", self.tried)
            self.revisions += 1
        program = self.agent.draw_program(
            self.task, observation.seed, self.agent.settings.revision_gain * self.revisions)
        return self._call("run_public_tests" if self.can_test else "submit", program)

    def _guesser(self, observation: Observation) -> Action:
        if observation.tool == "run_public_tests" and observation.data.get("passed"):
            return self._call("submit", self.tried)
        program = self.agent.draw_program(self.task, observation.seed)
        last_turn = observation.remaining.get("turns", 1) <= 1
        return self._call("submit" if last_turn or not self.can_test else "run_public_tests",
                          program)

    def _hacker(self, observation: Observation) -> Action:
        if observation.tool == "run_public_tests":
            return self._call("submit", self.tried)
        table = lookup_table_body(self.task)
        return self._call("run_public_tests" if self.can_test else "submit", table)

    def _call(self, tool: str, program: str) -> Action:
        self.tried = program
        return Action(tool, {"code": program}, tokens_out=len(program.split()))


def lookup_table_body(task: Task) -> str:
    """A function body that returns each public test's expected output for its inputs and None
    for anything else (for a whole-program kind, a program that prints the output of each
    public input and nothing otherwise): what a policy that learned the visible checks instead
    of the task writes."""
    if not task_kind(task.kind).completes_prompt:
        seen = {case["input"]: case["output"] for case in parse_cases(task.public_tests or "[]")}
        return f"import sys\nsys.stdout.write({seen!r}.get(sys.stdin.read(), ''))\n"
    indent = body_indent(task)
    names = _parameter_names(task)
    table = {repr(inputs): expected for inputs, expected in _public_cases(task)}
    key = f"repr(({', '.join(names)}{',' if len(names) == 1 else ''}))"
    return (f"{indent}_seen = {{{', '.join(f'{k!r}: {v}' for k, v in table.items())}}}\n"
            f"{indent}return _seen.get({key})\n")


def _parameter_names(task: Task) -> list[str]:
    for node in ast.walk(ast.parse(task.prompt)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.name == task.entry_point:
            return [arg.arg for arg in (*node.args.posonlyargs, *node.args.args)]
    return []


def _public_cases(task: Task) -> list[tuple[tuple[Any, ...], str]]:
    """(inputs, expected output's source) of each public assert of the shapes
    `assert ENTRY(args) == EXPECTED` and `assert abs(ENTRY(args) - EXPECTED) < TOLERANCE`."""
    cases = []
    for node in ast.parse(task.public_tests or "").body:
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        left, right = node.test.left, node.test.comparators[0]
        if isinstance(left, ast.Call) and getattr(left.func, "id", None) == "abs" and \
                left.args and isinstance(left.args[0], ast.BinOp):
            left, right = left.args[0].left, left.args[0].right
        if not (isinstance(left, ast.Call) and getattr(left.func, "id", None) == task.entry_point):
            continue
        try:
            inputs = tuple(ast.literal_eval(arg) for arg in left.args)
        except ValueError:
            continue
        cases.append((inputs, ast.unparse(right)))
    return cases
