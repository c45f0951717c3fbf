"""A DVC project of one quick stage, in git, for the tests that need real `dvc exp run` (what it
does to git's index, what `dvc exp show` reads) without running heldout's pipeline: an
experiment takes a few seconds instead of a minute. The stage is a Python script the test
writes; it runs heldout's code from this checkout (PYTHONPATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

VENV_BIN = str(Path(sys.executable).parent)


def dvc_environment(home: Path) -> dict[str, str]:
    """A user's shell: the venv's `dvc` and `python` first, a home of its own, a git identity,
    none of the test session's stores or keys."""
    home.mkdir(parents=True, exist_ok=True)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("MLFLOW_", "PREFECT_", "DVC_EXP", "HELDOUT_TEST_KEY",
                                           "GIT_", "XDG_CONFIG_HOME"))}
    environment.update(
        HOME=str(home), PATH=f"{VENV_BIN}:{environment['PATH']}", PYTHONPATH=str(REPO),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org",
    )
    return environment


def run(command: list[str], cwd: Path, environment: dict[str, str],
        check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=300)
    if check:
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done


def tiny_project(folder: Path, environment: dict[str, str], script: str, params: dict,
                 outs: list[str], metrics: list = (), untracked: list[str] = ()) -> Path:
    """git and DVC initialised, one stage `write` (`python stage.py`, reading every params
    section), committed with its first run's dvc.lock; `untracked` files are left out of git."""
    folder.mkdir(parents=True)
    (folder / "stage.py").write_text(script)
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stage = {"cmd": f"{sys.executable} stage.py", "deps": ["stage.py"], "params": sorted(params)}
    if outs:
        stage["outs"] = list(outs)
    if metrics:
        stage["metrics"] = list(metrics)
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"write": stage}}))
    run(["git", "init", "-q"], folder, environment)
    run(["dvc", "init", "-q"], folder, environment)
    run(["dvc", "repro", "-q"], folder, environment)
    run(["git", "add", "-A"], folder, environment)
    for name in untracked:
        run(["git", "rm", "-q", "--cached", "--", name], folder, environment)
    run(["git", "commit", "-qm", "init"], folder, environment)
    return folder


def porcelain(folder: Path, environment: dict[str, str], path: str) -> str:
    """`git status --porcelain` of one path: "M  x" staged, " M x" not, "?? x" untracked."""
    return run(["git", "status", "--porcelain", "--", path], folder, environment).stdout.rstrip(
        "\n")
