"""Scoring a completion: the task's hidden tests, run in a sandbox, and a positive marker.

A completion passes only if its program exits 0 *and* prints the completion marker, a line
with a random nonce that the program is handed on stdin and that only the code after the tests
can print (heldout/sandbox/prelude.py says how). So `sys.exit(0)` or `os._exit(0)` before the
tests, a crash of the test harness, or a printed guess do not pass. The program itself is the
task kind's to build (heldout.tasks.kinds).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable

from heldout.episodes.budgets import ExecLimits, exec_limits
from heldout.errors import SandboxError
from heldout.sandbox.prelude import MARKER
from heldout.sandbox.protocol import ExecResult, Program, Sandbox
from heldout.tasks.kinds import TASK_KINDS, task_kind
from heldout.tasks.record import Task

NO_MARKER_NOTE = (
    "\n[heldout] exit 0 without the completion marker: the program ended before its tests "
    "returned"
)


def build_program(task: Task, completion: str, nonce: str) -> Program:
    """The program that runs `completion` against the task's tests, as the task's kind builds
    it. The nonce travels on the program's stdin, never in its text."""
    if task.kind not in TASK_KINDS:
        raise SandboxError(f"task {task.id}: no scorer for kind {task.kind!r}")
    return task_kind(task.kind).build_program(task, completion, nonce)


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
    nonces = [secrets.token_hex(16) for _ in pairs]
    programs = [build_program(task, completion, nonce)
                for (task, completion), nonce in zip(pairs, nonces, strict=True)]
    given = ExecLimits(timeout_s, memory_mb)
    by_limits: dict[ExecLimits, list[int]] = {}
    for index, (task, _) in enumerate(pairs):
        by_limits.setdefault(exec_limits(task, given), []).append(index)
    results: dict[int, ExecResult] = {}
    for limits, indices in by_limits.items():
        ran = sandbox.run_many([programs[i] for i in indices],
                               timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
        for index, result in zip(indices, ran, strict=True):
            results[index] = _judge(result, nonces[index])
    return [results[index] for index in range(len(pairs))]


def _judge(result: ExecResult, nonce: str) -> ExecResult:
    """Passed = the sandbox's pass (exit 0 within limits) and the marker; the marker's line is
    taken out of the output kept."""
    marker = f"\n{(MARKER + nonce.encode()).decode()}\n"
    marked = marker in result.stdout_tail
    stdout = result.stdout_tail.replace(marker, "")
    if result.status == "ok" and not marked:
        return dataclasses.replace(result, passed=False, status="failed", stdout_tail=stdout,
                                   stderr_tail=result.stderr_tail + NO_MARKER_NOTE)
    return dataclasses.replace(result, passed=result.passed and marked, stdout_tail=stdout)
