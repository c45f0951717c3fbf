"""inspect_ai logs (`.eval` archives and `.json`), read with inspect_ai's own reader
(`inspect_ai.log`), an optional extra: `pip install 'heldout[inspect]'`.

A sample is (its `id`, its `epoch`): task `id`, sample `epoch - 1`. Its score is one scorer's
value (`--score-key match`), or one key of a scorer whose value is a dict
(`--score-key graded.correct`, or `correct` where only one scorer has that key). A sample
that errored (`error`) or hit a limit (`limit`: time and working time are timeouts, tokens,
messages, turns and cost are budgets) is a failure counted apart, whatever it was scored.

inspect_ai's own accuracy averages each sample's scored epochs first and leaves errored samples
out; heldout counts every epoch of every sample, so the two agree when no sample errored and
every sample ran every epoch.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from heldout.canonical import canonical_json, sha256_hex
from heldout.errors import HeldoutError
from heldout.sources.record import Imported, Outcome, Source
from heldout.sources.values import PARTIAL, as_pass, not_pass_fail

TIMEOUT_LIMITS = ("time", "working")
EXTRA = "pip install 'heldout[inspect]' (inspect_ai reads its own logs)"


class MissingExtra(HeldoutError):
    """An optional dependency a reader needs is not installed."""


def _inspect_log() -> Any:
    try:
        import inspect_ai.log as log
    except ImportError:
        raise MissingExtra(f"reading an inspect_ai log needs inspect_ai: {EXTRA}") from None
    return log


def score_keys(scores: dict[str, Any]) -> list[str]:
    """The names a score can be chosen by: `scorer` for a scalar value, `scorer.key` for
    each key of a dict value."""
    keys = []
    for name, score in scores.items():
        value = score.value
        keys += [f"{name}.{key}" for key in value] if isinstance(value, dict) else [name]
    return keys


def resolve_key(available: list[str], wanted: str | None, path: Path) -> str:
    """The full `scorer[.key]` that --score-key names (a bare dict key resolves when one
    scorer has it), or the only one there is."""
    if wanted is None:
        if len(available) == 1:
            return available[0]
        raise HeldoutError(f"{path}: the log holds the scores {', '.join(available)}: choose "
                           "one with --score-key")
    if wanted in available:
        return wanted
    matching = [key for key in available if key.rpartition(".")[2] == wanted]
    if len(matching) == 1:
        return matching[0]
    raise HeldoutError(f"{path}: --score-key {wanted!r} is not a score of this log; it holds "
                       f"{', '.join(available)}")


def _value(scores: dict[str, Any], key: str) -> Any:
    name, _, inner = key.partition(".")
    if name in scores:
        value = scores[name].value
        return value.get(inner) if inner and isinstance(value, dict) else value
    return None


def _epoch_seconds(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp).timestamp() if stamp else math.nan


def _usage(summary: Any) -> tuple[int, int, float]:
    usages = list(summary.model_usage.values())
    costs = [usage.total_cost for usage in usages if usage.total_cost is not None]
    return (sum(usage.input_tokens for usage in usages),
            sum(usage.output_tokens for usage in usages),
            sum(costs) if costs else math.nan)


def _outcome(summary: Any, key: str, group_key: str | None, path: Path) -> Outcome:
    where = f"{path}: sample {summary.id!r} epoch {summary.epoch}"
    tokens_in, tokens_out, cost = _usage(summary)
    group = None
    if group_key is not None:
        if group_key not in summary.metadata:
            raise HeldoutError(f"{where}: no metadata field {group_key!r} for --group-key; "
                               f"its metadata has {', '.join(summary.metadata) or 'nothing'}")
        group = str(summary.metadata[group_key])
    status, error, passed = "ok", "", False
    if summary.error:
        status, error = "error", str(summary.error)
    elif summary.limit:
        status = "timeout" if summary.limit in TIMEOUT_LIMITS else "budget"
        error = summary.limit_reason or f"{summary.limit} limit"
    else:
        value = _value(summary.scores or {}, key)
        passed = as_pass(value)
        if passed is None:
            raise HeldoutError(not_pass_fail(value, where, key))
    return Outcome(
        task_id=str(summary.id), sample=summary.epoch - 1, passed=passed, status=status,
        error=error, tokens_in=tokens_in, tokens_out=tokens_out,
        turns=summary.turn_count or 0, cost_usd=cost,
        agent_s=summary.total_time if summary.total_time is not None else math.nan,
        started_at=_epoch_seconds(summary.started_at),
        content=sha256_hex(canonical_json({"input": _plain(summary.input),
                                           "target": summary.target})),
        group=group)


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [item.model_dump(mode="json", exclude={"id"}) if hasattr(item, "model_dump")
                else item for item in value]
    return value


def _reported(header: Any, key: str) -> dict[str, float]:
    name, _, inner = key.partition(".")
    for score in header.results.scores if header.results else []:
        if (score.scorer, score.name) == (name, inner or name):
            return {metric: float(value.value) for metric, value in score.metrics.items()}
    return {}


def read_inspect_log(path: Path, score_key: str | None, group_key: str | None,
                     form: str) -> Imported:
    """`form`: "eval" or "json", as the file's content says."""
    log = _inspect_log()
    try:
        header = log.read_eval_log(str(path), header_only=True, format=form)
        summaries = log.read_eval_log_sample_summaries(str(path), format=form)
    except Exception as error:  # noqa: BLE001 - inspect_ai raises many types on a bad file
        raise HeldoutError(f"{path}: inspect_ai cannot read this log: {error}") from None
    if not summaries:
        raise HeldoutError(f"{path}: the log holds no samples (status {header.status})")
    available: list[str] = []
    for summary in summaries:
        available += [key for key in score_keys(summary.scores or {}) if key not in available]
    key = resolve_key(available, score_key, path)
    outcomes = [_outcome(summary, key, group_key, path) for summary in summaries]
    partial = sum(_value(s.scores or {}, key) == PARTIAL for s in summaries)
    errored = sum(outcome.status == "error" for outcome in outcomes)
    notes = []
    if errored:
        notes.append(f"{errored} sample(s) errored: inspect_ai's own metrics leave them out, "
                     "heldout counts each as a failure")
    if partial:
        notes.append(f"{partial} sample(s) scored P (partial credit) count as failures")
    spec = header.eval
    return Imported(Source(
        tool="inspect_ai", form=f"an .{form} log", task=spec.task, scorer=key,
        model=spec.model, tool_version=str(spec.packages.get("inspect_ai", "")),
        reported=_reported(header, key),
        notes=tuple(notes)), outcomes)
