"""Running untrusted programs: the result record and the Sandbox protocol.

Two backends run a program the same way, through `runner.py` (one fresh interpreter per
program, its own work directory, rlimits, a CPU time limit with a wall-clock backstop, capped
output):
- `subprocess` (the default): long-lived runner workers on this machine, each inside fresh
  network, mount, PID and IPC namespaces, with the host's files out of sight and read-only;
- `docker`: the runner inside a container with no network, a read-only root and no
  capabilities, against any Docker Engine API (Docker, or Podman: scripts/container-engine.sh).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Status = Literal["ok", "failed", "timeout", "oom", "error"]
DEFAULT_IMAGE = "heldout-python:3.11"  # what scripts/container-engine.sh builds


@dataclass(frozen=True)
class ExecResult:
    """How one program ended. `passed` is exit 0 within the limits, or, for a judged program,
    the judge's verdict; then the last line of `stderr_tail` is the judge's reason, and
    `exit_code` is 0 for a pass and None otherwise (the candidate's own exit decides nothing)."""

    passed: bool
    status: Status
    exit_code: int | None  # None when the program never started or its end is unknown
    stdout_tail: str
    stderr_tail: str
    exec_s: float  # wall-clock seconds
    network_isolated: bool
    # CPU seconds (user and system) of the program's own processes, the candidate's for a judged
    # program: what its time limit, `timeout_s`, counts (heldout/sandbox/watch.py).
    cpu_s: float = 0.0


@dataclass(frozen=True)
class Program:
    """A program and what comes with it. `stdin` is read by the program and never written to
    its files or arguments; `group` lets a backend run related programs together (the docker
    backend runs one container per group); `image` overrides the docker backend's image.

    `judge`, when given, makes the program a judged one (heldout/sandbox/roles.py): the trusted
    part, JSON {"prompt", "tests", "entry_point"}, goes to a judge process of its own, never to
    the program's, and the judge's verdict is the result."""

    source: str
    stdin: str = ""
    group: str | None = None
    image: str | None = None
    judge: str | None = None


class Sandbox(Protocol):
    def run(self, program: str | Program, *, timeout_s: float, memory_mb: int) -> ExecResult:
        """Run one program to its end or a limit: `timeout_s` seconds of CPU time (and a
        wall-clock backstop some times longer), `memory_mb` of memory."""
        ...

    def run_many(
        self, programs: Sequence[str | Program], *, timeout_s: float, memory_mb: int
    ) -> list[ExecResult]:
        """Run programs in parallel; the results are in the order of `programs`."""
        ...

    def close(self) -> None:
        """Stop the workers or containers this sandbox holds; it may not be used after."""
        ...
