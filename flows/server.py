"""One Prefect API for every stage of a run.

A process that runs a flow with no API configured starts Prefect's temporary server for itself:
8 s or more per stage under `dvc repro` (NOTES.md). The pipeline instead starts one server on
loopback, hands its URL to every stage process through PREFECT_API_URL, and stops it at the end.
It keeps its state in PREFECT_HOME (the project's .prefect/), the database a later
`make prefect-ui` serves, so the flow runs stay reviewable after the server is gone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

API_URL = "PREFECT_API_URL"
STARTUP_TIMEOUT_S = 90  # the default flakes on a loaded machine (NOTES.md)


@contextmanager
def prefect_api() -> Iterator[str]:
    """The configured API if there is one (a team's server), else a private one for this run."""
    configured = os.environ.get(API_URL)
    if configured:
        yield configured
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = SubprocessASGIServer()
    server.start(timeout=STARTUP_TIMEOUT_S)
    os.environ[API_URL] = server.api_url  # for the stage processes DVC starts
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):  # for this process
            yield server.api_url
    finally:
        os.environ.pop(API_URL, None)
        _send_pending_records()
        server.stop()


def _send_pending_records() -> None:
    """Deliver queued logs and events while the server still listens (else: connection errors
    at exit, and the end of the run missing from the UI)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)
    EventsWorker.drain_all()
