"""What both backends share: the runner's job and reply formats, and run() on top of run_many()."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from heldout.errors import SandboxError
from heldout.sandbox.protocol import ExecResult, Program

RUNNER_PATH = Path(__file__).with_name("runner.py")
JAIL_PATH = Path(__file__).with_name("jail.py")
# What the runner's forks use, sent as source in its settings (a container has no heldout).
COMPANIONS = {
    name: Path(__file__).with_name(f"{name.rpartition('_')[2]}.py").read_text(encoding="utf-8")
    for name in ("heldout_sandbox_codec", "heldout_sandbox_roles", "heldout_sandbox_world",
                 "heldout_sandbox_zygote", "heldout_sandbox_outcomes", "heldout_sandbox_watch")
}
SEND_JUDGE = {"send": "judge"}  # runner.py asks for the judge's part of the job with this
# A judged program runs as two users: the candidate's, and the judge's this far above it.
JUDGE_UID_OFFSET = 1000
# The wall-clock backstop, in multiples of a program's CPU time limit: it ends a program that
# sleeps or blocks; one that computes meets its CPU limit first unless the machine's load slows
# it more than this many times.
WALL_FACTOR = 4.0

# The locale survives into programs (it decides how they decode text); nothing else does.
LOCALE_VARIABLES = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")
PROGRAM_PATH = "/usr/local/bin:/usr/bin:/bin"


def program_environment() -> dict[str, str]:
    locale = {name: os.environ[name] for name in LOCALE_VARIABLES if name in os.environ}
    return {"PATH": PROGRAM_PATH, "LANG": "C.UTF-8", **locale}


def as_program(program: str | Program) -> Program:
    return program if isinstance(program, Program) else Program(source=program)


def job(
    program: Program, timeout_s: float, memory_mb: int, wall_factor: float
) -> dict[str, Any]:
    """The runner's job: `timeout_s` seconds of CPU time, and a wall-clock backstop
    `wall_factor` times as long."""
    if timeout_s <= 0 or memory_mb <= 0:
        raise SandboxError(f"limits must be positive: timeout_s={timeout_s}, memory_mb={memory_mb}")
    one_job = {
        "source": program.source,
        "stdin": program.stdin,
        "timeout_s": timeout_s,
        "wall_s": timeout_s * wall_factor,
        "memory_mb": memory_mb,
    }
    if program.judge is not None:
        one_job["judge"] = program.judge
    return one_job


def exchange(
    one_job: dict[str, Any], send: Callable[[bytes], None], receive: Callable[[], bytes]
) -> dict[str, Any]:
    """Send a job to a runner and return its reply. A judged job's trusted part goes only when
    the runner asks for it, after it forked the candidate, and straight to the judge."""
    judge = one_job.get("judge")
    part = judge.encode("utf-8") if judge is not None else b""
    header = {key: value for key, value in one_job.items() if key != "judge"}
    if judge is not None:
        header["judge_bytes"] = len(part)
    send(json.dumps(header).encode() + b"\n")
    reply = json.loads(receive())
    if judge is not None and reply == SEND_JUDGE:
        send(part)
        reply = json.loads(receive())
    return reply


def result_from(reply: dict[str, Any], network_isolated: bool) -> ExecResult:
    return ExecResult(
        passed=reply["status"] == "ok",
        status=reply["status"],
        exit_code=reply["exit_code"],
        stdout_tail=reply["stdout_tail"],
        stderr_tail=reply["stderr_tail"],
        exec_s=reply["exec_s"],
        network_isolated=network_isolated,
        cpu_s=reply["cpu_s"],
    )


def error_reply(message: str) -> dict[str, Any]:
    """The reply for a program whose run the sandbox itself could not carry out."""
    return {
        "status": "error",
        "exit_code": None,
        "stdout_tail": "",
        "stderr_tail": f"[heldout] {message}",
        "exec_s": 0.0,
        "cpu_s": 0.0,
    }


class BatchSandbox(ABC):
    """A sandbox whose unit of work is a batch: run() is a batch of one."""

    def run(self, program: str | Program, *, timeout_s: float, memory_mb: int) -> ExecResult:
        return self.run_many([program], timeout_s=timeout_s, memory_mb=memory_mb)[0]

    @abstractmethod
    def run_many(
        self, programs: Sequence[str | Program], *, timeout_s: float, memory_mb: int
    ) -> list[ExecResult]: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
