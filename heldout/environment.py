"""Where the project is, and the environment every heldout process runs in.

Telemetry is off and every store path is absolute because the project says so, not because a
user remembered to export something. Values already set by the user win.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from heldout.errors import StageError

PROJECT_MARKERS = ("dvc.yaml", "params.yaml")
# `dvc exp run --temp` runs stages in a copy of the repo under this folder; a store kept in
# that copy would vanish with it, so the stores stay with the repository that holds the copy.
_DVC_TEMP_WORKSPACES = (".dvc", "tmp", "exps")


def find_project_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if all((folder / marker).is_file() for marker in PROJECT_MARKERS):
            return folder
    raise StageError(
        f"no heldout project at or above {here}: run from the folder that holds dvc.yaml "
        "and params.yaml"
    )


def store_root(project_root: Path) -> Path:
    """The folder whose stores (MLflow, Prefect) this project uses."""
    parts = project_root.parts
    for i in range(len(parts) - len(_DVC_TEMP_WORKSPACES)):
        if parts[i : i + len(_DVC_TEMP_WORKSPACES)] == _DVC_TEMP_WORKSPACES:
            return Path(*parts[:i])
    return project_root


def in_experiment_copy(project_root: Path) -> bool:
    """Whether this project is the copy DVC runs a `dvc exp run --temp` or queued experiment in:
    DVC deletes it when the experiment ends, so a path inside it is gone before anyone reads it."""
    return store_root(project_root) != project_root


# The variable that may hold the test key: heldout reads it, nothing heldout starts ever
# inherits it, and no agent may name it as its API key.
TEST_KEY_ENV = "HELDOUT_TEST_KEY"


def untrusted_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process heldout starts but does not trust (an agent's): this
    process's (or `environment`), less the test key."""
    source = os.environ if environment is None else environment
    return {name: value for name, value in source.items() if name != TEST_KEY_ENV}


def secret_paths() -> list[Path]:
    """Where heldout's secrets are read from: the user's heldout folder (the test key, the
    episode cache's key) and any key file HELDOUT_TEST_KEY names; what no agent may read."""
    named = (Path(entry.strip()).expanduser() for entry in
             os.environ.get(TEST_KEY_ENV, "").split(",") if entry.strip())
    return [user_config_dir(), *(path for path in named if path.exists())]


def user_config_dir() -> Path:
    """The user's own heldout folder, outside every project: where the secrets live (the test
    key, the episode cache's key), so nothing that can write a project folder can read them."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "heldout"


def default_tracking_uri(project_root: Path) -> str:
    return f"sqlite:///{store_root(project_root) / 'mlflow.db'}"


TELEMETRY_OFF = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "DVC_NO_ANALYTICS": "1",
}


def apply_defaults(project_root: Path) -> None:
    """Set the project's environment before prefect or mlflow is imported (they read it then):
    telemetry off always; the stores at absolute paths unless the user points them elsewhere."""
    os.environ.update(TELEMETRY_OFF)
    # The stage commands DVC starts (`heldout stage …`) are this installation's, even when it
    # was called as .venv/bin/heldout without the venv on PATH.
    installed = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if installed not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([installed, *([path] if path else [])])
    stores = store_root(project_root)
    os.environ.setdefault("MLFLOW_TRACKING_URI", default_tracking_uri(project_root))
    os.environ.setdefault("PREFECT_HOME", str(stores / ".prefect"))
    # Prefect's local API server and MLflow servers live on loopback; a proxy must not see them.
    loopback = "127.0.0.1,localhost"
    current = os.environ.get("NO_PROXY", "")
    if loopback not in current:
        os.environ["NO_PROXY"] = f"{loopback},{current}" if current else loopback
