"""The docker backend: the runner (runner.py) inside a locked-down container, over any Docker
Engine API (Docker, or Podman's: scripts/container-engine.sh). The only module that imports
docker.

A container has no network, a read-only root with a small tmpfs for work, no capabilities, no
new privileges, a non-root user, and limits on memory, processes and CPUs. One runner serves a
batch of programs one after the other: with container_per="task" a batch is the programs of
one group (a task's samples), which pays the container's start-up once per task; with
"program" every program gets a container of its own.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import SandboxError
from heldout.sandbox.base import (
    COMPANIONS,
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
from heldout.sandbox.protocol import DEFAULT_IMAGE, ExecResult, Program

RUNNER_SOURCE = RUNNER_PATH.read_text(encoding="utf-8")
# The runner is root in the container, with only the capabilities it needs to run the candidate
# and the judge as two other users and to sweep up after them; they keep none of them.
RUNNER_USER = "0:0"
RUNNER_CAPABILITIES = ["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE"]
PROGRAM_UID = 1001
# The runner's, not the programs': each program writes only in the work directory made for it,
# which the runner removes after it. Not /tmp: Podman gives a /tmp tmpfs the image's mode
# (1777, writable by every user) whatever the mount says.
WORK_ROOT = "/work"
WORK_TMPFS = "rw,nosuid,nodev,noexec,size=64m,mode=0755"
# What the engine would leave writable by everyone is covered, read-only: Podman's read-only
# containers get tmpfs on /tmp, /var/tmp and /run, and both engines mount the IPC namespace's
# message queues on /dev/mqueue (and /dev/shm, which `ipc_mode` "none" leaves out), all of
# which would otherwise outlive a program for the container's life.
COVERED = {path: "ro,nosuid,nodev,noexec,size=4k,mode=0755"
           for path in ("/tmp", "/var/tmp", "/run", "/dev/mqueue")}
# The runner and the work tmpfs share the container's memory with the program.
OVERHEAD_MB = 96
PROCESSES = 64
START_LIMIT_S = 60.0
REPLY_MARGIN_S = 30.0
RUNNER_SETTINGS = {
    "work_root": WORK_ROOT,
    "uid": PROGRAM_UID,
    "judge_uid": PROGRAM_UID + JUDGE_UID_OFFSET,
    "nproc": PROCESSES,
    "oom_when_killed": True,
    "env": program_environment(),
    "companions": COMPANIONS,
}


def engine_address() -> str:
    host = os.environ.get("DOCKER_HOST")
    return host if host else "unix:///var/run/docker.sock (DOCKER_HOST is unset)"


class DockerSettings(BaseModel):
    """`make_sandbox("docker", ...)`: `workers` containers at once, each with `cpus` CPUs, from
    `image` unless a program names its own; `container_per` is "task" (one container per
    group of programs) or "program"; `wall_factor`, the wall-clock backstop in multiples of a
    program's CPU time limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = DEFAULT_IMAGE
    workers: int = Field(2, ge=1)
    cpus: float = Field(1.0, gt=0)
    container_per: Literal["task", "program"] = "task"
    wall_factor: float = Field(WALL_FACTOR, ge=1)


class DockerSandbox(BatchSandbox):
    network_isolated = True

    def __init__(self, settings: DockerSettings, client: docker.DockerClient | None = None):
        self.image = settings.image
        self.workers = settings.workers
        self.cpus = settings.cpus
        self.container_per = settings.container_per
        self.wall_factor = settings.wall_factor
        self._client = client or _connect()
        self._images_present: set[str] = set()
        self._require_image(self.image)

    def run_many(
        self, programs: Sequence[str | Program], *, timeout_s: float, memory_mb: int
    ) -> list[ExecResult]:
        programs = [as_program(p) for p in programs]
        jobs = [job(p, timeout_s, memory_mb, self.wall_factor) for p in programs]
        batches = self._batches(programs)
        images = [programs[indices[0]].image or self.image for indices in batches]
        for image in images:
            self._require_image(image)

        def run_batch(number: int) -> list[dict[str, Any]]:
            return self._run_container(images[number], [jobs[i] for i in batches[number]],
                                       memory_mb)

        with ThreadPoolExecutor(max_workers=min(self.workers, len(batches) or 1)) as pool:
            batch_replies = list(pool.map(run_batch, range(len(batches))))
        replies: dict[int, dict[str, Any]] = {}
        for indices, replies_of_batch in zip(batches, batch_replies, strict=True):
            replies.update(zip(indices, replies_of_batch, strict=True))
        return [result_from(replies[i], self.network_isolated) for i in range(len(programs))]

    def close(self) -> None:
        self._client.close()

    def _batches(self, programs: list[Program]) -> list[list[int]]:
        """Indices of the programs that share a container, in order of first appearance."""
        if self.container_per == "program":
            return [[i] for i in range(len(programs))]
        batches: dict[Any, list[int]] = {}
        for i, program in enumerate(programs):
            key = (program.group, program.image) if program.group is not None else i
            batches.setdefault(key, []).append(i)
        return list(batches.values())

    def _require_image(self, image: str) -> None:
        if image in self._images_present:
            return
        try:
            self._client.images.get(image)
        except ImageNotFound:
            raise SandboxError(
                f"image {image!r} is not on the container engine at {engine_address()}: "
                f"scripts/container-engine.sh builds {DEFAULT_IMAGE!r} (Debian with python3); "
                f"for another image, `docker pull {image}` (it needs python3 on its PATH)"
            ) from None
        except (DockerException, requests.RequestException) as error:
            raise SandboxError(f"the container engine at {engine_address()}: {error}") from None
        self._images_present.add(image)

    def _run_container(
        self, image: str, jobs: list[dict[str, Any]], memory_mb: int
    ) -> list[dict[str, Any]]:
        replies: list[dict[str, Any]] = []
        container = None
        try:
            container = self._client.containers.create(
                image,
                ["python3", "-I", "-S", "-c", RUNNER_SOURCE, json.dumps(RUNNER_SETTINGS)],
                stdin_open=True,
                network_mode="none",
                read_only=True,
                tmpfs={WORK_ROOT: WORK_TMPFS, **COVERED},
                ipc_mode="none",
                working_dir=WORK_ROOT,
                user=RUNNER_USER,
                cap_drop=["ALL"],
                cap_add=RUNNER_CAPABILITIES,
                security_opt=["no-new-privileges"],
                mem_limit=f"{memory_mb + OVERHEAD_MB}m",
                memswap_limit=f"{memory_mb + OVERHEAD_MB}m",
                pids_limit=PROCESSES,
                nano_cpus=int(self.cpus * 1e9),
                environment=RUNNER_SETTINGS["env"],
                labels={"heldout.sandbox": "runner"},
            )
            attached = container.attach_socket(
                params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            container.start()
            channel = _Channel(attached._sock)
            channel.read_line(time.monotonic() + START_LIMIT_S)  # the runner's READY
            for one_job in jobs:
                deadline = time.monotonic() + one_job["wall_s"] + REPLY_MARGIN_S
                replies.append(exchange(one_job, channel.send,
                                        lambda deadline=deadline: channel.read_line(deadline)))
            channel.close()
        except _ChannelLost as lost:
            message = f"the sandbox container stopped answering ({lost}); its stderr: "
            replies += [error_reply(message + lost.stderr)] * (len(jobs) - len(replies))
        except (DockerException, requests.RequestException) as error:
            message = f"the container engine at {engine_address()} failed: {error}"
            replies += [error_reply(message)] * (len(jobs) - len(replies))
        finally:
            if container is not None:
                _remove(container)
        return replies


def _remove(container: Any) -> None:
    """Remove a container, killing it if need be. Podman refuses a forced removal while the
    container is on its way out by itself, so that is tried again."""
    for attempt in range(1, 5):
        try:
            container.remove(force=True)
            return
        except NotFound:
            return
        except APIError as error:
            if attempt == 4:
                raise SandboxError(
                    f"cannot remove container {container.id[:12]} (label heldout.sandbox): {error}"
                ) from None
            time.sleep(0.1 * attempt)


def _connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (DockerException, requests.RequestException) as error:
        raise SandboxError(
            f"no container engine answers at {engine_address()}: {error}. Start one with "
            '`eval "$(scripts/container-engine.sh)"` (Podman, which exports DOCKER_HOST), or '
            "point DOCKER_HOST at a running Docker or Podman socket."
        ) from None
    return client


class _ChannelLost(Exception):
    def __init__(self, reason: str, stderr: str):
        super().__init__(reason)
        self.stderr = stderr


class _Channel:
    """Lines to the runner's stdin, lines from its stdout, over an attached socket whose
    output is multiplexed in frames (8-byte header: stream, 0, 0, 0, big-endian length)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._raw = b""
        self._stdout = b""
        self._stderr = b""

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as error:
            raise self._lost(f"cannot send: {error}") from None

    def read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._stdout:
            self._take_frames()
            if b"\n" not in self._stdout:
                self._receive(deadline)
        line, _, self._stdout = self._stdout.partition(b"\n")
        return line

    def close(self) -> None:
        self._sock.shutdown(socket.SHUT_WR)  # the runner's stdin ends, and so does the runner
        self._sock.close()

    def _receive(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._lost("no answer in time")
        try:
            self._sock.settimeout(remaining)
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise self._lost("no answer in time") from None
        except OSError as error:
            raise self._lost(f"cannot receive: {error}") from None
        if not chunk:
            raise self._lost("the runner exited")
        self._raw += chunk

    def _take_frames(self) -> None:
        while len(self._raw) >= 8:
            stream, length = struct.unpack(">BxxxL", self._raw[:8])
            if len(self._raw) < 8 + length:
                return
            payload, self._raw = self._raw[8 : 8 + length], self._raw[8 + length :]
            if stream == 2:
                self._stderr = (self._stderr + payload)[-4000:]
            else:
                self._stdout += payload

    def _lost(self, reason: str) -> _ChannelLost:
        return _ChannelLost(reason, self._stderr.decode("utf-8", "replace"))
