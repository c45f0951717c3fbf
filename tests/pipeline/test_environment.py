from __future__ import annotations

import os
from pathlib import Path

import pytest

from heldout.environment import apply_defaults, find_project_root, store_root
from heldout.errors import StageError


def test_project_root_is_found_from_a_subfolder(project: Path):
    (project / "data" / "deep").mkdir(parents=True)
    assert find_project_root(project / "data" / "deep") == project.resolve()


def test_outside_a_project_the_error_says_where_to_run(tmp_path: Path):
    with pytest.raises(StageError, match="dvc.yaml"):
        find_project_root(tmp_path)


def test_a_dvc_temp_experiment_keeps_the_stores_of_its_repository():
    copy = Path("/repo/.dvc/tmp/exps/tmp1a2b3c")
    assert store_root(copy) == Path("/repo")
    assert store_root(Path("/repo")) == Path("/repo")


def test_defaults_are_absolute_telemetry_is_forced_off_and_user_stores_win(
    project: Path, monkeypatch
):
    for name in ("MLFLOW_TRACKING_URI", "PREFECT_HOME", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "true")
    apply_defaults(project)
    assert os.environ["MLFLOW_TRACKING_URI"] == f"sqlite:///{project}/mlflow.db"
    assert os.environ["PREFECT_HOME"] == f"{project}/.prefect"
    assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert "127.0.0.1" in os.environ["NO_PROXY"]

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    apply_defaults(project)
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000"
