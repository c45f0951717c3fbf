"""`dvc repro` on a fresh copy of the project, as a new user runs it: real DVC, real Prefect
(its temporary server on loopback), real MLflow store at the project's default location."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

VENV_BIN = str(Path(sys.executable).parent)


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def fresh_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MLFLOW_", "PREFECT_", "DVC_", "DO_NOT_TRACK"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{VENV_BIN}:{env['PATH']}",
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org",
    )
    return env


def test_dvc_repro_splits_logs_and_is_a_no_op_the_second_time(project: Path, fresh_env):
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        assert run(cmd, project, fresh_env).returncode == 0

    first = run(["dvc", "repro"], project, fresh_env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Running stage 'split'" in first.stdout
    for name in ("train", "val", "test"):
        assert (project / "data" / "split" / f"{name}.jsonl").stat().st_size > 0

    second = run(["dvc", "repro"], project, fresh_env)
    assert second.returncode == 0, second.stderr
    assert "Running stage" not in second.stdout
    assert "up to date" in second.stdout

    client = mlflow.MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("heldout")
    runs = client.search_runs([experiment.experiment_id], "tags.`heldout.stage` = 'split'")
    assert len(runs) == 1, "the no-op repro must not run the stage again"
    assert runs[0].data.tags["heldout.test_version"].startswith("t-")
    assert runs[0].data.tags["heldout.git_commit"]

    # The project, not the user's shell, put Prefect's state in the project and kept it there.
    assert (project / ".prefect").is_dir()
    assert not (Path(fresh_env["HOME"]) / ".prefect").exists()
    assert (project / "mlartifacts").is_dir()
