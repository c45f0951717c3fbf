"""A project copied or moved keeps to its own folder (issue 39 item 6): its MLflow runs write
their artifacts under the copy, never the original's `mlartifacts/`, and the stage commands
DVC starts find this installation's `heldout` without the venv on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow

from stages.tracking import ARTIFACTS, TrackingConfig, stage_run


def one_run(project: Path, note: str, monkeypatch) -> str:
    """A stage's run in `project`, as a process of its own starts it: on the project's own
    store (mlflow.set_tracking_uri leaves the last one in the environment)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (project / "note.txt").write_text(note)
    with stage_run(project, TrackingConfig(), "check", {"stage": "check"}) as run:
        mlflow.log_artifact(str(project / "note.txt"))
        return run.run_id


def files_under(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*") if path.is_file()}


def test_a_copied_project_writes_its_artifacts_under_the_copy(tmp_path, monkeypatch, capfd):
    original = tmp_path / "original"
    original.mkdir()
    first = one_run(original, "made in the original", monkeypatch)
    before = files_under(original / ARTIFACTS)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)

    second = one_run(copy, "made in the copy", monkeypatch)
    assert files_under(original / ARTIFACTS) == before, "the copy wrote into the original"
    client = mlflow.MlflowClient(f"sqlite:///{copy / 'mlflow.db'}")
    for run_id in (first, second):  # the copied run too: its files came along
        uri = client.get_run(run_id).info.artifact_uri
        assert uri.startswith((copy / ARTIFACTS).as_uri() + "/"), uri
        local = Path(uri.removeprefix("file://")) / "note.txt"
        assert local.read_text() == ("made in the original" if run_id == first
                                     else "made in the copy")
    assert "now point under" in capfd.readouterr().err
    # The original's store is its own still.
    original_client = mlflow.MlflowClient(f"sqlite:///{original / 'mlflow.db'}")
    assert original_client.get_run(first).info.artifact_uri.startswith(
        (original / ARTIFACTS).as_uri())


def test_the_stage_commands_find_this_installations_heldout_without_the_venv_on_path(
        tmp_path):
    probe = ("import os, shutil; from pathlib import Path; "
             "from heldout.environment import apply_defaults; apply_defaults(Path.cwd()); "
             "print(shutil.which('heldout'))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PATH": "/usr/bin:/bin",
                                          "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(Path(sys.executable).parent / "heldout")


def test_a_stage_given_a_relative_project_folder_runs_there(tmp_path, monkeypatch):
    """MLflow's artifact location is a file URI, which a relative folder cannot be: the stage
    resolves the folder it is given before anything reads it."""
    from stages import split
    from tests.conftest import configure_small_project, copy_project

    configure_small_project(copy_project(tmp_path / "p"), tasks=12)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert split.run(Path("p"))["counts"]["test"] > 0
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'p' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("heldout").experiment_id])
    assert [run.info.run_name for run in runs] == ["split"]
    assert runs[0].info.artifact_uri.startswith((tmp_path / "p" / ARTIFACTS).as_uri())
