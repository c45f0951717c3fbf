"""A fresh clone is clean: a run writes nothing git would pick up but the state a run is meant to
leave for a commit (the staged test-access ledger, and dvc.lock), DVC's views write only where
git ignores, and a commit of that run is up to date in a clone of it: `dvc repro` runs nothing
and leaves `git status` empty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import configure_small_project, copy_project

VENV_BIN = str(Path(sys.executable).parent)

# What a run leaves for git: the ledger, staged by the test stage on purpose (custody: commit
# it), and dvc.lock, which the committed project must hold as the run wrote it.
LEFT_FOR_A_COMMIT = {"A  ledger/test_access.jsonl", "?? dvc.lock"}
# Everything else a run, `dvc plots show` and `dvc metrics show` write: ignored. DVC's outputs,
# then each clone's own state (README: "Where things go").
DVC_OUTPUTS = {"data/", "metrics/", "plots/", "reports/"}
LOCAL_STATE = {
    ".heldout/", "mlflow.db", "mlflow.db-journal", "mlartifacts/", ".prefect/",
    "ledger/test_access.jsonl.lock", "dvc_plots/", ".dvc/plots/index.html",
    ".dvc/config.local", ".dvc/cache/", ".dvc/tmp/",
}


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def ok(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = run(cmd, cwd, env)
    assert done.returncode == 0, f"{' '.join(cmd)}: {done.stdout}{done.stderr}"
    return done


def porcelain(project: Path, env: dict[str, str], *options: str) -> set[str]:
    lines = ok(["git", "status", "--porcelain", *options], project, env).stdout.splitlines()
    return {line for line in lines if "__pycache__" not in line}


def stages_run(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def user_shell(tmp_path: Path) -> dict[str, str]:
    """A user's shell with nothing of ours in it: a home of its own, the venv on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MLFLOW_", "PREFECT_", "DVC_", "DO_NOT_TRACK",
                                  "HELDOUT_", "XDG_CONFIG_HOME"))}
    env.update(HOME=str(home), PATH=f"{VENV_BIN}:{env['PATH']}",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return env


@pytest.fixture
def fresh_env(tmp_path: Path) -> dict[str, str]:
    return user_shell(tmp_path)


# The slow tier's (a whole run, then a clone of its commit run again); `make test` keeps what the
# views write (below) and a clone of a committed run that runs nothing (tests/custody/test_pull.py).
@pytest.mark.slow
def test_a_fresh_clone_runs_clean_and_a_commit_of_its_run_is_up_to_date(tmp_path: Path,
                                                                         fresh_env):
    origin = copy_project(tmp_path / "origin")
    configure_small_project(origin, tasks=30, n=2, reruns={"runs": 4, "episodes": 1},
                            sensitivity={"fields": {"max_turns": [3]}})
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        ok(cmd, origin, fresh_env)
    first = tmp_path / "first"
    ok(["git", "clone", "-q", str(origin), str(first)], tmp_path, fresh_env)

    repro = ok(["dvc", "repro"], first, fresh_env)
    assert {"split", "score", "test", "report"} <= stages_run(repro.stdout)
    for view in (["dvc", "plots", "show"], ["dvc", "metrics", "show"]):
        ok(view, first, fresh_env)
    assert (first / "dvc_plots" / "index.html").is_file()
    assert porcelain(first, fresh_env) == LEFT_FOR_A_COMMIT
    ignored = {line[3:] for line in porcelain(first, fresh_env, "--ignored")
               if line.startswith("!! ")}
    assert ignored - DVC_OUTPUTS - LOCAL_STATE == set(), "a run wrote local state no one listed"

    # Committed as the run left it: dvc.lock matches the committed code and params.
    ok(["git", "add", "dvc.lock"], first, fresh_env)
    ok(["git", "commit", "-qm", "the first run"], first, fresh_env)
    assert porcelain(first, fresh_env) == set()

    # A clone of that commit, with the outputs a teammate would have: DVC's cache (the first
    # clone's) and the outputs copied beside it (tests/custody/test_pull.py pulls them from a
    # remote).
    second = tmp_path / "second"
    ok(["git", "clone", "-q", str(first), str(second)], tmp_path, fresh_env)
    ok(["dvc", "cache", "dir", "--local", str(first / ".dvc" / "cache")], second, fresh_env)
    ok(["cp", "-a", *(str(first / name) for name in sorted(DVC_OUTPUTS)), str(second)],
       tmp_path, fresh_env)
    again = ok(["dvc", "repro"], second, fresh_env)
    assert stages_run(again.stdout) == set(), again.stdout
    assert "Data and pipelines are up to date." in again.stdout
    for view in (["dvc", "plots", "show"], ["dvc", "metrics", "show"]):
        ok(view, second, fresh_env)
    assert porcelain(second, fresh_env) == set()


def test_what_a_run_and_the_views_write_is_ignored(tmp_path: Path, fresh_env):
    """The same list, fast: each path, made by hand, is ignored by the project's .gitignore."""
    project = copy_project(tmp_path / "project")
    ok(["git", "init", "-q"], project, fresh_env)
    for entry in sorted(DVC_OUTPUTS | LOCAL_STATE):
        path = project / entry.rstrip("/")
        if entry.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            path = path / "something"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("local\n")
    ok(["git", "add", "-A"], project, fresh_env)
    staged = ok(["git", "diff", "--cached", "--name-only"], project, fresh_env).stdout.split()
    tracked = {name for name in staged
               if any(name == entry or name.startswith(entry)
                      for entry in DVC_OUTPUTS | LOCAL_STATE)}
    assert tracked == set()
