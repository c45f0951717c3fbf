"""Episodes: the agent's loop (heldout.episodes.loop), then the hidden tests on what it
submitted, recorded as rows that never vanish (the row and its statuses: heldout.episodes.rows).

Nothing an agent returns is trusted: the row's text is made safe (heldout.canonical.safe_text:
a lone surrogate becomes U+FFFD) before it is hashed, judged or stored, and a row whose numbers
are not what its columns hold (10**30 tokens, a NaN cost) becomes an `error` row that names the
field (heldout.episodes.rows.validate_row) instead of breaking the rollout table.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from heldout.agents.protocol import Agent
from heldout.canonical import safe_strings, safe_text, sha256_hex
from heldout.episodes.budgets import EpisodeBudgets
from heldout.episodes.cache import episode_key
from heldout.episodes.environments import make_environment
from heldout.episodes.harness import Harness
from heldout.episodes.judge import score_many
from heldout.episodes.loop import Outcome, loop_steps
from heldout.episodes.rows import invalid_row, row_problems, stored_steps, validate_row
from heldout.episodes.seeds import episode_seed
from heldout.episodes.waits import Steps, Wait, wait_here
from heldout.sandbox.protocol import ExecResult, Sandbox
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task


@dataclass(frozen=True)
class Episode:
    task: Task
    sample: int
    seed: int


def plan_episodes(tasks: Iterable[Task], harness: Harness, rerun: int = 0) -> list[Episode]:
    return [
        Episode(task, sample, episode_seed(harness.seed, task.id, sample, rerun))
        for task in sorted(tasks, key=lambda t: t.id)
        for sample in range(harness.n)
    ]


# How a loop's end becomes a row's status when nothing was scored; a budget's end is "budget".
END_STATUS = {"submitted": "ok", "refused": "refused", "error": "error"}
BUDGET_ENDS = ("max_turns", "max_tool_calls", "max_tokens", "max_cost", "timeout")


def _execution_status(result: ExecResult) -> str:
    return {"timeout": "timeout", "error": "error"}.get(result.status, "ok")


def run_episode(agent: Agent, sandbox: Sandbox, harness: Harness, episode: Episode) -> dict:
    """One episode as a row (without the checkpoint name), run in place on this thread."""
    return wait_here(episode_steps(agent, sandbox, harness, episode))


def episode_steps(agent: Agent, sandbox: Sandbox, harness: Harness, episode: Episode,
                  clock: Callable[[], float] = time.monotonic) -> Steps[dict]:
    """One episode as steps (heldout.episodes.waits) ending in its row; retried while it errors,
    as many times as the harness allows. `clock` is the one its wall budget is spent by."""
    for _attempt in range(harness.retries + 1):
        row = yield from _attempt_episode(agent, sandbox, harness, episode, clock)
        if row["status"] != "error":
            break
    return row


def _attempt_episode(agent: Agent, sandbox: Sandbox, harness: Harness, episode: Episode,
                     clock: Callable[[], float]) -> Steps[dict]:
    task = episode.task
    budgets = EpisodeBudgets.start(harness, task, clock)
    limits = budgets.execution
    environment = make_environment(task, sandbox, limits, harness.template, harness.tools)
    started, started_at = clock(), time.time()
    outcome = yield from loop_steps(agent, environment, budgets, task, episode.sample,
                                    episode.seed)
    program = outcome.program
    if program is None and outcome.end_reason in BUDGET_ENDS and harness.on_budget == "score_last":
        program = outcome.last_program
    if program is not None:  # one text is hashed, judged and stored
        program = safe_text(program)
    built: list[str] = []
    row: dict[str, Any] = {
        "task_id": task.id, "sample": episode.sample, "seed": episode.seed,
        "harness": harness.fingerprint(), "completion": program or "",
        "completion_sha": sha256_hex(program or ""), "passed": False, "public_passed": None,
        "status": END_STATUS.get(outcome.end_reason, "budget"), "error": outcome.error,
        "finish_reason": outcome.finish_reason, "tokens_in": _total(outcome, "tokens_in"),
        "tokens_out": _total(outcome, "tokens_out"), "turns": outcome.turns,
        "tool_calls": outcome.tool_calls, "end_reason": outcome.end_reason,
        "agent_s": clock() - started, "exec_s": 0.0, "exec_cpu_s": 0.0,
        "cost_usd": _total(outcome, "cost_usd"),
        "trajectory": _json_column(
            "trajectory", lambda: stored_steps(outcome.trajectory(), program), built),
        "step_timings": _json_column("step_timings", outcome.timings, built),
        "started_at": started_at,
    }
    row = safe_strings(row)
    problems = [*row_problems(row), *built]
    if problems:  # an agent's impossible claims: never judged, never stored as they are
        return invalid_row(row, problems)
    if program is None or outcome.end_reason in ("refused", "error"):
        return row
    # The hidden tests judge the program; the public ones, run beside them, only feed the
    # public-versus-hidden alarm.
    with_public = [task] + ([task_kind(task.kind).public_task(task)]
                            if task.public_tests else [])
    results = yield Wait("sandbox", partial(
        score_many, [(judged, program) for judged in with_public], sandbox,
        timeout_s=limits.timeout_s, memory_mb=limits.memory_mb))
    hidden = results[0]
    status = _execution_status(hidden)
    truncated = status == "ok" and outcome.finish_reason == "length"
    passed = hidden.passed and not (truncated and harness.on_truncation == "fail")
    row.update(passed=passed, status="truncated" if truncated else status,
               exec_s=hidden.exec_s, exec_cpu_s=hidden.cpu_s,
               error="" if passed else ("cut at max_tokens (harness.on_truncation: fail)"
                                        if hidden.passed else _describe(hidden)))
    if len(results) > 1:
        row["public_passed"] = results[1].passed
    return validate_row(row)


def _describe(result: ExecResult) -> str:
    tail = (result.stderr_tail or result.stdout_tail or "").strip().splitlines()
    text = f"{result.status}: {tail[-1] if tail else 'exit ' + str(result.exit_code)}"[:2000]
    return safe_text(text)


def _total(outcome: Outcome, name: str) -> Any:
    """The sum of what each turn's agent call reported (tokens, cost); a value that is not a
    number is returned as it is, for validation to name, and a sum past a float is infinite."""
    values = [getattr(step, name) for step in outcome.steps]
    wrong = [v for v in values if isinstance(v, bool) or not isinstance(v, int | float)]
    if wrong:
        return wrong[0]
    try:
        return sum(values)
    except OverflowError:
        return math.inf


def _json_column(name: str, build: Callable[[], Any], problems: list[str]) -> str:
    """A column that holds JSON (the trajectory, its timings), with every lone surrogate in its
    strings replaced by U+FFFD; "[]", with a problem noted, where the agent's data (its
    tool arguments) cannot be written as JSON at all."""
    try:
        text = json.dumps(build(), separators=(",", ":"))
        if "\\ud" in text:  # escapes of surrogates: a pair is a character, a lone one is not
            loose = json.dumps(build(), separators=(",", ":"), ensure_ascii=False)
            text = json.dumps(json.loads(safe_text(loose)), separators=(",", ":"))
        return text
    except Exception as error:  # noqa: BLE001 - anything an agent put in its arguments
        problems.append(f"field '{name}': cannot be written as JSON ({type(error).__name__})")
        return "[]"


def episode_key_for(harness: Harness, agent_digest: str) -> Callable[[Episode], str]:
    fingerprint = harness.fingerprint()
    return lambda e: episode_key(fingerprint, agent_digest, e.task.content_hash, e.sample, e.seed)
