"""One Prefect API for every stage of a run.

A process that runs a flow with no API configured starts Prefect's temporary server for itself:
8 s or more per stage under `dvc repro` (NOTES.md). The pipeline instead starts one server on
loopback (`prefect server start`, without the UI or the scheduler), hands its URL to every
stage process through PREFECT_API_URL, and stops it at the end. It keeps its state in
PREFECT_HOME (the project's .prefect/), the database `make prefect-server` serves later, so the
flow runs stay reviewable after this server is gone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from heldout.errors import StageError

API_URL = "PREFECT_API_URL"
UI_URL = "PREFECT_UI_URL"
STARTUP_TIMEOUT_S = 90  # a loaded machine takes its time (NOTES.md)


@contextmanager
def prefect_api() -> Iterator[str]:
    """The configured API if there is one (a team's server), else a private one for this run."""
    configured = os.environ.get(API_URL)
    if configured:
        yield configured
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    # Its errors go to a file: a pipe nobody reads could fill up and stall the server.
    with tempfile.TemporaryFile() as errors:
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host",
             "127.0.0.1", "--port", str(port), "--no-scheduler", "--no-late-runs", "--no-ui",
             "--log-level", "ERROR"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
            start_new_session=True)
        ui_url = os.environ.get(UI_URL)
        try:
            _wait_until_healthy(server, url, errors)
            # For the stage processes DVC starts. No UI URL: Prefect would print a "View at"
            # link to every flow run, on a server that is gone when the run ends (the runs
            # stay in PREFECT_HOME, for `make prefect-server`).
            os.environ.update({API_URL: url, UI_URL: ""})
            from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

            with temporary_settings({PREFECT_API_URL: url, PREFECT_UI_URL: ""}):  # this process
                try:
                    yield url
                finally:
                    _send_pending_records()
        finally:
            os.environ.pop(API_URL, None)
            if ui_url is None:
                os.environ.pop(UI_URL, None)
            else:
                os.environ[UI_URL] = ui_url
            _stop(server)


def _wait_until_healthy(server: subprocess.Popen, url: str, errors: IO[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            errors.seek(0)
            raise StageError(f"the pipeline's Prefect server exited ({server.returncode}): "
                             f"{errors.read().decode(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise StageError(f"the pipeline's Prefect server did not answer on {url} within "
                     f"{STARTUP_TIMEOUT_S} s")


def _send_pending_records() -> None:
    """Deliver queued logs and events while the server still listens (else: connection errors
    at exit, and the end of the run missing from the UI)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)
    EventsWorker.drain_all()


def _stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
