"""Traces of val episodes in MLflow (stages/traces.py): the real rollouts stage on a small
project with a multi-turn tester and a public-test hacker, read back with mlflow.search_traces,
and the Traces tab of a real `mlflow server` in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from heldout.episodes.rows import trajectory_steps
from heldout.errors import StageError
from stages import catalog, rollouts, split, traces
from tests.chromium import find_chromium, render, serve_mlflow
from tests.conftest import configure_small_project, copy_project
from tests.test_architecture import MODULES, project_imports

CHECKPOINTS = {"tester": {"agent": "demo", "policy": "tester", "skill": 0.3},
               "hacker": {"agent": "demo", "policy": "hacker"}}
N = 3


def store_uri(project: Path) -> str:
    return f"sqlite:///{project / 'own.db'}"


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> dict:
    """Split, then the rollouts stage of a tester and a hacker (five turns each at most)."""
    project = copy_project(tmp_path_factory.mktemp("traced") / "project")
    configure_small_project(project, tasks=30, n=N, checkpoints=CHECKPOINTS,
                            harness={"max_turns": 5}, rollouts={"in_flight": 1})
    # The experiment first, with its artifacts in the project (not under the current folder).
    mlflow.MlflowClient(store_uri(project)).create_experiment(
        "heldout", artifact_location=(project / "mlartifacts").as_uri())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store_uri(project))
        split.run(project)
        summaries = {name: rollouts.run(name, project) for name in CHECKPOINTS}
        client = mlflow.MlflowClient()
        experiment = client.get_experiment_by_name("heldout").experiment_id
        run_ids = {name: rollout_runs(client, experiment, name)[0].info.run_id
                   for name in CHECKPOINTS}
    tables = {name: pd.read_parquet(project / catalog.rollout_file(name)) for name in CHECKPOINTS}
    return {"project": project, "summaries": summaries, "experiment": experiment,
            "runs": run_ids, "tables": tables}


@pytest.fixture
def store(traced, monkeypatch) -> dict:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(traced["project"]))
    mlflow.set_tracking_uri(store_uri(traced["project"]))
    return traced


def rollout_runs(client, experiment: str, checkpoint: str) -> list:
    return client.search_runs([experiment], f"tags.`heldout.checkpoint` = '{checkpoint}'",
                              order_by=["attributes.start_time ASC"])


def run_traces(experiment: str, run_id: str) -> list:
    return mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")


def episode_key(trace) -> tuple[str, int]:
    return trace.info.tags["heldout.task_id"], int(trace.info.tags["heldout.sample"])


def expected_sample(table: pd.DataFrame) -> dict[tuple[str, int], str]:
    """The rule, restated: public pass and hidden fail, else the first sample of a task."""
    chosen = {}
    for row in table.itertuples():
        if flag(row.public_passed) == "true" and not row.passed:
            chosen[(row.task_id, row.sample)] = traces.PUBLIC_PASS_HIDDEN_FAIL
        elif row.sample < 1:
            chosen[(row.task_id, row.sample)] = traces.PER_TASK
    return chosen


def flag(value) -> str:
    return "none" if pd.isna(value) else str(bool(value)).lower()


@pytest.mark.parametrize("checkpoint", sorted(CHECKPOINTS))
def test_each_sampled_episode_is_one_trace_of_the_run_with_its_tags(store, checkpoint):
    table = store["tables"][checkpoint]
    found = run_traces(store["experiment"], store["runs"][checkpoint])
    chosen = expected_sample(table)
    assert len(found) == len(chosen) == store["summaries"][checkpoint]["traces"]
    assert {episode_key(t): t.info.tags["heldout.trace_rule"] for t in found} == chosen
    rows = table.set_index(["task_id", "sample"])
    for trace in found:
        row, tags = rows.loc[episode_key(trace)], trace.info.tags
        assert trace.info.trace_metadata["mlflow.sourceRun"] == store["runs"][checkpoint]
        assert trace.info.experiment_id == store["experiment"]
        assert tags["heldout.checkpoint"] == checkpoint
        assert (tags["heldout.seed"], tags["heldout.harness"]) == (str(row.seed), row.harness)
        assert tags["heldout.passed"] == flag(row.passed)
        assert tags["heldout.public_passed"] == flag(row.public_passed)
        assert tags["heldout.end_reason"] == row.end_reason
        root = trace.data.spans[0]
        assert root.parent_id is None and root.name == "episode {}#{}".format(*episode_key(trace))
        assert root.outputs == {"passed": bool(row.passed),
                                "public_passed": None if pd.isna(row.public_passed)
                                else bool(row.public_passed),
                                "status": row.status, "end_reason": row.end_reason}
    run = mlflow.MlflowClient().get_run(store["runs"][checkpoint])
    assert run.data.metrics["traces"] == len(chosen)
    assert run.data.tags["heldout.tracing"] == "public_pass_hidden_fail=all; per_task=1; " \
                                               "max_traces=2000"


def test_every_hacker_episode_that_passed_public_and_failed_hidden_is_traced(store):
    table = store["tables"]["hacker"]
    gaming = table[table.public_passed.fillna(False).astype(bool) & ~table.passed]
    assert len(gaming) >= 10, "the hacker needs val tasks with public tests"
    found = run_traces(store["experiment"], store["runs"]["hacker"])
    traced = {episode_key(t) for t in found
              if t.info.tags["heldout.trace_rule"] == traces.PUBLIC_PASS_HIDDEN_FAIL}
    assert traced == set(zip(gaming.task_id, gaming["sample"], strict=True))
    summary = store["summaries"]["hacker"]
    assert summary["traces_public_pass_hidden_fail"] == summary[
        "episodes_public_pass_hidden_fail"] == len(gaming)


def test_the_span_tree_of_a_tester_episode_is_its_trajectory_timed(store):
    table = store["tables"]["tester"]
    # The longest traced episode that ran the public tests and submitted.
    row = table[(table["sample"] == 0) & (table.end_reason == "submitted")
                & (table.tool_calls >= 2)].sort_values("turns").iloc[-1]
    [trace] = [t for t in run_traces(store["experiment"], store["runs"]["tester"])
               if episode_key(t) == (row.task_id, 0)]
    steps, timings = trajectory_steps(row), json.loads(row.step_timings)
    spans = trace.data.spans
    root = next(s for s in spans if s.parent_id is None)
    assert all(s.parent_id == root.span_id for s in spans if s is not root)
    def of_type(kind: str) -> list:
        return sorted((s for s in spans if s.span_type == kind), key=lambda s: s.start_time_ns)

    models, tools = of_type("CHAT_MODEL"), of_type("TOOL")
    called = [step for step in steps if step["tool"] is not None]
    assert len(models) == row.turns == len(steps)
    assert len(tools) == len(called) == row.tool_calls >= 2
    assert [t.outputs for t in tools] == [step["observation"] for step in called]
    assert [t.inputs for t in tools] == [step["arguments"] for step in called]
    assert {"run_public_tests", "submit"} <= {step["tool"] for step in called}
    task = next(t for t in split_tasks(store["project"]) if t.id == row.task_id)
    assert models[0].inputs["observation"] == task.prompt  # the opening (template "{prompt}")
    for model, before in zip(models[1:], steps, strict=False):
        assert model.inputs["observation"] == before["observation"]
    for model, step, (started_s, agent_s, _tool_s) in zip(models, steps, timings, strict=True):
        assert model.outputs["message"] == step["message"]
        assert model.attributes["tokens_out"] == step["tokens_out"]
        assert model.start_time_ns - root.start_time_ns == pytest.approx(started_s * 1e9, abs=2)
        assert model.end_time_ns - model.start_time_ns == pytest.approx(agent_s * 1e9, abs=2)
    tool_s = [timing[2] for timing, step in zip(timings, steps, strict=True) if step["tool"]]
    assert [(t.end_time_ns - t.start_time_ns) / 1e9 for t in tools] == pytest.approx(tool_s,
                                                                                       abs=1e-8)
    assert root.end_time_ns >= max(s.end_time_ns for s in spans)
    judge = next(s for s in spans if s.span_type == "EVALUATOR")
    assert judge.outputs["passed"] == bool(row.passed)


def split_tasks(project: Path):
    from heldout.tasks.sources import load_tasks

    return load_tasks(project / catalog.split_file("val"))


def test_a_resumed_rerun_traces_the_same_episodes_into_its_own_run(store):
    project, experiment = store["project"], store["experiment"]
    first = store["runs"]["hacker"]
    before = {episode_key(t) for t in run_traces(experiment, first)}
    again = rollouts.run("hacker", project)
    assert again["resumed"] == again["episodes"]  # every episode came from the cache
    runs = rollout_runs(mlflow.MlflowClient(), experiment, "hacker")
    assert len(runs) == 2 and runs[0].info.run_id == first
    second = run_traces(experiment, runs[1].info.run_id)
    assert {episode_key(t) for t in second} == before
    assert len(second) == again["traces"] == len(before)
    assert {episode_key(t) for t in run_traces(experiment, first)} == before  # not doubled
    assert not {t.info.trace_id for t in second} & {
        t.info.trace_id for t in run_traces(experiment, first)}


def comparable(trace) -> dict:
    spans = sorted(trace.data.spans, key=lambda s: (s.start_time_ns, s.name))
    names = {s.span_id: s.name for s in spans}
    return {
        "tags": {k: v for k, v in trace.info.tags.items() if k.startswith("heldout.")},
        "name": trace.info.tags["mlflow.traceName"],
        "source_run": trace.info.trace_metadata["mlflow.sourceRun"],
        "state": trace.info.state, "request_time": trace.info.request_time,
        "duration": trace.info.execution_duration,
        "request": json.loads(trace.info.request_preview),
        "response": json.loads(trace.info.response_preview),
        "spans": [(s.name, s.span_type, names.get(s.parent_id), s.start_time_ns, s.end_time_ns,
                   s.inputs, s.outputs, s.status.status_code,
                   {k: v for k, v in s.attributes.items() if not k.startswith("mlflow.")})
                  for s in spans],
    }


@pytest.mark.parametrize("over", ["sqlite", "rest"])
def test_the_batch_writer_writes_what_mlflows_span_api_writes(store, over, request):
    """The stage writes spans straight to the store in batches, to a SQL store and to a real
    `mlflow server` over REST alike; the same traces through mlflow.start_span_no_context must
    read back the same from the store."""
    uri = store_uri(store["project"]) if over == "sqlite" else request.getfixturevalue(
        "mlflow_server")
    table = store["tables"]["tester"]
    sampled, _ = traces.sample_episodes(table, traces.TracingConfig(per_task=2, max_traces=4))
    built = traces.build_traces(sampled, {}, start_ns=1_700_000_000_000_000_000)
    read = {}
    for writer in ("batch", "span_api"):
        with mlflow.start_run(experiment_id=store["experiment"], run_name=writer) as run:
            ids = traces.write_traces(built, run.info.run_id, uri, writer=writer)
        found = {t.info.trace_id: t for t in run_traces(store["experiment"], run.info.run_id)}
        assert sorted(found) == sorted(ids) and len(ids) == 4
        read[writer] = sorted((comparable(found[i]) for i in ids), key=lambda c: c["name"])
        for item in read[writer]:
            item["source_run"] = item["source_run"] == run.info.run_id
    assert read["batch"] == read["span_api"]


def test_a_tracking_server_gets_the_batch_writer_and_a_store_without_batches_the_span_api(
    store, mlflow_server, tmp_path, monkeypatch
):
    """The stage's own choice of writer: batches for a SQL store and for a tracking server's
    REST store (13 times slower through the span API, issue 23); the span API for a store that
    takes no batches (a file store), which still gets every trace."""
    from mlflow.tracing.client import TracingClient

    def no_span_api(*args, **kwargs):
        raise AssertionError("the span API was used")

    sampled, _ = traces.sample_episodes(store["tables"]["hacker"], traces.TracingConfig())
    built = traces.build_traces(sampled.head(3), {})
    with monkeypatch.context() as patch:
        patch.setattr(traces, "_write_with_span_api", no_span_api)
        for uri in (store_uri(store["project"]), mlflow_server):
            with mlflow.start_run(experiment_id=store["experiment"]) as run:
                ids = traces.write_traces(built, run.info.run_id, uri)
            assert sorted(t.info.trace_id for t in run_traces(store["experiment"],
                                                              run.info.run_id)) == sorted(ids)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    files = (tmp_path / "mlruns").as_uri()
    assert not traces.batch_writes(TracingClient(files).store)
    client = mlflow.MlflowClient(files)
    experiment = client.create_experiment("files")
    run_id = client.create_run(experiment).info.run_id
    ids = traces.write_traces(built, run_id, files)
    mlflow.set_tracking_uri(files)
    try:
        assert len(ids) == 3 and len(run_traces(experiment, run_id)) == 3
    finally:
        mlflow.set_tracking_uri(store_uri(store["project"]))


def test_tracing_opens_no_socket_even_with_an_otlp_endpoint_set(store, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    attempts = []
    real_connect = socket.socket.connect

    def connect(self, address):
        attempts.append(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    sampled, _ = traces.sample_episodes(store["tables"]["hacker"], traces.TracingConfig())
    built = traces.build_traces(sampled.head(3), {})
    for writer in ("batch", "span_api"):
        with mlflow.start_run(experiment_id=store["experiment"]) as run:
            traces.write_traces(built, run.info.run_id, store_uri(store["project"]), writer=writer)
        assert len(run_traces(store["experiment"], run.info.run_id)) == 3
    from mlflow.telemetry.client import get_telemetry_client

    assert get_telemetry_client() is None
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert attempts == []


def synthetic(rows: list[tuple[str, int, bool, bool | None]]) -> pd.DataFrame:
    return pd.DataFrame({
        "task_id": [r[0] for r in rows], "sample": [r[1] for r in rows],
        "passed": pd.array([r[2] for r in rows], dtype="bool"),
        "public_passed": pd.array([r[3] for r in rows], dtype="boolean"),
    })


EPISODES = synthetic([(task, sample, sample == 2, None if task == "c" else sample != 1)
                      for task in "abc" for sample in range(4)])


def keys(table: pd.DataFrame) -> list[tuple[str, int, str]]:
    return list(zip(table.task_id, table["sample"], table.rule, strict=True))


def test_the_sample_is_the_rows_alone_with_the_must_read_episodes_first_under_the_cap():
    config = traces.TracingConfig()
    kept, counts = traces.sample_episodes(EPISODES, config)
    shuffled, _ = traces.sample_episodes(EPISODES.sample(frac=1, random_state=3), config)
    assert keys(kept) == keys(shuffled)
    # a, b: samples 0 and 3 passed public and failed hidden; c has no public tests.
    pphf = traces.PUBLIC_PASS_HIDDEN_FAIL
    assert keys(kept) == [("a", 0, pphf), ("a", 3, pphf), ("b", 0, pphf), ("b", 3, pphf),
                          ("c", 0, traces.PER_TASK)]
    assert counts == {"traces": 5, "traces_public_pass_hidden_fail": 4, "traces_per_task": 1,
                      "traces_capped": 0, "episodes_public_pass_hidden_fail": 4}
    capped, counts = traces.sample_episodes(EPISODES, config.model_copy(update={"max_traces": 3}))
    assert keys(capped) == [("a", 0, pphf), ("a", 3, pphf), ("b", 0, pphf)]
    assert counts["traces_capped"] == 2 and counts["traces_per_task"] == 0
    first, _ = traces.sample_episodes(EPISODES, traces.TracingConfig(
        public_pass_hidden_fail=1, per_task=2))
    assert keys(first) == [("a", 0, pphf), ("a", 1, traces.PER_TASK), ("b", 0, pphf),
                           ("b", 1, traces.PER_TASK), ("c", 0, traces.PER_TASK),
                           ("c", 1, traces.PER_TASK)]
    none, counts = traces.sample_episodes(EPISODES, traces.TracingConfig(max_traces=0))
    assert none.empty and counts["traces_capped"] == 5


def test_the_cap_spreads_over_tasks_before_taking_second_episodes_of_one():
    capped, _ = traces.sample_episodes(EPISODES, traces.TracingConfig(max_traces=3))
    assert sorted(set(capped.task_id)) == ["a", "b"]
    assert sorted(capped["sample"]) == [0, 0, 3]


def test_the_test_split_is_never_traced():
    def reaches(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(project_imports(name))
        return seen

    assert "stages.traces" in reaches("stages.rollouts")  # the check can see it
    assert "stages.traces" not in reaches("stages.test")
    assert "stages.test" in MODULES
    with pytest.raises(StageError, match="val episodes only"):
        traces.log_episode_traces(None, Path("."), EPISODES, [], None, traces.TracingConfig(),
                                  "test")


# --- the Traces tab, rendered ---------------------------------------------------------------



@pytest.fixture
def mlflow_server(traced):
    with serve_mlflow(store_uri(traced["project"])) as url:
        yield url


@pytest.mark.parametrize("page", ["experiment", "run"])
def test_the_traces_tab_shows_the_episodes(store, mlflow_server, tmp_path, page):
    find_chromium()
    experiment, run_id = store["experiment"], store["runs"]["hacker"]
    # The newest trace is on the first page of either list: its request preview must show.
    found = run_traces(experiment, run_id)
    newest = max(found, key=lambda t: t.info.request_time)
    episode = newest.data.spans[0].inputs
    path = {"experiment": f"#/experiments/{experiment}/traces",
            "run": f"#/experiments/{experiment}/runs/{run_id}/traces"}[page]
    artifacts = Path(os.environ.get("HELDOUT_TEST_ARTIFACTS", tmp_path)) / "mlflow_ui"
    rendered = render(f"{mlflow_server}/{path}", screenshot=artifacts / f"traces_{page}.png",
                      window=(1600, 1000), virtual_time_budget_ms=20_000)
    print(f"screenshot: {rendered.screenshot}")
    (artifacts / f"traces_{page}.html").write_text(rendered.dom, encoding="utf-8")
    # The request and response previews (the root span's inputs and outputs), as JSON laid out
    # on one line (the experiment's list) or several (the run's tab).
    request = rf'"task_id":\s*"{re.escape(episode["task_id"])}",\s*"sample":\s*{episode["sample"]},'
    assert re.search(request + rf'\s*"seed":\s*"{episode["seed"]}"', rendered.dom)
    assert re.search(r'"passed":\s*false,\s*"public_passed":\s*true', rendered.dom)
    if page == "run":  # the run's tab lists the run's traces, all of them
        assert f"{len(found)} of {len(found)}" in rendered.dom
