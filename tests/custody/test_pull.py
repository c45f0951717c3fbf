"""Results a teammate can pull (issue 23, item 7): every output reaches a DVC remote, and a clone
that pulls them runs nothing, opens nothing and records nothing; the outcome files are the same
bytes run after run (timings apart); heldout.git_commit is the tree the pipeline started from."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import yaml

from heldout.custody.guard import sealing
from heldout.episodes.rows import TIMING_COLUMNS
from stages.access_record import RESULT_FILES, TIMINGS
from stages.catalog import ACCESS, LEDGER, REPORTS, TEST_METRICS
from stages.common import GIT_COMMIT_ENV, git_commit, tree_commit
from tests.conftest import TeamRun
from tests.pipeline.test_fresh_clone import ok, porcelain

VENV_BIN = str(Path(sys.executable).parent)
UP_TO_DATE = "Data and pipelines are up to date."


def ledger_lines(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        return db.execute("SELECT count(*) FROM heldout_ledger").fetchone()[0]


def run_ids(uri: str) -> list[str]:
    client = mlflow.MlflowClient(uri)
    experiments = client.search_experiments()
    return sorted(r.info.run_id for r in client.search_runs([e.experiment_id for e in experiments]))


def outputs_of(project: Path) -> dict[str, bytes]:
    names = [*map(str, RESULT_FILES), str(ACCESS), str(TEST_METRICS), "reports/report.md",
             "dvc.lock", str(LEDGER)]
    return {name: (project / name).read_bytes() for name in names}


def test_a_teammate_pulls_the_results_and_runs_nothing(tmp_path: Path, team_run: TeamRun):
    """The team's first run (tests/conftest.py: one ledger store, one MLflow store, a DVC
    remote), committed and pushed from a copy of its clone; the teammate clones and pulls."""
    env, store = team_run.env, team_run.store
    assert "test: ran in" in team_run.run.stdout and "report: ran in" in team_run.run.stdout
    first = tmp_path / "first"
    with sealing():  # this process guards the run's test split; copying it is not reading it
        shutil.copytree(team_run.first, first, symlinks=True)
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    # Every stage's run and the summary's name the tree the pipeline started from: a clean
    # clone, not `+dirty` from the dvc.lock and ledger the pipeline itself wrote.
    commits = {client.get_run(r).data.tags["heldout.git_commit"] for r in team_run.runs}
    runs = run_ids(env["MLFLOW_TRACKING_URI"])  # the store as the teammate finds it
    assert commits == {team_run.head}, commits
    lines = ledger_lines(store)
    assert lines == 2  # opened, closed

    ok(["git", "add", "dvc.lock", str(LEDGER)], first, env)
    ok(["git", "commit", "-qm", "the first run"], first, env)
    pushed = ok(["dvc", "push"], first, env)
    assert "pushed" in pushed.stdout, pushed.stdout

    # The teammate: a clone of that commit and `dvc pull`, nothing copied by hand.
    second = tmp_path / "second"
    ok(["git", "clone", "-q", str(first), str(second)], tmp_path, env)
    ok(["dvc", "pull"], second, env)
    pulled = outputs_of(second)
    assert pulled == outputs_of(first), "the pull brings every output of the run, test included"
    assert (second / REPORTS / "report.html").is_file()
    assert UP_TO_DATE in ok(["dvc", "status"], second, env).stdout

    again = ok(["heldout", "pipeline"], second, env)
    assert again.stdout == "pipeline: nothing to do, 9 stages up to date\n", again.stdout
    assert UP_TO_DATE in ok(["dvc", "status"], second, env).stdout
    assert run_ids(env["MLFLOW_TRACKING_URI"]) == runs, "no stage ran, no pipeline run recorded"
    assert ledger_lines(store) == lines, "reading results is not an access"
    assert outputs_of(second) == pulled
    assert porcelain(second, env) == set()

    # Forced, the stage runs, finds its outputs are the closed access's, and opens nothing.
    forced = ok(["dvc", "repro", "--force", "--single-item", "test"], second, env)
    assert "reading them is not an access" in forced.stdout, forced.stdout
    assert ledger_lines(store) == lines
    assert run_ids(env["MLFLOW_TRACKING_URI"]) == runs
    assert outputs_of(second) == pulled, "dvc.lock and every output as they were"
    assert UP_TO_DATE in ok(["dvc", "status"], second, env).stdout


def run_test_stage(project: Path, monkeypatch) -> dict[str, bytes]:
    from stages import test as test_stage

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["reruns"].update(runs=4, episodes=0)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    test_stage.run(project)
    return {str(name): (project / name).read_bytes() for name in RESULT_FILES}


def test_two_runs_write_the_same_outcome_bytes_and_keep_timings_apart(
    selected, selected_copy: Path, tmp_path: Path, monkeypatch
):
    """Two independent accesses (two copies, no episode in either cache) of the same models."""
    from heldout.custody.guard import sealing

    other = tmp_path / "other"
    with sealing():
        shutil.copytree(selected, other)
    one = run_test_stage(selected_copy, monkeypatch)
    two = run_test_stage(other, monkeypatch)
    assert one == two, [name for name in one if one[name] != two[name]]
    access = json.loads((selected_copy / ACCESS).read_text())
    assert access["outputs"] == json.loads((other / ACCESS).read_text())["outputs"]
    for arm in ("candidate", "base"):
        table = pd.read_parquet(selected_copy / f"data/test/rollouts/{arm}.parquet")
        assert not set(TIMING_COLUMNS) & set(table.columns)
    timings = pd.read_parquet(selected_copy / TIMINGS)
    assert set(TIMING_COLUMNS) <= set(timings.columns)
    assert set(timings["run"]) == {"candidate", "base",
                                   *(f"{arm}:rerun{r}" for arm in ("base", "candidate")
                                     for r in (1, 2, 3))}
    assert (timings["agent_s"] > 0).all()
    # Wall-clock lives there and nowhere in the outcomes: no run is timed the same twice.
    assert not timings["agent_s"].equals(pd.read_parquet(other / TIMINGS)["agent_s"])


def git(project: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", *args], cwd=project, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_git_commit_is_the_tree_before_the_pipeline_wrote_dvc_lock(tmp_path: Path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "dvc.lock").write_text("schema: '2.0'\n")
    (project / "params.yaml").write_text("a: 1\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "init")
    head = git(project, "rev-parse", "HEAD")
    monkeypatch.delenv(GIT_COMMIT_ENV, raising=False)
    monkeypatch.setenv(GIT_COMMIT_ENV, tree_commit(project))  # as flows/pipeline.py does
    (project / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")  # the pipeline's write
    assert git_commit(project) == head
    # A stage run by itself sees the tree as it is.
    monkeypatch.delenv(GIT_COMMIT_ENV)
    assert git_commit(project) == head + "+dirty"
    # A tree dirty before the pipeline started stays dirty, whatever happens to it later.
    git(project, "checkout", "-q", "--", "dvc.lock")
    (project / "params.yaml").write_text("a: 2\n")
    monkeypatch.setenv(GIT_COMMIT_ENV, tree_commit(project))
    git(project, "checkout", "-q", "--", "params.yaml")
    assert git_commit(project) == head + "+dirty"
    # A value naming another commit than HEAD (stale, or set by hand) is not believed.
    monkeypatch.setenv(GIT_COMMIT_ENV, "0" * 40)
    assert git_commit(project) == head
