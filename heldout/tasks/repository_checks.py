"""What `heldout tasks validate` runs for repository tasks: the base and the reference through the
judge, so that a task whose verdict would mean nothing is refused before any rollout.

A task is sound when, in the sandbox, with heldout's checks agreeing: every `fail_to_pass` test
fails at the base (else the blind canary would pass it) and passes with the reference; every
`pass_to_pass` test passes at both.
"""

from __future__ import annotations

from collections.abc import Sequence

from heldout.sandbox.protocol import ExecResult, Sandbox
from heldout.tasks.repository import RepositoryTask, build_program
from heldout.tasks.repository_judge import revealed


def task_problems(task: RepositoryTask, base: ExecResult, reference: ExecResult | None
                  ) -> list[str]:
    """Why a task is not sound, from its base's and its reference's revealing runs."""
    problems = []
    for name, result in (("the base", base), ("the reference", reference)):
        if result is None:
            continue
        account = revealed(result, task.expected_tests)
        if account is None:
            reason = result.stderr_tail.strip().rpartition("\n")[2]
            return [f"{name} could not be judged ({result.status}): {reason[:300]}"]
        if account["distrust"]:
            problems.append(f"{name}: {account['distrust']}")
            continue
        outcomes = account["outcomes"]
        wanted_at_base = dict.fromkeys(task.fail_to_pass, False) | dict.fromkeys(
            task.pass_to_pass, True)
        for test, outcome in outcomes.items():
            should_pass = result is reference or wanted_at_base[test]
            if (outcome == "passed") != should_pass:
                if result is base and test in task.fail_to_pass:
                    problems.append(f"fail_to_pass test {test} already passes at the base")
                else:
                    problems.append(f"{test} is {outcome} with {name}, expected to pass")
    return problems


def check_repository_tasks(tasks: Sequence[RepositoryTask], sandbox: Sandbox, timeout_s: float,
                           memory_mb: int) -> dict[str, list[str]]:
    """{task id: its problems} for the tasks that have any."""
    programs, owners = [], []
    for task in tasks:
        programs.append(build_program(task, "", reveal=True))
        owners.append((task, "base"))
        if task.reference is not None:
            programs.append(build_program(task, task.reference, reveal=True))
            owners.append((task, "reference"))
    results = sandbox.run_many(programs, timeout_s=timeout_s, memory_mb=memory_mb)
    runs: dict[str, dict[str, ExecResult]] = {}
    for (task, which), result in zip(owners, results, strict=True):
        runs.setdefault(task.id, {})[which] = result
    found = {}
    for task in tasks:
        problems = task_problems(task, runs[task.id]["base"], runs[task.id].get("reference"))
        if task.reference is None:
            problems.append("no reference: the oracle canary cannot check the task")
        if problems:
            found[task.id] = problems
    return found
