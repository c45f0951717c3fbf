"""The harness canaries: `oracle` must pass every task, `blind` must pass none.

They run through the same harness and sandbox as the checkpoints; if either misbehaves, the
sandbox or the tasks are broken, and that must never pass for a bad (or good) model.
"""

from __future__ import annotations

from collections.abc import Callable

from heldout.agents.protocol import AgentContext, AgentSettings, Completion
from heldout.errors import AgentError
from heldout.tasks.record import Task


class OracleAgent:
    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        if task.reference is None:
            raise AgentError(f"task {task.id}: no reference solution for the oracle canary")
        return Completion(text=task.reference)


class BlindAgent:
    """An answer that does nothing, in the shape the task's kind asks for: a function body of
    `pass` indented like the function it completes; a program that reads its input and prints
    nothing."""

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        if task.kind not in BLIND_ANSWERS:
            raise AgentError(f"task {task.id}: no blind answer for kind {task.kind!r}")
        return Completion(text=BLIND_ANSWERS[task.kind](task))


BLIND_ANSWERS: dict[str, Callable[[Task], str]] = {
    "python-function": lambda task: f"{body_indent(task)}pass\n",
    "python-program": lambda task: "import sys\n\nsys.stdin.read()\n",
    "repository": lambda task: "",  # an empty diff: the repository as it was
}


def body_indent(task: Task) -> str:
    for line in reversed(task.prompt.splitlines()):
        stripped = line.lstrip()
        if stripped.startswith(("def ", "async def ")) and f"{task.entry_point}(" in stripped:
            return line[: len(line) - len(stripped)] + "    "
    return "    "


def make_oracle(settings: AgentSettings, context: AgentContext) -> OracleAgent:
    return OracleAgent()


def make_blind(settings: AgentSettings, context: AgentContext) -> BlindAgent:
    return BlindAgent()
