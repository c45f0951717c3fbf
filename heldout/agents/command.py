"""`command`: any executable is an agent. Task JSON on stdin, completion on stdout."""

from __future__ import annotations

import json
import shlex
import subprocess

from pydantic import Field

from heldout.agents.protocol import AgentContext, AgentSettings, Completion, task_view
from heldout.errors import AgentError
from heldout.tasks.record import Task


class CommandSettings(AgentSettings):
    command: str | list[str] = Field(description="argv list, or one string split like a shell")
    timeout_s: float | None = Field(default=None, gt=0, description="default: harness timeout")


class CommandAgent:
    def __init__(self, settings: CommandSettings, context: AgentContext):
        command = settings.command
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.timeout_s = settings.timeout_s or context.timeout_s
        self.cwd = context.project_root

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        try:
            done = subprocess.run(
                self.argv,
                input=json.dumps(task_view(task, sample, seed)),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                cwd=self.cwd,
            )
        except subprocess.TimeoutExpired:
            raise AgentError(f"{self.argv[0]}: no completion within {self.timeout_s} s") from None
        except OSError as error:
            raise AgentError(f"{self.argv[0]}: cannot run: {error}") from None
        if done.returncode != 0:
            raise AgentError(
                f"{self.argv[0]} exited {done.returncode} on task {task.id}: "
                f"{done.stderr.strip()[-500:]}"
            )
        return Completion(text=done.stdout)


def make(settings: CommandSettings, context: AgentContext) -> CommandAgent:
    return CommandAgent(settings, context)
