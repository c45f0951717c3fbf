"""Episodes: one agent call and one sandboxed scoring each, recorded as rows that never vanish
(the row and its statuses: heldout.episodes.rows)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from heldout.agents.protocol import Agent
from heldout.canonical import sha256_hex
from heldout.episodes.budgets import EpisodeBudgets
from heldout.episodes.cache import episode_key
from heldout.episodes.harness import Harness
from heldout.episodes.judge import score
from heldout.episodes.seeds import episode_seed
from heldout.sandbox.protocol import ExecResult, Sandbox
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


def _execution_status(result: ExecResult) -> str:
    return {"timeout": "timeout", "error": "error"}.get(result.status, "ok")


def run_episode(agent: Agent, sandbox: Sandbox, harness: Harness, episode: Episode) -> dict:
    """One episode as a row (without the checkpoint name); retried while it errors, as many
    times as the harness allows."""
    for _attempt in range(harness.retries + 1):
        row = _attempt_episode(agent, sandbox, harness, episode)
        if row["status"] != "error":
            break
    return row


def _attempt_episode(agent: Agent, sandbox: Sandbox, harness: Harness, episode: Episode) -> dict:
    task = episode.task
    budgets = EpisodeBudgets.start(harness, task)
    row: dict[str, Any] = {
        "task_id": task.id, "sample": episode.sample, "seed": episode.seed,
        "harness": harness.fingerprint(), "completion": "", "completion_sha": sha256_hex(""),
        "passed": False, "public_passed": None, "status": "error", "error": "",
        "finish_reason": "", "tokens_in": 0, "tokens_out": 0, "turns": 0,
        "agent_s": 0.0, "exec_s": 0.0, "cost_usd": 0.0,
    }
    started = time.perf_counter()
    try:
        completion = agent.complete(task, episode.sample, episode.seed)
    except Exception as error:  # noqa: BLE001 - any agent failure is an episode outcome
        row.update(error=f"agent: {type(error).__name__}: {error}"[:2000],
                   agent_s=time.perf_counter() - started)
        return row
    row.update(
        completion=completion.text, completion_sha=sha256_hex(completion.text),
        finish_reason=completion.finish_reason, tokens_in=completion.tokens_in,
        tokens_out=completion.tokens_out, turns=completion.turns, cost_usd=completion.cost_usd,
        agent_s=time.perf_counter() - started,
    )
    if completion.finish_reason == "refused":
        row.update(status="refused")
        return row
    limits = budgets.execution
    result = score(task, completion.text, sandbox, timeout_s=limits.timeout_s,
                   memory_mb=limits.memory_mb)
    status = _execution_status(result)
    if status == "ok" and completion.finish_reason == "length":
        status = "truncated"
    row.update(passed=result.passed, status=status, exec_s=result.exec_s,
               error="" if result.passed else _describe(result))
    if task.public_tests:
        public = task.model_copy(update={"tests": task.public_tests})
        row["public_passed"] = score(
            public, completion.text, sandbox, timeout_s=limits.timeout_s,
            memory_mb=limits.memory_mb,
        ).passed
    return row


def _describe(result: ExecResult) -> str:
    tail = (result.stderr_tail or result.stdout_tail or "").strip().splitlines()
    return f"{result.status}: {tail[-1] if tail else 'exit ' + str(result.exit_code)}"[:2000]


def episode_key_for(harness: Harness, agent_digest: str) -> Callable[[Episode], str]:
    fingerprint = harness.fingerprint()
    return lambda e: episode_key(fingerprint, agent_digest, e.task.content_hash, e.sample, e.seed)
