"""A team's servers (docs/team.md): MLflow on PostgreSQL through psycopg 3 from the lock, with
the stage's batch trace writer, against a real PostgreSQL this test starts on loopback from
Debian's package (skipped, saying why, where there is none)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import mlflow
import pytest

from stages import traces
from tests.conftest import REPO

AS_NOBODY = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []


def lock_entries() -> dict[str, list[str]]:
    """Package name -> its lines in requirements.lock (the pin, its hashes, its `via`)."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            current = line.split("==")[0]
            entries[current] = [line]
        elif current:
            entries[current].append(line.strip())
    return entries


def test_the_lock_pins_psycopg_3_and_its_binary_for_postgresql_urls():
    """MLflow 3.17 under SQLAlchemy 2.1 opens `postgresql://` with psycopg 3; psycopg2 alone
    fails (NOTES.md). The lock pins both halves, with hashes, and SQLAlchemy picks psycopg."""
    from sqlalchemy.engine import make_url

    assert '"psycopg[binary]' in (REPO / "pyproject.toml").read_text()
    entries = lock_entries()
    for name in ("psycopg", "psycopg-binary"):
        assert name in entries, f"{name} is not in requirements.lock"
        assert entries[name][0].startswith(f"{name}==3.")
        assert any(line.startswith("--hash=sha256:") for line in entries[name])
    assert make_url("postgresql://u@127.0.0.1/db").get_dialect().driver == "psycopg"
    import psycopg

    assert psycopg.pq.__impl__ in ("binary", "c")


def postgres_bin() -> Path:
    found = shutil.which("initdb") or next(iter(sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)), None)
    if not found:
        pytest.skip("no PostgreSQL here: `apt-get install postgresql` (Debian's package) "
                    "gives the initdb and pg_ctl this test runs")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("PostgreSQL will not run as root, and there is no runuser to drop to nobody")
    return Path(found).resolve().parent


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL of its own on a free loopback port (unix socket in its folder), stopped
    after the module; its URL for one database."""
    bin_dir = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="heldout-pg-"))
    os.chmod(folder, 0o777)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"

    def pg(*args: str) -> None:
        done = subprocess.run([*AS_NOBODY, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    pg(str(bin_dir / "initdb"), "-D", str(data), "-U", "heldout", "--auth=trust", "-E", "UTF8")
    pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
       f"-k {folder} -p {port} -h 127.0.0.1 -c listen_addresses=127.0.0.1", "start")
    try:
        pg(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "heldout",
           "mlflow")
        yield f"postgresql://heldout@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run([*AS_NOBODY, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def test_mlflow_on_postgresql_takes_runs_and_the_stages_batch_traces(postgres_url, tmp_path):
    from mlflow.tracing.client import TracingClient

    client = mlflow.MlflowClient(postgres_url)
    experiment = client.create_experiment("heldout", artifact_location=tmp_path.as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.log_metric(run_id, "episodes", 3.0)
    assert client.get_run(run_id).data.metrics == {"episodes": 3.0}
    assert traces.batch_writes(TracingClient(postgres_url).store)

    sampled = traces.sample_episodes(episode_rows(), traces.TracingConfig())[0]
    ids = traces.write_traces(traces.build_traces(sampled, {}), run_id, postgres_url)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(postgres_url)
    try:
        found = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
    finally:
        mlflow.set_tracking_uri(previous)
    assert sorted(t.info.trace_id for t in found) == sorted(ids) and len(ids) == 2
    assert {len(t.data.spans) for t in found} == {2}  # the episode, and its one model turn


def episode_rows():
    """Two one-turn episodes, as rollout rows."""
    import json

    from heldout.episodes.rows import rollout_table

    def row(task: str) -> dict:
        step = {"turn": 1, "seed": 5, "tool": None, "arguments": None, "message": "def f(): 1",
                "tokens_in": 10, "tokens_out": 4, "cost_usd": 0.0, "observation": None,
                "data": None}
        return {"task_id": task, "sample": 0, "seed": 7, "harness": "h" * 64,
                "completion": "def f(): 1", "completion_sha": "0" * 64, "passed": True,
                "public_passed": None, "status": "ok", "error": "", "finish_reason": "stop",
                "tokens_in": 10, "tokens_out": 4, "turns": 1, "tool_calls": 0,
                "end_reason": "answered", "agent_s": 0.1, "exec_s": 0.0, "cost_usd": 0.0,
                "trajectory": json.dumps([step]), "step_timings": json.dumps([[0.0, 0.1, 0.0]])}

    return rollout_table("ck", [row("T/1"), row("T/2")])
