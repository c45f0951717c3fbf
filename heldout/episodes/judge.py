"""Scoring a completion: the task's hidden tests, run by a judge the completion cannot reach.

The task's kind builds the program (heldout.tasks.kinds); for `python-function` that is a
judged program (heldout/sandbox/roles.py): the completion runs in a candidate process that
never holds the tests, and a judge process of another user runs the tests against it through
plain-data calls. The sandbox returns the judge's verdict; nothing the completion prints,
exits with or leaves behind can pass it.
"""

from __future__ import annotations

from collections.abc import Iterable

from heldout.episodes.budgets import ExecLimits, exec_limits
from heldout.errors import SandboxError
from heldout.sandbox.protocol import ExecResult, Program, Sandbox
from heldout.tasks.kinds import TASK_KINDS, task_kind
from heldout.tasks.record import Task


def build_program(task: Task, completion: str) -> Program:
    """The program that judges `completion` against the task's tests, as the task's kind
    builds it."""
    if task.kind not in TASK_KINDS:
        raise SandboxError(f"task {task.id}: no scorer for kind {task.kind!r}")
    return task_kind(task.kind).build_program(task, completion)


def score(
    task: Task, completion: str, sandbox: Sandbox, *, timeout_s: float, memory_mb: int
) -> ExecResult:
    """Run one completion against the task's hidden tests."""
    return score_many([(task, completion)], sandbox, timeout_s=timeout_s, memory_mb=memory_mb)[0]


def score_many(
    pairs: Iterable[tuple[Task, str]], sandbox: Sandbox, *, timeout_s: float, memory_mb: int
) -> list[ExecResult]:
    """Score (task, completion) pairs in parallel; results in the order of `pairs`. A task's
    runtime.timeout_s and runtime.memory_mb override the limits given here."""
    pairs = list(pairs)
    programs = [build_program(task, completion) for task, completion in pairs]
    given = ExecLimits(timeout_s, memory_mb)
    by_limits: dict[ExecLimits, list[int]] = {}
    for index, (task, _) in enumerate(pairs):
        by_limits.setdefault(exec_limits(task, given), []).append(index)
    results: dict[int, ExecResult] = {}
    for limits, indices in by_limits.items():
        ran = sandbox.run_many([programs[i] for i in indices],
                               timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
        results.update(zip(indices, ran, strict=True))
    return [results[index] for index in range(len(pairs))]
