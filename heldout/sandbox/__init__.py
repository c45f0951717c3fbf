"""Running untrusted programs: the result record, the Sandbox protocol, and its configuration.

Two backends run a program the same way, through `runner.py` (one fresh interpreter per
program, its own work directory, rlimits, a deadline, capped output):
- `subprocess` (the default): long-lived runner workers on this machine, each inside fresh
  network, mount, PID and IPC namespaces, with the host's files out of sight and read-only;
- `docker`: the runner inside a container with no network, a read-only root and no
  capabilities, against any Docker Engine API (Docker, or Podman: scripts/container-engine.sh).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import SandboxError

Status = Literal["ok", "failed", "timeout", "oom", "error"]
BACKENDS = ("subprocess", "docker")
DEFAULT_IMAGE = "heldout-python:3.11"  # what scripts/container-engine.sh builds


@dataclass(frozen=True)
class ExecResult:
    """How one program ended. `passed` is exit 0 within the limits; the scorer narrows it to
    exit 0 *and* its completion marker (heldout.scoring)."""

    passed: bool
    status: Status
    exit_code: int | None  # None when the program never started or its end is unknown
    stdout_tail: str
    stderr_tail: str
    exec_s: float
    network_isolated: bool


@dataclass(frozen=True)
class Program:
    """A program and what comes with it. `stdin` is read by the program and never written to
    its files or arguments; `group` lets a backend run related programs together (the docker
    backend runs one container per group); `image` overrides the docker backend's image."""

    source: str
    stdin: str = ""
    group: str | None = None
    image: str | None = None


class Sandbox(Protocol):
    def run(self, program: str | Program, *, timeout_s: float, memory_mb: int) -> ExecResult:
        """Run one program to its end, its deadline or a limit."""
        ...

    def run_many(
        self, programs: Sequence[str | Program], *, timeout_s: float, memory_mb: int
    ) -> list[ExecResult]:
        """Run programs in parallel; the results are in the order of `programs`."""
        ...

    def close(self) -> None:
        """Stop the workers or containers this sandbox holds; it may not be used after."""
        ...


def make_sandbox(backend: str = "subprocess", **settings: Any) -> Sandbox:
    """A sandbox of the named backend. Settings: `workers` (both); `python`, `hidden_paths`
    (subprocess); `image`, `cpus`, `container_per` (docker)."""
    if backend == "subprocess":
        from heldout.sandbox.subprocess import SubprocessSandbox

        factory: Any = SubprocessSandbox
    elif backend == "docker":
        # Imported only here: the docker SDK is needed only by those who choose this backend.
        from heldout.sandbox.docker import DockerSandbox

        factory = DockerSandbox
    else:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    known = set(inspect.signature(factory).parameters) - {"client"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise SandboxError(
            f"sandbox backend {backend!r} has no setting {', '.join(unknown)}; "
            f"it has {', '.join(sorted(known))}"
        )
    return factory(**settings)


class SandboxConfig(BaseModel):
    """The harness's sandbox section: part of the harness fingerprint, so every field is one
    that can change a score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["subprocess", "docker"] = "subprocess"
    image: str = DEFAULT_IMAGE  # docker; a task's runtime.image overrides it
    memory_mb: int = Field(512, ge=64)
    cpus: float = Field(1.0, gt=0)  # docker
    workers: int = Field(2, ge=1)  # programs (subprocess) or containers (docker) at once
    network: Literal["none"] = "none"
    container_per: Literal["task", "program"] = "task"  # docker: a task's samples share one

    def open(self) -> Sandbox:
        if self.backend == "docker":
            return make_sandbox(
                "docker",
                image=self.image,
                cpus=self.cpus,
                workers=self.workers,
                container_per=self.container_per,
            )
        return make_sandbox("subprocess", workers=self.workers)
