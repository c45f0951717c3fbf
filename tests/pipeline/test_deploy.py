"""`heldout deploy --pool`: the nightly pipeline on a work pool, pinned to one commit. A real
Prefect server and a real `prefect worker` run the deployment after the source's HEAD moved on,
and the run is the deployed commit's; the pinning checks themselves, without a server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from flows import pinned
from heldout.errors import StageError
from tests.conftest import configure_small_project, copy_project

GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
BIN = Path(sys.executable).parent
# What the commit made after deploying does to the pipeline flow: a worker that ran the
# checkout's HEAD (or the remote's tip) instead of the deployed commit would fail on it.
NEW_HEAD_BREAKS = '\nraise RuntimeError("the new HEAD ran, not the deployed commit")\n'


def run(cmd: list[str], cwd: Path, **env: str) -> str:
    done = subprocess.run(cmd, cwd=cwd, env={**os.environ, **GIT, **env}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
    return done.stdout


def source_repository(tmp_path: Path) -> tuple[Path, Path]:
    """A cut-down project committed and pushed to a bare `origin` next to it."""
    source = configure_small_project(copy_project(tmp_path / "source"), tasks=20, n=1)
    run(["git", "init", "-q", "-b", "main"], source)
    run(["git", "add", "-A"], source)
    run(["git", "commit", "-qm", "the deployed commit"], source)
    remote = tmp_path / "remote.git"
    run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], tmp_path)
    run(["git", "remote", "add", "origin", str(remote)], source)
    run(["git", "push", "-q", "-u", "origin", "main"], source)
    return source, remote


def move_head_on(source: Path) -> str:
    """A new commit that breaks the pipeline flow, pushed: HEAD and the remote's tip move on."""
    with (source / "flows/pipeline.py").open("a", encoding="utf-8") as module:
        module.write(NEW_HEAD_BREAKS)
    run(["git", "commit", "-qam", "after deploying"], source)
    run(["git", "push", "-q", "origin", "main"], source)
    return pinned.head_commit(source)


def heldout(*args: str, cwd: Path) -> str:
    return run([str(BIN / "heldout"), *args], cwd, PATH=f"{BIN}:{os.environ['PATH']}")


@pytest.fixture
def worker(prefect_api_url: str, tmp_path: Path):
    """A process work pool and a real `prefect worker` polling it; yields the pool's name."""
    pool = f"pool-{os.getpid()}-{time.monotonic_ns()}"
    run([str(BIN / "prefect"), "work-pool", "create", pool, "--type", "process"], tmp_path)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [str(BIN / "prefect"), "worker", "start", "--pool", pool, "--type", "process",
         "--prefetch-seconds", "0"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield pool
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()


def run_split_only(commit: str, tmp_path: Path):
    """A run of the deployment, as `prefect deployment run` makes it, of the pipeline flow's
    cheapest stage; the flow run once it ended."""
    from prefect.deployments import run_deployment

    flow_run = run_deployment("pipeline/nightly", parameters={"targets": ["split"]},
                              timeout=600)
    log = (tmp_path / "worker.log").read_text()
    assert flow_run.state.is_completed(), f"{flow_run.state}\n{log[-4000:]}"
    assert flow_run.parameters["commit"] == commit
    assert f"commit:{commit}" in flow_run.tags
    return flow_run


def mlflow_runs_of(commit: str, stage: str) -> list:
    # The store the worker inherited, by name: a stage run in this process earlier in the
    # session leaves mlflow's global tracking URI pointing at its own project.
    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("heldout")
    return client.search_runs([experiment.experiment_id],
                              f"tags.`heldout.git_commit` = '{commit}' and "
                              f"tags.`heldout.stage` = '{stage}'")


@pytest.mark.slow
def test_a_worker_runs_the_deployed_commit_not_the_new_head(
    worker: str, prefect_api_url: str, tmp_path: Path
):
    from prefect import get_client

    source, remote = source_repository(tmp_path)
    deployed = pinned.head_commit(source)
    work_dir = tmp_path / "worker-folder"
    work_dir.mkdir()  # the worker's, on the worker's machine
    said = heldout("deploy", "--pool", worker, "--work-dir", str(work_dir), cwd=source)
    assert f"commit {deployed} of {remote}" in said and "0 2 * * * (UTC)" in said
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("pipeline/nightly")
    assert deployment.work_pool_name == worker
    assert deployment.entrypoint == "flows/pipeline.py:pipeline_flow"
    assert deployment.parameters == {"commit": deployed}
    assert deployment.global_concurrency_limit.limit == 1
    (schedule,) = deployment.schedules
    assert schedule.schedule.cron == "0 2 * * *"
    (step,) = deployment.pull_steps
    assert step["prefect.deployments.steps.git_clone"]["commit_sha"] == deployed

    new_head = move_head_on(source)
    assert new_head != deployed
    flow_run = run_split_only(deployed, tmp_path)
    # The worker's clone holds the deployed commit; the run's stages and its summary say so.
    assert pinned.head_commit(work_dir / "remote") == deployed
    assert (work_dir / "remote/data/split/manifest.json").is_file()
    (split_run,) = mlflow_runs_of(deployed, "split")
    (summary,) = mlflow_runs_of(deployed, "pipeline")
    assert summary.data.tags["heldout.deployed_commit"] == deployed
    assert summary.data.tags["heldout.prefect_flow_run"] == str(flow_run.id)
    assert mlflow_runs_of(new_head, "split") == []
    # The next night, in the same worker folder: the first run's own write (dvc.lock) is no
    # edit that refuses it (issue 39 item 4: `vc.lock` once was, and every later night failed).
    assert "dvc.lock" in run(["git", "status", "--porcelain"], work_dir / "remote")
    second = run_split_only(deployed, tmp_path)
    assert second.id != flow_run.id

    # A local pinned copy (--source): deployed from a clone of HEAD in a folder of its own,
    # which the next commits in the checkout do not touch.
    (source / "flows/pipeline.py").write_text(
        (source / "flows/pipeline.py").read_text().replace(NEW_HEAD_BREAKS, ""))
    run(["git", "commit", "-qam", "the flow works again"], source)
    deployed = pinned.head_commit(source)
    copies = tmp_path / "pinned"
    said = heldout("deploy", "--pool", worker, "--source", str(copies), cwd=source)
    copy = (copies / deployed[:12]).resolve()
    assert f"commit {deployed} of {copy}" in said
    new_head = move_head_on(source)
    run_split_only(deployed, tmp_path)
    assert pinned.head_commit(copy) == deployed
    (split_run,) = mlflow_runs_of(deployed, "split")
    assert mlflow_runs_of(new_head, "split") == []


# --- the pinning, without a server -------------------------------------------------------


def test_a_deployed_run_refuses_a_folder_holding_another_commit_or_edits(tmp_path: Path):
    source, _ = source_repository(tmp_path)
    deployed = pinned.head_commit(source)
    pinned.check_runs_deployed(source, deployed)
    (source / "dvc.lock").write_text("schema: '2.0'\n")  # what the pipeline writes itself
    run(["git", "add", "dvc.lock"], source)
    pinned.check_runs_deployed(source, deployed)
    with (source / "params.yaml").open("a") as params:
        params.write("# edited after deploying\n")
    with pytest.raises(StageError, match="has edits to tracked files \\(params.yaml\\)"):
        pinned.check_runs_deployed(source, deployed)
    run(["git", "commit", "-qam", "moved on"], source)
    with pytest.raises(StageError, match=f"deployed at commit {deployed[:12]}, and .* holds"):
        pinned.check_runs_deployed(source, deployed)


def test_a_local_pinned_copy_is_the_commit_and_is_not_reused_once_edited(tmp_path: Path):
    source, _ = source_repository(tmp_path)
    commit = pinned.head_commit(source)
    copy = pinned.pinned_copy(source, tmp_path / "copies", commit)
    assert copy == (tmp_path / "copies" / commit[:12]).resolve()
    assert pinned.head_commit(copy) == commit and pinned.uncommitted(copy) == []
    assert pinned.pinned_copy(source, tmp_path / "copies", commit) == copy
    (copy / "params.yaml").write_text("edited: true\n")
    with pytest.raises(StageError, match="is not an untouched copy"):
        pinned.pinned_copy(source, tmp_path / "copies", commit)


def test_deploy_refuses_a_commit_the_remote_does_not_hold(tmp_path: Path):
    source, remote = source_repository(tmp_path)
    assert pinned.remote_url(source, "origin", pinned.head_commit(source)) == str(remote)
    (source / "params.yaml").write_text((source / "params.yaml").read_text() + "# local\n")
    run(["git", "commit", "-qam", "not pushed"], source)
    with pytest.raises(StageError, match="push it first"):
        pinned.remote_url(source, "origin", pinned.head_commit(source))
    with pytest.raises(StageError, match="no git remote 'upstream'"):
        pinned.remote_url(source, "upstream", pinned.head_commit(source))


def test_deploy_needs_a_prefect_server(tmp_path: Path):
    source, _ = source_repository(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([str(BIN / "heldout"), "deploy", "--pool", "p"], cwd=source, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "deploying needs a Prefect server" in done.stderr


def test_the_pipelines_own_writes_are_told_apart_whatever_line_they_come_first_on(
        tmp_path: Path):
    """`git status --porcelain` starts an unstaged change with a space: stripping the output
    once cut `dvc.lock` to `vc.lock` when it came first, and the next nightly was refused."""
    repo = tmp_path / "repo"
    repo.mkdir()
    run(["git", "init", "-q", "-b", "main"], repo)
    for name in ("dvc.lock", "params.yaml", "a file with spaces.txt", "moved.txt"):
        (repo / name).write_text("v1\n")
    (repo / "ledger").mkdir()
    (repo / "ledger" / "test_access.jsonl").write_text("")
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "one"], repo)
    (repo / "dvc.lock").write_text("v2\n")  # the first line, unstaged: " M dvc.lock"
    (repo / "ledger" / "test_access.jsonl").write_text("{}\n")
    assert pinned.uncommitted(repo) == []
    (repo / "params.yaml").write_text("v2\n")
    (repo / "a file with spaces.txt").write_text("v2\n")
    run(["git", "mv", "moved.txt", "renamed.txt"], repo)
    assert sorted(pinned.uncommitted(repo)) == ["a file with spaces.txt", "params.yaml",
                                                "renamed.txt"]
