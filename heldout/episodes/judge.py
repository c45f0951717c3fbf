"""Scoring a completion: the task's hidden tests, run in a sandbox, and a positive marker.

A completion passes only if its program exits 0 *and* prints the completion marker, a line
with a random nonce that the program is handed on stdin and that only the code after the tests
can print (heldout/sandbox/prelude.py says how). So `sys.exit(0)` or `os._exit(0)` before the
tests, a crash of the test harness, or a printed guess do not pass.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable
from pathlib import Path

from heldout.errors import SandboxError
from heldout.sandbox import prelude
from heldout.sandbox.prelude import MARKER
from heldout.sandbox.protocol import ExecResult, Program, Sandbox
from heldout.tasks.record import Task

# Part of the harness fingerprint: bump it whenever a program's layout or the meaning of a
# pass changes, so that scores from before and after are never compared.
SCORER_VERSION = "python-function/1"

_PRELUDE = Path(prelude.__file__).read_text(encoding="utf-8")
# The one line of the prelude that receives the program's text (prelude.py).
_PLACEHOLDERS = "solution, tests = HELDOUT_SOLUTION, HELDOUT_TESTS"
assert _PRELUDE.count(_PLACEHOLDERS) == 1
NO_MARKER_NOTE = (
    "\n[heldout] exit 0 without the completion marker: the program ended before its tests "
    "returned"
)


def build_program(task: Task, completion: str, nonce: str) -> Program:
    """The program that runs `completion` against the task's tests. The nonce travels on the
    program's stdin, never in its text."""
    if task.kind != "python-function":
        raise SandboxError(f"task {task.id}: no scorer for kind {task.kind!r}")
    solution = task.prompt + completion + "\n"
    # str.replace is one pass: text inside the literals is never read as a placeholder.
    source = _PRELUDE.replace(_PLACEHOLDERS, f"solution, tests = {solution!r}, {task.tests!r}")
    image = task.runtime.image if task.runtime else None
    return Program(source=source + "\n_heldout_main()\n", stdin=nonce, group=task.id, image=image)


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
    by_limits: dict[tuple[float, int], list[int]] = {}
    for index, (task, _) in enumerate(pairs):
        by_limits.setdefault(_limits(task, timeout_s, memory_mb), []).append(index)
    results: dict[int, ExecResult] = {}
    for (task_timeout_s, task_memory_mb), indices in by_limits.items():
        ran = sandbox.run_many([programs[i] for i in indices],
                               timeout_s=task_timeout_s, memory_mb=task_memory_mb)
        for index, result in zip(indices, ran, strict=True):
            results[index] = _judge(result, nonces[index])
    return [results[index] for index in range(len(pairs))]


def _limits(task: Task, timeout_s: float, memory_mb: int) -> tuple[float, int]:
    runtime = task.runtime
    if runtime is None:
        return timeout_s, memory_mb
    return runtime.timeout_s or timeout_s, runtime.memory_mb or memory_mb


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
