"""MLflow traces of val episodes, built from a rollout table after the episodes ran, for a
reviewer to read in the Traces tab of the rollouts stage's run.

One trace per traced episode: a root span (the episode: task, sample, seed in; passed, public
passed, status and end reason out), then per turn a CHAT_MODEL span (the observation the agent
was given in, its message and tool call out, tokens and cost as attributes) and a TOOL span (the
arguments in, the observation out), then an EVALUATOR span for the hidden tests when a program
was judged. Times come from the row's `step_timings` (relative to the episode's start), so spans
show the durations the episode had; the episodes themselves are laid out from the moment the
traces are logged, one millisecond apart in (task, sample) order.

Which episodes (params.tracing, `sample_episodes`): every one that passed the public tests and
failed the hidden ones, then the first `per_task` samples of each task, capped at `max_traces`
in that order; the rule depends on the rows alone, so a rerun traces the same episodes.

Traces go to the run's tracking store and nowhere else: spans are written straight to the store
in batches (a SQL store, or a tracking server's REST store, which takes them on its own OTLP
route), never through OpenTelemetry exporters, so no OTLP endpoint in the environment is ever
contacted and telemetry stays off. The test split is never traced: its
episodes are sealed, and stages/test.py does not import this module (tests/browser/test_traces.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from heldout.environment import TELEMETRY_OFF
from heldout.episodes.environments import make_environment
from heldout.episodes.harness import Harness
from heldout.episodes.rows import trajectory_steps
from heldout.errors import StageError
from heldout.tasks.record import Task
from stages.tracking import StageRun, tracking_uri

PUBLIC_PASS_HIDDEN_FAIL = "public_pass_hidden_fail"
PER_TASK = "per_task"
TAG = "heldout."
BATCH_EPISODES = 100  # traces per write to the store (one transaction for their spans)


class TracingConfig(BaseModel):
    """`params.tracing`: which val episodes the rollouts stage traces to MLflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per_task: int = Field(default=1, ge=0, description="the first samples of every task")
    public_pass_hidden_fail: Literal["all"] | Annotated[int, Field(ge=0)] = Field(
        default="all", description="all, or the first k per task, of the episodes that passed "
        "the public tests and failed the hidden ones")
    max_traces: int = Field(default=2000, ge=0, description="traces per run at most; 0: none")

    def describe(self) -> str:
        return (f"{PUBLIC_PASS_HIDDEN_FAIL}={self.public_pass_hidden_fail}; "
                f"{PER_TASK}={self.per_task}; max_traces={self.max_traces}")


def sample_episodes(table: pd.DataFrame, config: TracingConfig) -> tuple[pd.DataFrame, dict]:
    """The rows to trace, sorted by (task, sample), with a `rule` column, and the counts: how
    many were traced by each rule, how many the cap left out, how many episodes passed public
    and failed hidden in all. Public-pass-hidden-fail episodes come before the cap does."""
    rows = table.sort_values(["task_id", "sample"], ignore_index=True)
    public_not_hidden = rows["public_passed"].fillna(False).astype(bool) & ~rows["passed"]
    limit = config.public_pass_hidden_fail
    pphf_rank = public_not_hidden.astype(int).groupby(rows["task_id"], sort=False).cumsum()
    by_pphf = public_not_hidden & (True if limit == "all" else pphf_rank <= limit)
    by_task = rows.groupby("task_id", sort=False).cumcount() < config.per_task
    rule = pd.Series(None, index=rows.index, dtype="object")
    rule[by_task] = PER_TASK
    rule[by_pphf] = PUBLIC_PASS_HIDDEN_FAIL
    eligible = rows.assign(rule=rule)[rule.notna()]
    # Under the cap: the cases a reviewer must read first, then the rest; within each rule the
    # first episode of every task before the second of any.
    eligible = eligible.assign(_first=eligible["rule"] != PUBLIC_PASS_HIDDEN_FAIL,
                               _rank=eligible.groupby(["rule", "task_id"]).cumcount())
    kept = eligible.sort_values(["_first", "_rank", "task_id"]).head(config.max_traces)
    kept = kept.drop(columns=["_first", "_rank"]).sort_values(["task_id", "sample"],
                                                              ignore_index=True)
    counts = {
        "traces": len(kept),
        f"traces_{PUBLIC_PASS_HIDDEN_FAIL}": int((kept["rule"] == PUBLIC_PASS_HIDDEN_FAIL).sum()),
        f"traces_{PER_TASK}": int((kept["rule"] == PER_TASK).sum()),
        "traces_capped": len(eligible) - len(kept),
        f"episodes_{PUBLIC_PASS_HIDDEN_FAIL}": int(public_not_hidden.sum()),
    }
    return kept, counts


# --- an episode's trace, as plain data ---------------------------------------------------


@dataclass
class SpanRecord:
    name: str
    span_type: str
    start_ns: int
    end_ns: int
    inputs: Any
    outputs: Any
    attributes: dict[str, Any] = field(default_factory=dict)
    parent: int | None = 0  # index of the parent in EpisodeTrace.spans; None for the root
    error: bool = False


@dataclass
class EpisodeTrace:
    name: str
    tags: dict[str, str]
    spans: list[SpanRecord]  # the root first

    @property
    def root(self) -> SpanRecord:
        return self.spans[0]


def _flag(value: Any) -> str:
    return "none" if value is None or pd.isna(value) else str(bool(value)).lower()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _nullable(value: Any) -> bool | None:
    return None if value is None or pd.isna(value) else bool(value)


def episode_trace(row: Mapping[str, Any], opening: str | None, start_ns: int,
                  rule: str = "") -> EpisodeTrace:
    """The trace of one rollout row: its spans from the trajectory, timed by step_timings."""
    steps = trajectory_steps(row)  # each step's arguments whole, the submitted code included
    timings = json.loads(_text(row["step_timings"]) or "[]")
    ns = 1_000_000_000
    name = f"episode {row['task_id']}#{row['sample']}"
    outcome = {"passed": bool(row["passed"]), "public_passed": _nullable(row["public_passed"]),
               "status": row["status"], "end_reason": row["end_reason"]}
    root = SpanRecord(
        name, "AGENT", start_ns, start_ns, parent=None, error=row["status"] == "error",
        # Seeds as text: they are 63-bit, past what the UI's JavaScript numbers hold exactly.
        inputs={"task_id": row["task_id"], "sample": int(row["sample"]), "seed": str(row["seed"]),
                "checkpoint": row["checkpoint"]},
        outputs=outcome,
        attributes={key: None if pd.isna(row[key]) else row[key]
                    for key in ("turns", "tool_calls", "tokens_in", "tokens_out", "cost_usd",
                                "harness", "error")},
    )
    spans = [root]
    seen, came_from, loop_end = opening, None, 0.0
    for step, (started_s, agent_s, tool_s) in zip(steps, timings, strict=False):
        turn, called = step["turn"], start_ns + round(started_s * ns)
        answered = called + round(agent_s * ns)
        call = {"tool": step["tool"], "arguments": step["arguments"]} if step["tool"] else None
        spans.append(SpanRecord(
            f"turn {turn}: model", "CHAT_MODEL", called, answered,
            inputs={"turn": turn, "seed": str(step["seed"]), "from_tool": came_from,
                    "observation": seen},
            outputs={"message": step["message"], "tool_call": call},
            attributes={"tokens_in": step["tokens_in"], "tokens_out": step["tokens_out"],
                        "cost_usd": step["cost_usd"],
                        "mlflow.chat.tokenUsage": {
                            "input_tokens": step["tokens_in"], "output_tokens": step["tokens_out"],
                            "total_tokens": step["tokens_in"] + step["tokens_out"]}},
        ))
        end = answered
        if step["tool"] is not None:
            end = answered + round(tool_s * ns)
            spans.append(SpanRecord(
                f"turn {turn}: {step['tool']}", "TOOL", answered, end,
                inputs=step["arguments"], outputs=step["observation"],
                attributes={"data": step["data"], "turn": turn},
                error="error" in (step["data"] or {}),
            ))
        seen, came_from = step["observation"], step["tool"]
        loop_end = max(loop_end, (end - start_ns) / ns)
    loop_end = max(loop_end, float(row["agent_s"]))
    finish = start_ns + round((loop_end + float(row["exec_s"])) * ns)
    if float(row["exec_s"]) > 0:
        spans.append(SpanRecord(
            "hidden tests", "EVALUATOR", start_ns + round(loop_end * ns), finish,
            inputs={"completion_sha": row["completion_sha"]}, outputs=outcome,
        ))
    root.end_ns = max(finish, *(span.end_ns for span in spans))
    tags = {"checkpoint": row["checkpoint"], "task_id": row["task_id"],
            "sample": str(row["sample"]), "seed": str(row["seed"]), "harness": row["harness"],
            "passed": _flag(row["passed"]), "public_passed": _flag(row["public_passed"]),
            "status": row["status"], "end_reason": row["end_reason"], "trace_rule": rule}
    return EpisodeTrace(name, {TAG + key: str(value) for key, value in tags.items()}, spans)


def openings(tasks: list[Task], harness: Harness) -> dict[str, str]:
    """What each task's environment showed the agent before its first turn (no sandbox is
    touched: the opening is text)."""
    return {task.id: make_environment(task, None, None, harness.template,  # type: ignore[arg-type]
                                      harness.tools).opening() for task in tasks}


# --- writing traces to the run's store -----------------------------------------------------


def log_episode_traces(run: StageRun, root: Path, table: pd.DataFrame, tasks: list[Task],
                       harness: Harness, config: TracingConfig, split: str) -> dict[str, float]:
    """Trace the sampled episodes of a val rollout table into `run`; the counts and seconds,
    for the run's metrics. Call it from the thread that opened the run (NOTES.md)."""
    if split != "val":
        raise StageError(f"traces are built from val episodes only, not {split}: test episodes "
                         "stay sealed")
    started = time.perf_counter()
    sampled, counts = sample_episodes(table, config)
    traces = build_traces(sampled, openings(tasks, harness))
    write_traces(traces, run.run_id, tracking_uri(root))
    run.set_tags({"tracing": config.describe()})
    return {**counts, "traces_s": time.perf_counter() - started}


def build_traces(sampled: pd.DataFrame, opening: Mapping[str, str],
                 start_ns: int | None = None) -> list[EpisodeTrace]:
    anchor = time.time_ns() if start_ns is None else start_ns
    return [episode_trace(row, opening.get(row["task_id"]), anchor + i * 1_000_000,
                          row.get("rule", ""))
            for i, row in enumerate(sampled.to_dict("records"))]


def ensure_offline() -> None:
    """Telemetry off (as every heldout process sets it) and no OTLP export configured for the
    API path; checked again here because tracing is where MLflow would phone out."""
    os.environ.update(TELEMETRY_OFF)
    from mlflow.telemetry.client import get_telemetry_client, set_telemetry_client

    if get_telemetry_client() is not None:
        set_telemetry_client()  # re-reads the environment: off
    if get_telemetry_client() is not None:
        raise StageError("MLflow telemetry is on; set MLFLOW_DISABLE_TELEMETRY=true")


def write_traces(traces: list[EpisodeTrace], run_id: str, uri: str,
                 writer: Literal["batch", "span_api"] | None = None) -> list[str]:
    """Log the traces into the run's experiment, linked to the run; their trace ids. `batch`
    writes spans straight to the store where it takes batches (`batch_writes`); `span_api`
    goes through mlflow.start_span_no_context (any store; slower): the fallback."""
    import mlflow
    from mlflow.tracing.client import TracingClient

    ensure_offline()
    client = TracingClient(uri)
    experiment_id = mlflow.MlflowClient(uri).get_run(run_id).info.experiment_id
    if writer is None:
        writer = "batch" if batch_writes(client.store) else "span_api"
    if writer == "batch":
        return _write_batches(client, traces, experiment_id, run_id)
    return _write_with_span_api(traces, experiment_id, run_id, uri)


def batch_writes(store: Any) -> bool:
    """A SQL store takes spans in batches (log_spans), and so does a tracking server's REST
    store from MLflow 3.4 on (the version MLflow's own log_spans asks for); no other store."""
    from mlflow.store.tracking.rest_store import RestStore
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from packaging.version import Version

    if type(store) is not RestStore:  # a subclass (Databricks') logs spans elsewhere
        return isinstance(store, SqlAlchemyStore)
    version = store._get_server_version(store.get_host_creds())
    return version is not None and version >= Version("3.4")


def _trace_ids(run_id: str, trace: EpisodeTrace) -> tuple[int, list[int]]:
    """OpenTelemetry ids from (run, episode): writing the same episode twice into one run
    writes one trace."""
    key = f"{run_id}\0{trace.tags[TAG + 'checkpoint']}\0{trace.name}".encode()
    trace_id = int.from_bytes(hashlib.sha256(key).digest()[:16], "big") | 1
    return trace_id, [int.from_bytes(hashlib.sha256(key + b"\0%d" % i).digest()[:8], "big") | 1
                      for i in range(len(trace.spans))]


def _metadata(run_id: str) -> dict[str, str]:
    from mlflow.tracing.constant import TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY

    return {"mlflow.sourceRun": run_id, TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION)}


def _write_batches(client: Any, traces: list[EpisodeTrace], experiment_id: str,
                   run_id: str) -> list[str]:
    from mlflow.entities import Span, TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import MAX_CHARS_IN_TRACE_INFO_METADATA, TraceMetadataKey
    from mlflow.tracing.utils import build_otel_context, dump_span_attribute_value
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Status, StatusCode

    def preview(value: Any) -> str:
        return dump_span_attribute_value(value)[:MAX_CHARS_IN_TRACE_INFO_METADATA]

    written, pending = [], []
    for number, trace in enumerate(traces, 1):
        otel_trace_id, span_ids = _trace_ids(run_id, trace)
        trace_id = f"tr-{otel_trace_id:032x}"
        for record, span_id in zip(trace.spans, span_ids, strict=True):
            attributes = {"mlflow.traceRequestId": trace_id, "mlflow.spanType": record.span_type,
                          "mlflow.spanInputs": record.inputs,
                          "mlflow.spanOutputs": record.outputs, **record.attributes}
            if record.parent is None:
                attributes["mlflow.experimentId"] = experiment_id
            parent = (None if record.parent is None
                      else build_otel_context(otel_trace_id, span_ids[record.parent]))
            pending.append(Span(ReadableSpan(
                name=record.name, context=build_otel_context(otel_trace_id, span_id),
                parent=parent, start_time=record.start_ns, end_time=record.end_ns,
                attributes={k: dump_span_attribute_value(v) for k, v in attributes.items()},
                status=Status(StatusCode.ERROR if record.error else StatusCode.OK),
                resource=Resource.get_empty(),
            )))
        root = trace.root
        client.start_trace(TraceInfo(
            trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
            request_time=root.start_ns // 1_000_000,
            execution_duration=(root.end_ns - root.start_ns) // 1_000_000,
            state=TraceState.ERROR if root.error else TraceState.OK,
            request_preview=preview(root.inputs), response_preview=preview(root.outputs),
            trace_metadata={**_metadata(run_id),
                            TraceMetadataKey.INPUTS: preview(root.inputs),
                            TraceMetadataKey.OUTPUTS: preview(root.outputs)},
            tags={"mlflow.traceName": trace.name, **trace.tags},
        ))
        written.append(trace_id)
        if number % BATCH_EPISODES == 0 or number == len(traces):
            client.log_spans(experiment_id, pending)
            pending = []
    return written


_SYNCHRONOUS_LOCAL = {
    # One trace at a time, written before the call returns (the async queue drops traces when
    # it is full), to the tracking store only (never an OTLP collector), every trace sampled.
    "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false",
    "MLFLOW_ENABLE_OTLP_EXPORTER": "false",
    "MLFLOW_TRACE_ENABLE_OTLP_DUAL_EXPORT": "false",
    "MLFLOW_TRACE_SAMPLING_RATIO": "1.0",
}


@contextlib.contextmanager
def _synchronous_local_tracing(uri: str) -> Iterator[None]:
    import mlflow

    saved = {key: os.environ.get(key) for key in _SYNCHRONOUS_LOCAL}
    previous_uri = mlflow.get_tracking_uri()
    os.environ.update(_SYNCHRONOUS_LOCAL)
    mlflow.set_tracking_uri(uri)
    mlflow.tracing.reset()  # the tracer provider is rebuilt from the settings above
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        mlflow.set_tracking_uri(previous_uri)
        mlflow.tracing.reset()


def _write_with_span_api(traces: list[EpisodeTrace], experiment_id: str, run_id: str,
                         uri: str) -> list[str]:
    import mlflow
    from mlflow.entities import SpanStatusCode

    written = []
    with _synchronous_local_tracing(uri):
        for trace in traces:
            live: list[Any] = []
            for record in trace.spans:
                is_root = record.parent is None
                live.append(mlflow.start_span_no_context(
                    record.name, span_type=record.span_type,
                    parent_span=None if is_root else live[record.parent],
                    inputs=record.inputs, attributes=record.attributes,
                    experiment_id=experiment_id if is_root else None,
                    start_time_ns=record.start_ns,
                    tags=trace.tags if is_root else None,
                    metadata=_metadata(run_id) if is_root else None,
                ))
            for record, span in reversed(list(zip(trace.spans, live, strict=True))):
                span.set_outputs(record.outputs)
                span.set_status(SpanStatusCode.ERROR if record.error else SpanStatusCode.OK)
                span.end(end_time_ns=record.end_ns)  # the root last: that writes the trace
            written.append(live[0].trace_id)
    return written
