"""verifiers (Prime Intellect's environments, `vf-eval`) results: a run folder's
`traces.jsonl`, one line per rollout, read line by line (verifiers offers no reader).

A line is a rollout: the `task` it ran (`task.data.id`, the example; `task.hash`, what it
asked, which two files must share), the `env`, the `traces` of its agents (each with its
`rewards`, `{name: {"score", "weight"}}`, and `metrics`), whether it finished (`ok`,
`is_timeout`, `errors`) and its tokens. The rollout index is its place among the lines of
the same example. The score is the weighted reward (`--score-key reward`, the default), or one
reward or metric by name; it must be 0 or 1. A rollout that timed out or errored is a failure
counted apart.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from heldout.errors import HeldoutError
from heldout.sources.lines import records as read_records
from heldout.sources.record import Imported, Outcome, Source
from heldout.sources.values import as_pass, not_pass_fail

REWARD = "reward"


def is_verifiers_line(record: dict) -> bool:
    return isinstance(record.get("traces"), list) and isinstance(record.get("task"), dict) and (
        "env" in record)


def _score(record: dict, key: str) -> Any:
    """The weighted reward of the rollout's traces, or the named reward or metric."""
    traces = [trace for trace in record["traces"] if isinstance(trace, dict)]
    if key == REWARD:
        parts = [(part.get("score"), part.get("weight", 1.0)) for trace in traces
                 for part in (trace.get("rewards") or {}).values() if isinstance(part, dict)]
        if not parts or not all(isinstance(s, int | float) and isinstance(w, int | float)
                                for s, w in parts):
            return None
        return sum(score * weight for score, weight in parts)
    for trace in traces:
        reward = (trace.get("rewards") or {}).get(key)
        if isinstance(reward, dict):
            return reward.get("score")
        if key in (trace.get("metrics") or {}):
            return trace["metrics"][key]
    return None


def _message(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"[:2000]
    return str(error)[:2000]


def _keys(record: dict) -> list[str]:
    names = [REWARD]
    for trace in record["traces"]:
        if isinstance(trace, dict):
            names += [*(trace.get("rewards") or {}), *(trace.get("metrics") or {})]
    return list(dict.fromkeys(names))


def _group(data: dict, group_key: str | None, where: str) -> str | None:
    if group_key is None:
        return None
    if group_key not in data:
        raise HeldoutError(f"{where}: the task's data has no field {group_key!r} for "
                           f"--group-key; it has {', '.join(data)}")
    return str(data[group_key])


def _outcome(record: dict, key: str, group_key: str | None, where: str) -> Outcome:
    task = record["task"]
    data = task.get("data") if isinstance(task.get("data"), dict) else {}
    task_id = str(data.get("id", data.get("idx", task.get("key"))))
    traces = [trace for trace in record["traces"] if isinstance(trace, dict)]
    # An agent's failure (a provider's 500) is in its trace's errors; the rollout's own list
    # holds the environment's only.
    errors = [*(record.get("errors") or []), *(e for t in traces for e in t.get("errors") or [])]
    if record.get("is_timeout"):
        status, error, passed = "timeout", "the rollout timed out", False
    elif errors or record.get("ok") is False:
        status, error, passed = "error", _message(errors[0]) if errors else "not ok", False
    else:
        value = _score(record, key)
        passed = as_pass(value)
        if passed is None:
            raise HeldoutError(not_pass_fail(value, where, key) + (
                f"; this file has {', '.join(_keys(record))}"))
        status, error = "ok", ""
    timing = traces[0].get("timing") if traces else None
    start = timing.get("start") if isinstance(timing, dict) else None
    return Outcome(
        task_id=task_id, sample=0, passed=passed, status=status, error=error,
        tokens_in=int(record.get("num_input_tokens") or 0),
        tokens_out=int(record.get("num_output_tokens") or 0),
        started_at=float(start) if isinstance(start, int | float) else math.nan,
        content=str(task.get("hash")) if task.get("hash") else None,
        group=_group(data, group_key, where))


def read_verifiers_results(path: Path, score_key: str | None,
                           group_key: str | None) -> Imported:
    key = score_key or REWARD
    records = read_records(path, "a verifiers results file", is_verifiers_line,
                           "a verifiers rollout (env, task, traces)")
    read = [_outcome(record, key, group_key, f"{path}:{number}") for number, record in records]
    # No rollout index is written: a task's rollouts are numbered in the order they started
    # (lines, where no start time is), which run -c 1 or concurrently alike.
    order = sorted(range(len(read)), key=lambda i: (read[i].task_id, math.isnan(
        read[i].started_at), 0.0 if math.isnan(read[i].started_at) else read[i].started_at, i))
    outcomes, seen = [], {}
    for index in order:
        sample = seen.get(read[index].task_id, 0)
        seen[read[index].task_id] = sample + 1
        outcomes.append(dataclasses.replace(read[index], sample=sample))
    first = records[0][1]
    env = first["env"].get("id") if isinstance(first["env"], dict) else str(first["env"])
    traces = first["traces"]
    agent = traces[0].get("agent") if traces and isinstance(traces[0], dict) else None
    config = agent.get("config") if isinstance(agent, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    version = traces[0].get("verifiers", {}).get("version", "") if traces else ""
    return Imported(Source(tool="verifiers", form="a traces.jsonl", task=str(env),
                           scorer=key, model=str(model or "verifiers"),
                           tool_version=str(version)), outcomes)
