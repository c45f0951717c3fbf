"""Warm starts for stage processes: the pipeline's `heldout stage` commands fork from a process
that has already imported everything a stage needs.

A stage process spends about 4 s importing prefect, mlflow, scipy, pandas and matplotlib before
it does anything (profile in the closing note of issue 9), and `dvc repro` starts one per stage.
During a pipeline run, a starter process imports them once and listens on a unix socket. The
`heldout stage` command DVC runs passes it its arguments, working folder, environment and its
stdin/stdout/stderr; the starter forks a child that becomes that stage process (same output,
same exit code, its own test-split guard, MLflow run and Prefect flow run) and reports the exit
code back. DVC still runs its own command and decides everything else. If the starter is not
there, the command starts cold, as it always could.

Only the standard library here: the forwarding side runs before anything heavy is imported.
The starter's entry point is cli/starter.py, which hands `serve` the `heldout` command to
become: this module never imports the command, so the two do not import each other.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

WARM_ENV = "HELDOUT_WARM_STARTER"  # the starter's socket path, set for the stage processes
READY_TIMEOUT_S = 60.0
_REQUEST_LIMIT = 1 << 20
# What a stage imports, in the starter, before any fork. Nothing here may start a thread:
# a fork copies only the forking thread.
PRELOAD = ("flows.decontaminate", "flows.report", "flows.rollouts", "flows.score",
           "flows.select", "flows.sensitivity", "flows.split", "flows.test", "mlflow",
           "mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store", "prefect.flow_engine",
           "matplotlib.figure", "matplotlib.backends.backend_agg", "scipy.stats",
           "pyarrow.parquet")


@contextmanager
def warm_starts(root: Path) -> Iterator[None]:
    """A starter for the stage processes started inside this block (through WARM_ENV)."""
    if os.environ.get(WARM_ENV):  # an outer pipeline already has one
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="heldout-warm-"))  # unix socket paths are short
    path = folder / "starter.sock"
    starter = subprocess.Popen([sys.executable, "-m", "cli.starter", str(path)], cwd=root,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    os.environ[WARM_ENV] = f"{starter.pid}:{path}"
    try:
        yield
    finally:
        os.environ.pop(WARM_ENV, None)
        # Nothing in it needs an orderly exit, and tearing down its imports takes a second.
        starter.kill()
        starter.wait()
        path.unlink(missing_ok=True)
        folder.rmdir()


def forward(argv: list[str]) -> int | None:
    """Run `heldout argv` as a child of the starter: its exit code, or None if there is no
    starter to ask or it was started under other Prefect or MLflow settings (the caller then
    starts cold)."""
    pid, _, path = os.environ.get(WARM_ENV, "").partition(":")
    deadline = time.monotonic() + READY_TIMEOUT_S
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            connection.connect(path)
            break
        except OSError:
            # Still importing (the socket appears when it is warm), or gone.
            if not _alive(pid) or time.monotonic() > deadline:
                connection.close()
                return None
            time.sleep(0.05)
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
    with connection:
        socket.send_fds(connection, [request.encode() + b"\n"], [0, 1, 2])
        # Interrupted, this process exits and closes the connection: the starter then stops
        # the child, as if it had been interrupted itself.
        reply = connection.makefile("r").readline()
    if not reply:
        return 1
    code = json.loads(reply)["exit_code"]
    return None if code is None else int(code)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, OSError):
        return False
    return True


def serve(path: Path, become: Callable[[], object]) -> None:
    """Import what stages need, then listen at `path`; each request forks a child that runs
    `become` (the `heldout` command) with the caller's argv, folder, environment and stdio."""
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
    if threading.active_count() != 1:
        sys.exit(f"warm starter: {threading.active_count()} threads after the imports; "
                 "forking would copy a broken process, so the stages start cold")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path) + ".tmp")
    os.rename(str(path) + ".tmp", path)  # appears, listening, only when warm
    listener.listen(8)
    while True:
        connection, _ = listener.accept()
        with connection:
            _start_one(listener, connection, become)


def _start_one(
    listener: socket.socket, connection: socket.socket, become: Callable[[], object]
) -> None:
    message, fds, _, _ = socket.recv_fds(connection, _REQUEST_LIMIT, 3)
    request = json.loads(message)
    if _settings(request["env"]) != _settings(os.environ):
        # Prefect and MLflow read these when imported, here: a fork would use the starter's.
        for fd in fds:
            os.close(fd)
        connection.sendall(json.dumps({"exit_code": None}).encode() + b"\n")
        return
    pid = os.fork()
    if pid == 0:
        listener.close()
        _become_stage(connection, request, fds, become)
    for fd in fds:
        os.close(fd)
    code = _wait(pid, connection)
    with suppress(OSError):  # the caller may be gone
        connection.sendall(json.dumps({"exit_code": code}).encode() + b"\n")


def _settings(env: dict[str, str] | os._Environ) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("PREFECT_", "MLFLOW_"))}


def _become_stage(
    connection: socket.socket, request: dict, fds: list[int], become: Callable[[], object]
) -> None:
    connection.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.pop(WARM_ENV, None)
    sys.argv = ["heldout", *request["argv"]]
    become()
    sys.exit(0)


def _wait(pid: int, connection: socket.socket) -> int:
    """The child's exit code; a caller that hangs up (interrupted, killed) stops the child."""
    child = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([child, connection], [], [])
            if child in ready:
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if not connection.recv(1, socket.MSG_PEEK):
                os.kill(pid, signal.SIGTERM)
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        os.close(child)
