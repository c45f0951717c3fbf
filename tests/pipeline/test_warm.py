"""Warm starts: under the pipeline, `heldout stage` becomes a fork of a process that imported
everything already, with the caller's output, exit code and working folder; without a starter
it starts cold."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.warm import WARM_ENV, warm_starts
from tests.conftest import configure_small_project

HELDOUT = [sys.executable, "-X", "importtime", "-m", "cli.main"]


def stage(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*HELDOUT, "stage", *args], cwd=project, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=300)


def imported(stderr: str) -> set[str]:
    """The modules this very process imported (-X importtime; a fork inherits no such flag)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


@pytest.fixture
def small(project: Path, monkeypatch) -> Path:
    configure_small_project(project, tasks=20, n=2)
    monkeypatch.chdir(project)
    return project


def starter_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def test_a_warm_stage_runs_in_a_fork_with_the_callers_output_and_exit_code(small: Path):
    with warm_starts(small):
        split = stage(small, "split")
        assert split.returncode == 0, split.stderr[-3000:]
        assert (small / "data/split/manifest.json").is_file()
        modules = imported(split.stderr)
        assert "flows.warm" in modules and "mlflow" not in modules and "prefect" not in modules

        # A user error in the fork reaches the caller's stderr and exit code.
        bad = stage(small, "rollouts", "--checkpoint", "nonesuch")
        assert bad.returncode == 2
        assert "checkpoints.nonesuch: no such checkpoint" in bad.stderr
        assert "mlflow" not in imported(bad.stderr)

        # Prefect and MLflow read their settings on import: other settings mean a cold start.
        elsewhere = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{small / 'other.db'}"}
        other = stage(small, "split", env=elsewhere)
        assert other.returncode == 0, other.stderr[-3000:]
        assert "mlflow" in imported(other.stderr) and (small / "other.db").is_file()


def test_an_interrupted_caller_stops_its_fork(small: Path):
    configure_small_project(small, tasks=40, n=60)
    with warm_starts(small):
        assert stage(small, "split").returncode == 0
        starter = int(os.environ[WARM_ENV].split(":")[0])
        caller = subprocess.Popen([*HELDOUT, "stage", "rollouts", "--checkpoint", "late"],
                                  cwd=small, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not starter_children(starter):
            assert time.monotonic() < deadline and caller.poll() is None
            time.sleep(0.05)
        (fork,) = starter_children(starter)
        caller.send_signal(signal.SIGTERM)
        caller.wait(timeout=30)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{fork}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{fork}").exists(), "the fork outlived its caller"
        assert not (small / "data/rollouts/val/late.parquet").exists()


def test_without_a_starter_the_stage_starts_cold(small: Path):
    env = {**os.environ, WARM_ENV: "999999999:/nonexistent/starter.sock"}
    split = stage(small, "split", env=env)
    assert split.returncode == 0, split.stderr[-3000:]
    assert "mlflow" in imported(split.stderr)
