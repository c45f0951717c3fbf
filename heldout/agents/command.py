"""`command`: any executable is an agent.

`protocol: completion` (the default): one process per episode, the task view as JSON on stdin,
the completion on stdout, within `timeout_s` and the episode's wall time; every process it
started is killed when it is done (heldout.agents.process_tree). `protocol: steps`: one process
per episode that acts turn by turn, JSON Lines both ways (heldout.agents.steps;
examples/README.md has the messages).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shlex
import subprocess
import time
from typing import Literal

from pydantic import Field

from heldout.agents.confinement import confined
from heldout.agents.process_tree import ProcessTree
from heldout.agents.protocol import (
    AgentContext,
    AgentSettings,
    Completion,
    EpisodeBrief,
    task_message,
    task_view,
)
from heldout.agents.steps import ProcessSession
from heldout.errors import AgentError
from heldout.tasks.record import Task

EXIT_DRAIN_S = 0.5  # how long the pipes are read once the agent has exited and its tree is killed
_CHUNK = 2**16


class CommandSettings(AgentSettings):
    command: str | list[str] = Field(description="argv list, or one string split like a shell")
    protocol: Literal["completion", "steps"] = Field(
        default="completion",
        description="completion: task JSON in, completion out; steps: JSON Lines, one action "
                    "per turn (examples/README.md)")
    timeout_s: float | None = Field(
        default=None, gt=0,
        description="completion: per episode; steps: per action; default: harness "
                    "agent_timeout_s")


class _Command:
    def __init__(self, settings: CommandSettings, context: AgentContext):
        command = settings.command
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.timeout_s = settings.timeout_s or context.timeout_s
        self.cwd = context.project_root


class CommandAgent(_Command):
    """`protocol: completion`: a single-shot agent (it has `complete`, no `begin`)."""

    def complete(self, task: Task, sample: int, seed: int,
                 deadline_s: float = math.inf) -> Completion:
        """The completion, within `timeout_s` and the episode's wall time left (`deadline_s`)."""
        limit = min(self.timeout_s, max(deadline_s, 0.0))
        tree = ProcessTree()  # every process it starts, killed when the call ends
        try:
            argv, environment = confined(self.argv, self.cwd)
            process = subprocess.Popen(
                tree.command(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=self.cwd, env=environment, start_new_session=True,
                preexec_fn=tree.preexec())
        except (OSError, subprocess.SubprocessError) as error:
            tree.kill()
            raise AgentError(f"{self.argv[0]}: cannot run: {error}") from None
        tree.adopt(process.pid)
        try:
            stdout, stderr = _communicate(
                process, tree, json.dumps(task_view(task, sample, seed)).encode(),
                time.monotonic() + limit)
        except subprocess.TimeoutExpired:
            raise AgentError(f"{self.argv[0]}: no completion within {limit:.3g} s") from None
        finally:
            tree.kill()
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
        if process.returncode != 0:
            raise AgentError(
                f"{self.argv[0]} exited {process.returncode} on task {task.id}: "
                f"{_text(stderr).strip()[-500:]}"
            )
        return Completion(text=_text(stdout))


def _text(data: bytes) -> str:
    """What `text=True` would have made of it, a byte that is not UTF-8 shown as U+FFFD."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _communicate(process: subprocess.Popen, tree: ProcessTree, text: bytes,
                 end: float) -> tuple[bytes, bytes]:
    """`text` to the agent's stdin, its stdout and stderr read, by `end` (monotonic), the tree
    watched as it waits. The agent is done when its own process exits (its pidfd says so): its
    answer is whole then, so its tree is killed and what is left in the pipes is read for at
    most EXIT_DRAIN_S; a process that escaped the tree and still holds them is not waited on."""
    pending = memoryview(text)
    output = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    exited = os.pidfd_open(process.pid)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(exited, selectors.EVENT_READ)
            selector.register(process.stdin.fileno(), selectors.EVENT_WRITE)
            for descriptor in (process.stdin.fileno(), *output):
                os.set_blocking(descriptor, False)
            for descriptor in output:
                selector.register(descriptor, selectors.EVENT_READ)
            draining = False
            while selector.get_map():
                wait = end - time.monotonic()
                if wait <= 0 and draining:
                    break
                if wait <= 0:
                    raise subprocess.TimeoutExpired(process.args, 0)
                poll = tree.poll_s
                for key, _events in selector.select(wait if poll is None else min(wait, poll)):
                    if key.fd == exited:
                        selector.unregister(exited)
                        tree.kill()  # what still held the pipes goes: the rest is read now
                        draining, end = True, min(end, time.monotonic() + EXIT_DRAIN_S)
                    elif key.fd in output:
                        _read(selector, key.fd, output[key.fd])
                    else:
                        pending = _write(selector, process.stdin, pending)
                tree.watch()
    finally:
        os.close(exited)
    return bytes(output[process.stdout.fileno()]), bytes(output[process.stderr.fileno()])


def _write(selector: selectors.BaseSelector, stdin, pending: memoryview) -> memoryview:
    """Write what the pipe takes; stdin is closed once all is written or the agent closed it."""
    try:
        pending = pending[os.write(stdin.fileno(), pending[:_CHUNK]):]
    except BlockingIOError:
        return pending
    except OSError:  # the agent closed its stdin: what it read is what it gets
        pending = pending[:0]
    if not pending:
        selector.unregister(stdin.fileno())
        stdin.close()
    return pending


def _read(selector: selectors.BaseSelector, descriptor: int, into: bytearray) -> None:
    try:
        data = os.read(descriptor, _CHUNK)
    except BlockingIOError:
        return
    if data:
        into += data
    else:
        selector.unregister(descriptor)


class CommandStepAgent(_Command):
    """`protocol: steps`: a multi-turn agent (it has `begin`, no `complete`); `timeout_s` is
    per action."""

    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief) -> ProcessSession:
        return ProcessSession(self.argv, self.cwd, task_message(task, sample, seed, brief),
                              self.timeout_s)


def make(settings: CommandSettings, context: AgentContext) -> CommandAgent | CommandStepAgent:
    if settings.protocol == "steps":
        return CommandStepAgent(settings, context)
    return CommandAgent(settings, context)
