"""The rollout row and its vocabulary, defined once: the columns of a rollout file, how an
episode can end, and what each way of failing is called where it is counted and where it is
reported as a rate. Every reader (counts, scores, stages, the report) takes them from here.

A row whose agent or scorer failed still counts in the denominator: its status says why, and
`passed` is False.

No row is trusted: an agent reports its own tokens and cost, and a cache file can be edited.
`validate_row` checks a row against ROW_COLUMNS before it is committed to the resume cache and
when it is read back; a row that fails becomes an `error` row that says which field was wrong
(`invalid_row`), so a bad number or a lone surrogate can never break the rollout table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from heldout.canonical import is_safe_text, safe_text, sha256_hex

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
    "exec_cpu_s": "float64",
    "cost_usd": "float64",
    "trajectory": "string",
    "step_timings": "string",
    # When the episode started, in seconds since the Unix epoch (UTC): whether two arms ran
    # interleaved or one after the other (heldout.report.timing). Missing (NaN) in a row made
    # before it was recorded, or imported from a file that does not say.
    "started_at": "float64",
}
# Timings: the wall-clock columns (how long, and when), and the judged program's CPU time (the
# time limit counts it, and it too differs a little from one run to the next), the only columns
# two runs of the same episodes may disagree on.
TIMING_COLUMNS = ("agent_s", "exec_s", "exec_cpu_s", "step_timings", "started_at")
# Columns that hold what the agent wrote and was shown (test prompts, public-test output): the
# test stage keeps them sealed and its rollout files leave them out.
TEST_CONTENT_COLUMNS = ("completion", "trajectory")
# Free text about how an episode went: a failed program's `error` quotes the hidden tests (the
# judge's line number, an assertion's message, a value the tests expected). The test stage keeps
# it sealed with the rest of the episode, and its rollout files hold it empty (the status still
# says how each episode ended).
TEST_TEXT_COLUMNS = ("error",)


def outcome_table(table: pd.DataFrame) -> pd.DataFrame:
    """A rollout table holding outcomes only: nothing the agent wrote or was shown, and no text
    derived from the tests (the test split's rollout files)."""
    return table.drop(columns=list(TEST_CONTENT_COLUMNS)).assign(**{
        column: pd.Series("", index=table.index, dtype=ROW_COLUMNS[column])
        for column in TEST_TEXT_COLUMNS})


# A trajectory step whose program is the row's completion does not hold it again: its arguments
# lose "code" and it says where the code is (`stored_steps`); `trajectory_steps` puts it back.
CODE_FROM = "code_from"


def stored_steps(steps: list[dict[str, Any]], completion: str | None) -> list[dict[str, Any]]:
    """A trajectory as a row stores it: each step whose `code` argument is `completion` (the
    submitted program, safe text) refers to the completion instead of holding a second copy."""
    if not completion:
        return steps
    return [
        {**step, "arguments": {k: v for k, v in step["arguments"].items() if k != "code"},
         CODE_FROM: "completion"}
        if isinstance(step.get("arguments"), dict)
        and isinstance(step["arguments"].get("code"), str)
        and safe_text(step["arguments"]["code"]) == completion else step
        for step in steps]


def trajectory_steps(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A row's trajectory, turn by turn, each step's arguments whole (`code` put back from the
    completion where the row stored it once)."""
    text = row.get("trajectory")
    steps = json.loads(text) if isinstance(text, str) and text else []
    return [
        {**{k: v for k, v in step.items() if k != CODE_FROM},
         "arguments": {**step.get("arguments", {}), "code": row["completion"]}}
        if isinstance(step, dict) and step.get(CODE_FROM) == "completion" else step
        for step in steps]


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


# --- validation ------------------------------------------------------------------------------

INT64_MAX = 2**63 - 1
MAX_TOKENS = 10**12
# Inclusive ranges of the integer columns (every one fits int64).
INT_RANGES = {"sample": (0, INT64_MAX), "seed": (0, INT64_MAX), "tokens_in": (0, MAX_TOKENS),
              "tokens_out": (0, MAX_TOKENS), "turns": (0, INT64_MAX),
              "tool_calls": (0, INT64_MAX)}
# Columns a row may lack: `checkpoint` (rollout_table adds it), `started_at` (rows cached or
# imported before it was recorded: NaN, unknown).
OPTIONAL_COLUMNS = ("checkpoint", "started_at")
# The columns that say which episode a row is; an invalid row keeps them.
IDENTITY_COLUMNS = ("task_id", "sample", "seed", "harness")
_EXPECTED = {"string": "a string", "int64": "an integer", "float64": "a number",
             "bool": "true or false", "boolean": "true, false or null"}


def row_problems(row: Mapping[str, Any]) -> list[str]:
    """What is wrong with a row, one message per field, in column order (empty: it is valid).
    The OPTIONAL_COLUMNS may be absent; other keys are ignored."""
    if not isinstance(row, Mapping):
        return [f"expected a row (an object), got {type(row).__name__}"]
    problems = []
    for column, dtype in ROW_COLUMNS.items():
        if column not in row:
            if column not in OPTIONAL_COLUMNS:
                problems.append(f"field '{column}': missing")
            continue
        problem = _field_problem(column, dtype, row[column])
        if problem:
            problems.append(f"field '{column}': {problem}")
    return problems


def _field_problem(column: str, dtype: str, value: Any) -> str | None:
    if dtype == "string":
        if not isinstance(value, str):
            return _wrong_type(dtype, value)
        if not is_safe_text(value):
            return "not valid UTF-8 text (it holds a lone surrogate)"
        if column == "status" and value not in STATUSES:
            return f"{_show(value)} is not one of {', '.join(STATUSES)}"
        return None
    if dtype in ("bool", "boolean"):
        if isinstance(value, bool) or (value is None and dtype == "boolean"):
            return None
        return _wrong_type(dtype, value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _wrong_type(dtype, value)
    if dtype == "int64":
        if not isinstance(value, int):
            return _wrong_type(dtype, value)
        low, high = INT_RANGES[column]
        return None if low <= value <= high else f"{_show(value)} is outside {low}..{high}"
    try:
        number = float(value)
    except OverflowError:
        return f"{_show(value)} is too large for a number"
    if not math.isfinite(number):
        return f"{_show(value)} is not a finite number"
    return None if number >= 0 else f"{_show(value)} is negative"


def _wrong_type(dtype: str, value: Any) -> str:
    return f"expected {_EXPECTED[dtype]}, got {type(value).__name__}"


def _show(value: Any) -> str:
    """A value for a message, short whatever it is (a 10**5000 int has no str())."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {math.floor(math.log10(abs(value))) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def invalid_row(identity: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """The error row that stands for a row that failed validation: the episode's identity,
    numbers zeroed, no completion or trajectory (nothing the agent claimed is kept), and the
    problems as its error."""
    return {
        **{column: identity[column] for column in IDENTITY_COLUMNS},
        "completion": "", "completion_sha": sha256_hex(""), "passed": False,
        "public_passed": None, "status": "error",
        "error": ("invalid row: " + "; ".join(problems))[:2000], "finish_reason": "",
        "tokens_in": 0, "tokens_out": 0, "turns": 0, "tool_calls": 0, "end_reason": "error",
        "agent_s": 0.0, "exec_s": 0.0, "exec_cpu_s": 0.0, "cost_usd": 0.0, "trajectory": "[]",
        "step_timings": "[]",
    }


def validate_row(row: Mapping[str, Any], identity: Mapping[str, Any] | None = None) -> dict:
    """The row if it is valid, else its error row (invalid_row). `identity` names the episode
    (task_id, sample, seed, harness) when the row's own cannot be trusted; by default the
    row's own, which then must be valid."""
    problems = row_problems(row)
    if not problems:
        return dict(row)
    if identity is None:
        bad = [c for c in IDENTITY_COLUMNS if any(p.startswith(f"field '{c}':") for p in problems)]
        if bad or not isinstance(row, Mapping):
            raise ValueError(f"a row without a valid identity: {'; '.join(problems)}")
        identity = row
    return invalid_row(identity, problems)
