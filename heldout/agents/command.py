"""`command`: any executable is an agent.

`protocol: completion` (the default): one process per episode, the task view as JSON on stdin,
the completion on stdout, within `timeout_s` and the episode's wall time; every process it
started is killed when it is done (heldout.agents.process_tree). `protocol: steps`: one process
per episode that acts turn by turn, JSON Lines both ways (heldout.agents.steps;
examples/README.md has the messages).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import time
from typing import Literal

from pydantic import Field

from heldout.agents.confinement import confined
from heldout.agents.process_tree import POLL_S, ProcessTree
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
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, cwd=self.cwd, env=environment, start_new_session=True,
                preexec_fn=tree.preexec())
        except (OSError, subprocess.SubprocessError) as error:
            tree.kill()
            raise AgentError(f"{self.argv[0]}: cannot run: {error}") from None
        tree.adopt(process.pid)
        try:
            stdout, stderr = _communicate(process, tree, json.dumps(task_view(task, sample, seed)),
                                          time.monotonic() + limit)
        except subprocess.TimeoutExpired:
            raise AgentError(f"{self.argv[0]}: no completion within {limit:.3g} s") from None
        finally:
            tree.kill()
            process.kill()
            process.wait()
        if process.returncode != 0:
            raise AgentError(
                f"{self.argv[0]} exited {process.returncode} on task {task.id}: "
                f"{stderr.strip()[-500:]}"
            )
        return Completion(text=stdout)


def _communicate(process: subprocess.Popen, tree: ProcessTree, text: str,
                 end: float) -> tuple[str, str]:
    """`process.communicate(text)` by `end` (monotonic), the tree watched as it waits. The agent
    is done when it exits: a process it left holding its stdout is killed then, not waited on."""
    given: str | None = text
    while (wait := end - time.monotonic()) > 0:
        try:
            return process.communicate(given, timeout=min(wait, POLL_S))
        except subprocess.TimeoutExpired:
            given = None  # sent, or being sent: communicate goes on where it was
            tree.watch()
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                tree.kill()  # what still holds the pipes goes: the rest is read to its end
    raise subprocess.TimeoutExpired(process.args, 0)


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
