"""`python`: a function `module:function` is an agent. It gets the task view (no hidden tests),
the sample index and the seed, and returns the completion text or a Completion."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pydantic import Field

from heldout.agents.protocol import AgentContext, AgentSettings, Completion, task_view
from heldout.errors import AgentError, ParamsError
from heldout.tasks.record import Task


class PythonSettings(AgentSettings):
    function: str = Field(pattern=r"^[\w.]+:\w+$", description="module:function")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")


class PythonAgent:
    def __init__(self, function: Callable[..., Any], options: dict[str, Any]):
        self.function = function
        self.options = options

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        result = self.function(task_view(task, sample, seed), **self.options)
        if isinstance(result, Completion):
            return result
        if isinstance(result, str):
            return Completion(text=result)
        raise AgentError(
            f"{self.function.__module__}.{self.function.__name__} returned "
            f"{type(result).__name__} for task {task.id}; return a str or a Completion"
        )


def make(settings: PythonSettings, context: AgentContext) -> PythonAgent:
    module_name, name = settings.function.split(":")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ParamsError(f"python agent: cannot load {settings.function}: {error}") from None
    return PythonAgent(function, settings.options)
