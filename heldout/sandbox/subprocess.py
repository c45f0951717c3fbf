"""The subprocess backend: runner workers on this machine, each in namespaces of its own.

A worker is one long-lived runner (runner.py) that starts a fresh `python -I -S` per program,
so the cost of namespaces and of the runner's own start-up is paid once per worker, not once
per program. As root with util-linux `unshare`, a worker lives in new network, mount, PID, IPC
and UTS namespaces behind the jail of jail.py, and its programs run as a user of their own
(a judged program's judge as another, JUDGE_UID_OFFSET above it).
Elsewhere it runs with rlimits only: results say network_isolated=False, and a warning says
so once.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import SandboxError
from heldout.sandbox.base import (
    COMPANIONS,
    JAIL_PATH,
    JUDGE_UID_OFFSET,
    RUNNER_PATH,
    WALL_FACTOR,
    BatchSandbox,
    as_program,
    error_reply,
    exchange,
    job,
    program_environment,
    result_from,
)
from heldout.sandbox.protocol import ExecResult, Program

NAMESPACES = ("--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
              "--mount-proc")
# Programs run as one of these users, one per live worker on this machine, leased by a lock.
PROGRAM_UIDS = range(61000, 62000)
PROGRAM_PROCESSES = 32
WORK_TMPFS_MB = 256
# The runner's own work after a program (killing, reaping, draining) is bounded by a few
# seconds; past this margin over the program's wall-clock backstop the worker is presumed lost.
REPLY_MARGIN_S = 30.0

_warned_unisolated = False


@cache
def namespaces_available() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", *NAMESPACES, "true"], capture_output=True, check=False)
    return probe.returncode == 0


class SubprocessSettings(BaseModel):
    """`make_sandbox("subprocess", ...)`: `workers` runners, each running one program at a
    time, for its time limit of CPU time or `wall_factor` times that of wall-clock time, the
    backstop. `python` is the interpreter the runners (and so the programs) use, by default this
    one. Programs see only the jail's allow-list (jail.py: /usr, the interpreter, a few
    devices, /proc, the work folder), so `hidden_paths` is needed only for what lies inside
    it: those paths, and the user's home and the working directory, are covered there with
    empty folders (files), the interpreter's own files put back; outside it they change
    nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(2, ge=1)
    wall_factor: float = Field(WALL_FACTOR, ge=1)
    python: str | None = None
    hidden_paths: tuple[str, ...] = ()


class SubprocessSandbox(BatchSandbox):
    def __init__(self, settings: SubprocessSettings):
        self.workers = settings.workers
        self.wall_factor = settings.wall_factor
        self.python = os.path.realpath(settings.python or sys.executable)
        self.network_isolated = namespaces_available()
        if not self.network_isolated:
            _warn_unisolated()
        # The project is the working directory of whoever runs heldout.
        self.hidden_paths = (str(Path.home()), os.getcwd(), *settings.hidden_paths)
        self._slots: queue.Queue[_Worker | None] = queue.Queue()
        for _ in range(self.workers):
            self._slots.put(None)  # a worker is started on first use
        self._closed = False

    def run_many(
        self, programs: Sequence[str | Program], *, timeout_s: float, memory_mb: int
    ) -> list[ExecResult]:
        if self._closed:
            raise SandboxError("this sandbox is closed")
        jobs = [job(as_program(p), timeout_s, memory_mb, self.wall_factor) for p in programs]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs) or 1)) as pool:
            replies = list(pool.map(self._run_job, jobs))
        return [result_from(reply, self.network_isolated) for reply in replies]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in range(self.workers):
            worker = self._slots.get()
            if worker is not None:
                worker.stop()

    def _run_job(self, one_job: dict[str, Any]) -> dict[str, Any]:
        worker = self._slots.get()
        try:
            if worker is None:
                worker = self._start_worker()
            return worker.execute(one_job, one_job["wall_s"] + REPLY_MARGIN_S)
        except _WorkerLost as lost:
            worker.stop()
            worker = None
            return error_reply(str(lost))
        finally:
            self._slots.put(worker)

    def _start_worker(self) -> _Worker:
        settings: dict[str, Any] = {"env": program_environment(), "companions": COMPANIONS}
        if not self.network_isolated:
            return _Worker([self.python, "-I", "-S", str(RUNNER_PATH)],
                           {**settings, "work_root": tempfile.gettempdir()}, lease=None)
        lease = _UidLease.take()
        settings |= {
            "work_root": "/tmp",
            "uid": lease.uid,
            "judge_uid": lease.uid + JUDGE_UID_OFFSET,
            "nproc": PROGRAM_PROCESSES,
            "new_ipc": True,  # root in the worker's namespaces: an IPC namespace per program
            # The interpreter's own files stay visible: jail.py finds them from inside.
            "jail": {"work_size_mb": WORK_TMPFS_MB, "hidden": list(self.hidden_paths)},
        }
        command = ["unshare", *NAMESPACES, self.python, "-I", "-S", str(JAIL_PATH)]
        return _Worker(command, settings, lease)


def _warn_unisolated() -> None:
    global _warned_unisolated
    if not _warned_unisolated:
        _warned_unisolated = True
        warnings.warn(
            "heldout's subprocess sandbox runs without namespaces (it needs root and util-linux "
            "unshare): programs get rlimits, a temporary folder and a clean environment, but "
            "they can reach the network and read your files; results say "
            "network_isolated=False. Use the docker backend for untrusted code.",
            RuntimeWarning,
            stacklevel=3,
        )


class _WorkerLost(Exception):
    """The worker died or stopped answering; the program it was running counts as an error."""


class _Worker:
    """One runner process, used by one thread at a time."""

    def __init__(self, command: list[str], settings: dict[str, Any], lease: _UidLease | None):
        self._lease = lease
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        self._buffer = b""
        try:
            self._process = subprocess.Popen(
                [*command, json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=program_environment(),
                cwd="/",
                start_new_session=True,
            )
        except OSError as error:
            self._release()
            raise SandboxError(f"cannot start a sandbox worker ({command[0]}): {error}") from None
        try:
            self._read_line(time.monotonic() + REPLY_MARGIN_S)
        except _WorkerLost as lost:
            self.stop()
            raise SandboxError(f"the sandbox worker did not start: {lost}") from None

    def execute(self, one_job: dict[str, Any], limit_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + limit_s
        return exchange(one_job, self._send, lambda: self._read_line(deadline))

    def _send(self, data: bytes) -> None:
        try:
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except BrokenPipeError:
            raise _WorkerLost(self._describe_death()) from None

    def stop(self) -> None:
        # The worker's namespaces die with their first process, which dies with `unshare`.
        self._process.kill()
        self._process.wait()
        self._process.stdin.close()
        self._process.stdout.close()
        self._release()

    def _release(self) -> None:
        self._log.close()
        if self._lease is not None:
            self._lease.release()

    def _read_line(self, deadline: float) -> bytes:
        stdout = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([stdout], [], [], remaining)[0]:
                raise _WorkerLost("the sandbox worker stopped answering")
            chunk = os.read(stdout, 65536)
            if not chunk:
                raise _WorkerLost(self._describe_death())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _describe_death(self) -> str:
        self._process.wait()
        self._log.seek(0)
        log = self._log.read().decode("utf-8", "replace")[-2000:]
        return f"the sandbox worker exited with {self._process.returncode}: {log}"


class _UidLease:
    """A user id that no other live worker on this machine runs programs as."""

    folder = Path(tempfile.gettempdir()) / "heldout-sandbox-uids"
    _lock = threading.Lock()

    def __init__(self, uid: int, file: IO[bytes]):
        self.uid = uid
        self._file = file

    @classmethod
    def take(cls) -> _UidLease:
        cls.folder.mkdir(mode=0o700, exist_ok=True)
        with cls._lock:
            for uid in PROGRAM_UIDS:
                file = open(cls.folder / str(uid), "ab")  # noqa: SIM115 (held while leased)
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    file.close()
                    continue
                return cls(uid, file)
        raise SandboxError(f"no free program user id in {PROGRAM_UIDS}: too many workers")

    def release(self) -> None:
        self._file.close()
