"""The rollout row and its vocabulary, defined once: the columns of a rollout file, how an
episode can end, and what each way of failing is called where it is counted and where it is
reported as a rate. Every reader (counts, scores, stages, the report) takes them from here.

A row whose agent or scorer failed still counts in the denominator: its status says why, and
`passed` is False.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

ROW_COLUMNS = {
    "checkpoint": "string",
    "task_id": "string",
    "sample": "int64",
    "seed": "int64",
    "harness": "string",
    "completion": "string",
    "completion_sha": "string",
    "passed": "bool",
    "public_passed": "boolean",
    "status": "string",
    "error": "string",
    "finish_reason": "string",
    "tokens_in": "int64",
    "tokens_out": "int64",
    "turns": "int64",
    "tool_calls": "int64",
    "end_reason": "string",
    "agent_s": "float64",
    "exec_s": "float64",
    "cost_usd": "float64",
    "trajectory": "string",
    "step_timings": "string",
}
# Wall-clock columns: the only ones two runs of the same episodes may disagree on.
TIMING_COLUMNS = ("agent_s", "exec_s", "step_timings")
# Columns that hold what the agent wrote and was shown (test prompts, public-test output): the
# test stage keeps them sealed and its rollout files leave them out.
TEST_CONTENT_COLUMNS = ("completion", "trajectory")


@dataclass(frozen=True)
class Failure:
    """A way an episode ends without a verdict on the completion: its row status, the per-task
    count column that counts it, and the rate (share of episodes) every summary reports."""

    status: str
    count: str
    rate: str


OK = "ok"
FAILURES = (
    Failure("error", "errors", "error_rate"),  # the agent or the sandbox failed
    Failure("timeout", "timeouts", "timeout_rate"),
    Failure("truncated", "truncations", "truncation_rate"),  # cut by the token budget
    Failure("refused", "refusals", "refusal_rate"),  # the model declined
    Failure("budget", "budget_ends", "budget_rate"),  # a budget ended it before a submit
)
STATUSES = (OK, *(failure.status for failure in FAILURES))
FAILURE_BY_STATUS = {failure.status: failure for failure in FAILURES}


def rollout_table(checkpoint: str, rows: list[dict]) -> pd.DataFrame:
    """The rollout file's table: one row per episode, sorted, with fixed column types."""
    table = pd.DataFrame([{**row, "checkpoint": checkpoint} for row in rows],
                         columns=list(ROW_COLUMNS))
    table = table.astype(ROW_COLUMNS).sort_values(["task_id", "sample"], ignore_index=True)
    return table
