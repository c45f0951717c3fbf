from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def heldout(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], cwd=cwd, capture_output=True, text=True
    )


def test_help_lists_the_commands_without_importing_prefect_or_mlflow():
    done = heldout("--help")
    assert done.returncode == 0 and "stage" in done.stdout and "tasks" in done.stdout
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys; from cli.main import app; "
         "print(sorted(m for m in ('prefect', 'mlflow', 'dvc', 'pandas') if m in sys.modules))"],
        capture_output=True, text=True,
    )
    assert probe.stdout.strip() == "[]"


def test_an_unknown_stage_lists_the_known_ones_and_exits_2(project: Path):
    done = heldout("stage", "nonesuch", cwd=project)
    assert done.returncode == 2
    assert "unknown stage 'nonesuch'" in done.stderr and "split" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_stage_outside_a_project_says_where_to_run(tmp_path: Path):
    done = heldout("stage", "split", cwd=tmp_path)
    assert done.returncode == 2
    assert "no heldout project" in done.stderr


def test_serve_without_a_prefect_server_says_how_to_get_one(project: Path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run([sys.executable, "-m", "cli.main", "serve"], cwd=project, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "a schedule needs a Prefect server" in done.stderr and "PREFECT_API_URL" in done.stderr
