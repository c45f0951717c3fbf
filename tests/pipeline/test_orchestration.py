"""Orchestration: episodes fan out as mapped Prefect tasks on threads or a real Dask
LocalCluster with the same rows, and the pipeline flow lets DVC decide what runs."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import distributed
import httpx
import mlflow
import pandas as pd
import pytest
import yaml

from heldout.canonical import sha256_hex
from heldout.episodes.rows import TIMING_COLUMNS
from stages import split
from stages.catalog import rollout_file
from tests.conftest import VERDICT_LINE, configure_small_project


def set_params(project: Path, section: str, **values: object) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params[section].update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def latest_flow_run(client: object, flow_name: str) -> object:
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    return client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                 sort=FlowRunSort.START_TIME_DESC, limit=1)[0]


def task_runs_of_latest_flow_run(flow_name: str, expected: int) -> list[str]:
    """The names of the completed task runs of the newest run of the flow, once the server has
    `expected` task runs of it and every one is completed (task runs from Dask workers arrive
    as events, a while after the flow returns on a loaded machine), or after 120 s."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        latest = latest_flow_run(client, flow_name)
        deadline = time.monotonic() + 120
        while True:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[latest.id])))
            names = [run.name for run in runs if run.state and run.state.is_completed()]
            if len(runs) >= expected and len(names) == len(runs):
                return sorted(names)
            if time.monotonic() > deadline:
                return sorted(names)  # the caller's assertion says which are missing
            time.sleep(0.2)


def progress_of_latest_flow_run(flow_name: str):
    """The progress artifact of the newest run of the flow, as Prefect's UI shows it."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowFilter,
        FlowFilterName,
    )
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        latest = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
            sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        (artifact,) = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[latest.id])))
        return artifact


class RecordingCluster(distributed.LocalCluster):
    """A LocalCluster that remembers it was made, so the test sees the Dask runner used it."""

    made: list[RecordingCluster] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        RecordingCluster.made.append(self)


def test_rollouts_on_a_dask_local_cluster_match_the_threads_runner(
    prefect_api_url, project: Path, monkeypatch
):
    from flows.rollouts import rollouts_flow

    RecordingCluster.made.clear()  # another test's clusters are no part of this one
    configure_small_project(project, tasks=30, n=4,
                            checkpoints={"ck": {"agent": "demo", "skill": 0.5}},
                            rollouts={"chunk_episodes": 7})
    monkeypatch.chdir(project)
    split.run(project)
    episodes = json.loads((project / "data/split/manifest.json").read_text())["counts"]["val"] * 4
    chunks = math.ceil(episodes / 7)
    task_runs = sorted(f"ck[{i}]" for i in range(chunks))

    summary = rollouts_flow(checkpoint="ck")
    on_threads = pd.read_parquet(project / rollout_file("ck"))
    assert summary["episodes"] == episodes and summary["resumed"] == 0
    assert task_runs_of_latest_flow_run("rollouts", len(task_runs)) == task_runs
    progress = progress_of_latest_flow_run("rollouts")
    assert progress.data == 100.0
    assert progress.description.startswith(f"ck: {episodes}/{episodes} episodes, ")
    assert "in flight in this process, ETA 0s" in progress.description

    shutil.rmtree(project / ".heldout")  # no resume: every episode runs again, on Dask
    set_params(project, "orchestration", task_runner="dask", dask_workers=2)
    monkeypatch.setattr(distributed, "LocalCluster", RecordingCluster)
    summary = rollouts_flow(checkpoint="ck")
    on_dask = pd.read_parquet(project / rollout_file("ck"))
    assert summary["resumed"] == 0
    (cluster,) = RecordingCluster.made
    finished = sum(prefix.state_counts["memory"]
                   for prefix in cluster.scheduler.task_prefixes.values())
    assert finished == chunks
    assert task_runs_of_latest_flow_run("rollouts", len(task_runs)) == task_runs
    pd.testing.assert_frame_equal(on_threads.drop(columns=list(TIMING_COLUMNS)),
                                  on_dask.drop(columns=list(TIMING_COLUMNS)))


def test_the_score_stages_canaries_run_on_the_dask_cluster_like_the_rollouts(
    prefect_api_url, project: Path, monkeypatch
):
    """The canaries' episodes go through the executor the flow's task runner gives, as the
    rollouts' do: on Dask, chunks of the cluster; their verdict is the one threads give."""
    from flows.rollouts import rollouts_flow
    from flows.score import score_flow

    configure_small_project(project, tasks=20, n=1,
                            checkpoints={"ck": {"agent": "demo", "skill": 0.5}},
                            rollouts={"chunk_episodes": 5})
    monkeypatch.chdir(project)
    split.run(project)
    rollouts_flow(checkpoint="ck")
    on_threads = score_flow()
    shutil.rmtree(project / ".heldout")  # the canaries' episodes run again, on Dask
    set_params(project, "orchestration", task_runner="dask", dask_workers=2)
    monkeypatch.setattr(distributed, "LocalCluster", RecordingCluster)
    RecordingCluster.made.clear()
    on_dask = score_flow()
    assert RecordingCluster.made, "the score stage made no Dask cluster"
    val = json.loads((project / "data/split/manifest.json").read_text())["counts"]["val"]
    chunks = math.ceil(val / 5)
    task_runs = sorted(f"canary:{name}[{i}]" for name in ("blind", "oracle", "stacker")
                       for i in range(chunks))
    assert task_runs_of_latest_flow_run("score", len(task_runs)) == task_runs
    assert on_dask["canaries"] == on_threads["canaries"]
    assert on_dask["canaries"]["oracle_pass_rate"] == 1.0
    assert on_dask["canaries"]["blind_pass_rate"] == 0.0
    assert on_dask["canaries"]["stacker_passes"] == on_dask["canaries"]["stacker_expected"]


# --- no listener beyond loopback (issue 23) ----------------------------------------------


def process_tree(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, pending = set(), [root]
    while pending:
        pid = pending.pop()
        found.add(pid)
        pending += children.get(pid, [])
    return found


def socket_owners(pids: set[int]) -> dict[str, int]:
    """Socket inode -> the process holding it, for these processes."""
    owners = {}
    for pid in pids:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                owners[link[8:-1]] = pid
    return owners


def address(table: str, hexadecimal: str) -> tuple[str, int]:
    import ipaddress

    host, port = hexadecimal.split(":")
    raw = bytes.fromhex(host)
    if table == "tcp":
        return str(ipaddress.IPv4Address(raw[::-1])), int(port, 16)
    # /proc/net/tcp6 prints the address as four 32-bit words in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words)), int(port, 16)


def listening_sockets(root: int) -> set[tuple[int, str, int]]:
    """(pid, host, port) of every TCP socket in LISTEN state held by `root` or a descendant."""
    owners = socket_owners(process_tree(root))
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in owners:  # 0A: TCP_LISTEN
                found.add((owners[fields[9]], *address(table, fields[1])))
    return found


class ListenerWatch:
    """Samples this process tree's listening sockets on a thread until stopped."""

    def __init__(self):
        import threading

        self.seen: set[tuple[int, str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.seen |= listening_sockets(os.getpid())
            self._stop.wait(0.05)

    def __enter__(self) -> ListenerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def beyond_loopback(self) -> set[tuple[int, str, int]]:
        import ipaddress

        return {s for s in self.seen if not ipaddress.ip_address(s[1]).is_loopback}


def documented(command: str) -> list[str]:
    """The loopback `dask ...` command line docs/team.md gives."""
    text = (Path(__file__).resolve().parents[2] / "docs/team.md").read_text()
    (line,) = [line.strip() for line in text.splitlines()
               if line.strip().startswith(command) and "127.0.0.1" in line]
    return line.split()


def test_no_dask_listener_beyond_loopback_local_cluster_or_documented_cluster(
    prefect_api_url, project: Path, monkeypatch
):
    """During a Dask run, /proc/net/tcp and tcp6 hold no listening socket of this test's
    processes on any address but loopback: heldout's own LocalCluster (scheduler, nannies,
    workers, dashboard), then the scheduler and workers docs/team.md starts by hand."""
    from flows.rollouts import rollouts_flow

    configure_small_project(project, tasks=12, n=1,
                            checkpoints={"ck": {"agent": "demo", "skill": 0.5}},
                            rollouts={"chunk_episodes": 3})
    monkeypatch.chdir(project)
    split.run(project)
    set_params(project, "orchestration", task_runner="dask", dask_workers=2)
    monkeypatch.setattr(distributed, "LocalCluster", RecordingCluster)
    RecordingCluster.made.clear()
    with ListenerWatch() as watch:
        rollouts_flow(checkpoint="ck")
    assert RecordingCluster.made
    # The scheduler, its dashboard, and a nanny and a worker per process were all seen.
    assert len({s for s in watch.seen if s[0] != os.getpid()}) >= 4, watch.seen
    assert watch.beyond_loopback() == set()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bin_dir = Path(sys.executable).parent
    scheduler_cmd = [part.replace("8786", str(port)) for part in documented("dask scheduler")]
    worker_cmd = [part.replace("8786", str(port)) for part in documented("dask worker")]
    scheduler_cmd[0], worker_cmd[0] = str(bin_dir / "dask"), str(bin_dir / "dask")
    started = [subprocess.Popen(scheduler_cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        deadline = time.monotonic() + 120
        while True:  # the worker starts once the scheduler takes connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert started[0].poll() is None, "the documented dask scheduler exited"
                assert time.monotonic() < deadline, "the dask scheduler never listened"
                time.sleep(0.1)
        started.append(subprocess.Popen(worker_cmd, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True))
        set_params(project, "orchestration", dask_address=f"tcp://127.0.0.1:{port}")
        shutil.rmtree(project / ".heldout")
        with ListenerWatch() as watch:
            summary = rollouts_flow(checkpoint="ck")
        assert summary["resumed"] == 0
        assert {s[2] for s in watch.seen} >= {port}, watch.seen
        assert watch.beyond_loopback() == set()
    finally:
        for process in reversed(started):
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def git_project(project: Path, monkeypatch) -> None:
    """A committed project with `heldout` on PATH, as DVC's stage commands need."""
    for key, value in GIT.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=project, check=True)
    monkeypatch.chdir(project)


def pipeline_runs(experiment: str = "heldout") -> list:
    client = mlflow.MlflowClient()
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], "tags.`heldout.stage` = 'pipeline'",
                              order_by=["attributes.start_time ASC"])


def flow_names_tagged(tag: str) -> list[str]:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(
            all_=[tag])))
        assert all(run.state.is_completed() for run in runs)
        return sorted(client.read_flow(run.flow_id).name for run in runs)


def test_the_pipeline_flow_lets_dvc_decide_and_records_every_stage(
    prefect_api_url, project: Path, monkeypatch
):
    from flows.pipeline import pipeline_flow
    from heldout.errors import StageError

    configure_small_project(project, tasks=20, n=1)  # what runs where, not how much
    git_project(project, monkeypatch)
    already = len(pipeline_runs()) if mlflow.MlflowClient().get_experiment_by_name(
        "heldout") else 0

    first = pipeline_flow(root=str(project))
    stages = ["split", "decontaminate", "rollouts@base", "rollouts@late", "score", "select",
              "sensitivity", "test", "report"]
    assert sorted(first["ran"]) == sorted(stages) and first["up_to_date"] == []
    order = first["ran"].index
    assert order("split") == 0 and order("select") < order("test") < order("report")
    assert order("decontaminate") < order("sensitivity")
    assert first["dvc_lock_sha256"] == sha256_hex((project / "dvc.lock").read_bytes())
    assert VERDICT_LINE.search((project / "reports/report.md").read_text())

    second = pipeline_flow(root=str(project))
    assert second["ran"] == [] and sorted(second["up_to_date"]) == sorted(stages)
    assert second["dvc_lock_sha256"] == first["dvc_lock_sha256"]
    # `make repro`'s way, with no server configured: DVC finds nothing stale, so the command
    # says so and starts nothing (no Prefect server, no flow run, no MLflow run).
    alone = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    third = subprocess.run(["heldout", "pipeline"], cwd=project, env=alone,
                           capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stdout + third.stderr
    assert third.stdout == "pipeline: nothing to do, 9 stages up to date\n"
    assert third.stderr == ""

    # Only a pipeline run in which something ran (or failed) is an MLflow run: the second flow
    # run found every stage up to date, and the third command never started one.
    runs = pipeline_runs()[already:]
    assert [r.data.metrics["stages_ran"] for r in runs] == [9]
    assert runs[0].data.metrics["stage_s.rollouts.base"] > 0
    assert runs[0].data.tags["heldout.dvc_lock"] == first["dvc_lock_sha256"]
    logged = mlflow.artifacts.load_dict(f"{runs[0].info.artifact_uri}/pipeline.json")
    assert logged["ran"] == first["ran"]
    # Every stage process ran as a flow run on the same API, tagged with the pipeline's run.
    assert flow_names_tagged(f"pipeline:{runs[0].data.tags['heldout.prefect_flow_run']}") == [
        "decontaminate", "report", "rollouts", "rollouts", "score", "select", "sensitivity",
        "split", "test"]

    # A stage that fails stops the pipeline: the summary names it and what it kept from running.
    set_params(project, "checkpoints", bad={"agent": "nonesuch"})
    # The stage's own user error comes back as the pipeline's error, once.
    with pytest.raises(StageError, match=r"^rollouts@bad failed: params.yaml: "
                                         r"checkpoints.bad.agent: 'nonesuch' is not an agent"):
        pipeline_flow(root=str(project))
    failed = pipeline_runs()[-1]
    assert failed.info.status == "FAILED"
    summary = mlflow.artifacts.load_dict(f"{failed.info.artifact_uri}/pipeline.json")
    assert summary["failed"] == ["rollouts@bad"]
    assert {"score", "select", "test", "report"} <= set(summary["not_reached"])
    assert "rollouts@bad" not in summary["ran"]


@pytest.fixture
def real_prefect_server(tmp_path: Path):
    """`prefect server start` on a free loopback port, with its scheduler services: a schedule
    needs a real server (NOTES.md). Yields its API URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-server"),
           "PREFECT_UI_ENABLED": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host", "127.0.0.1",
         "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert server.poll() is None and time.monotonic() < deadline, "no Prefect server"
        time.sleep(0.5)
    try:
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


# The slow tier's, beside tests/pipeline/test_deploy.py: `make test` keeps the pipeline flow
# (test_the_pipeline_flow_lets_dvc_decide_and_records_every_stage) and the deployment's pinning
# (the fast tests of tests/pipeline/test_deploy.py).
@pytest.mark.slow
def test_the_nightly_deployment_is_served_on_its_schedule_and_runs_the_pipeline(
    real_prefect_server: str, project: Path, monkeypatch
):
    from prefect import get_client
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configure_small_project(project, tasks=20, n=1)
    set_params(project, "orchestration", nightly_cron="17 3 * * 1",
               nightly_timezone="Europe/Paris")
    git_project(project, monkeypatch)
    env = {**os.environ, "PREFECT_API_URL": real_prefect_server}
    serving = subprocess.Popen([str(Path(sys.executable).parent / "heldout"), "serve"],
                               cwd=project, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        with temporary_settings({PREFECT_API_URL: real_prefect_server}):
            with get_client(sync_client=True) as client:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        deployment = client.read_deployment_by_name("pipeline/nightly")
                        break
                    except Exception:  # noqa: BLE001 - not registered yet
                        assert serving.poll() is None, serving.stdout.read()
                        assert time.monotonic() < deadline, "the deployment never appeared"
                        time.sleep(0.5)
            (schedule,) = deployment.schedules
            assert schedule.active
            assert schedule.schedule.cron == "17 3 * * 1"
            assert schedule.schedule.timezone == "Europe/Paris"
            assert deployment.parameters == {"root": str(project)}

            run = run_deployment("pipeline/nightly", timeout=900)
        assert run.state.is_completed(), run.state
        assert VERDICT_LINE.search((project / "reports/report.md").read_text())
        assert json.loads((project / "data/test/access.json").read_text())["tasks"] > 0
    finally:
        os.killpg(serving.pid, signal.SIGINT)
        try:
            serving.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a run still going: stop it, keep the first error
            os.killpg(serving.pid, signal.SIGKILL)
            serving.wait(timeout=30)
