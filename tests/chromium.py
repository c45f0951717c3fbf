"""Headless Chromium for tests: render a page, return its DOM after scripts ran, screenshot it.

Debian's `chromium` package; a test that needs it is skipped, saying why, where it is missing.
Every run gets a fresh profile and Chromium's background traffic (updates, sync, QUIC) off, so
a test never leaves loopback and never depends on an earlier run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

DEBIAN_CHROMIUM = "/usr/bin/chromium"
QUIET_FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in containers, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass(frozen=True)
class RenderedPage:
    dom: str
    screenshot: Path | None


def find_chromium() -> str:
    """Chromium's path, or skip the calling test with the reason."""
    found = DEBIAN_CHROMIUM if os.access(DEBIAN_CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found is None:
        pytest.skip(f"headless Chromium not found ({DEBIAN_CHROMIUM}): apt-get install chromium")
    return found


def render(
    url: str,
    *,
    screenshot: Path | None = None,
    window: tuple[int, int] = (1280, 2400),
    virtual_time_budget_ms: int | None = None,
    timeout_s: float = 90,
) -> RenderedPage:
    """Load a file:// or http://127.0.0.1 URL; return the serialized DOM (and a PNG
    screenshot of the window at `screenshot`). `virtual_time_budget_ms` lets pages that render
    with JavaScript finish (timers run on virtual time) before the DOM is taken."""
    if not url.startswith(("file://", "http://127.0.0.1", "http://localhost")):
        raise ValueError(f"tests render local pages only, got {url}")
    with tempfile.TemporaryDirectory(prefix="heldout-chromium-") as profile:
        command = [
            find_chromium(), *QUIET_FLAGS, f"--user-data-dir={profile}",
            f"--window-size={window[0]},{window[1]}", "--dump-dom",
        ]
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            command.append(f"--screenshot={screenshot}")
        if virtual_time_budget_ms is not None:
            command.append(f"--virtual-time-budget={virtual_time_budget_ms}")
        dom = _run(command + [url], timeout_s)
    if screenshot is not None and not screenshot.is_file():
        raise AssertionError(f"Chromium wrote no screenshot to {screenshot}")
    return RenderedPage(dom, screenshot)


def _run(command: list[str], timeout_s: float) -> str:
    # Its own process group, so a hung Chromium is killed with every helper it started.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"Chromium did not finish within {timeout_s} s") from None
    if process.returncode != 0:
        raise AssertionError(f"Chromium exited {process.returncode}: {stderr[-2000:]}")
    return stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serve_mlflow(store_uri: str) -> Iterator[str]:
    """`mlflow server` over `store_uri` on a free loopback port, in its own process group (its
    workers are stopped with it); yields its URL once /health answers."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
         store_uri, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not answer /health within 90 s")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
