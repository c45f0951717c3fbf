"""`python`: a function `module:function` is an agent.

`protocol: completion` (the default): a plain function gets the task view (no hidden tests),
with `options` as keyword arguments, and returns the completion text or a Completion.
`protocol: steps`: a generator function gets the task message (heldout.agents.steps), yields
action dicts and is sent the observation of each (examples/python_step_agent.py).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from heldout.agents.protocol import (
    AgentContext,
    AgentSettings,
    Completion,
    EpisodeBrief,
    task_message,
    task_view,
)
from heldout.agents.steps import GeneratorSession
from heldout.errors import AgentError, ParamsError
from heldout.tasks.record import Task


class PythonSettings(AgentSettings):
    function: str = Field(pattern=r"^[\w.]+:\w+$", description="module:function")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")
    protocol: Literal["completion", "steps"] = Field(
        default="completion",
        description="completion: a function returning the completion; steps: a generator "
                    "function yielding actions (examples/README.md)")


def _name(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{function.__name__}"


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
            f"{_name(self.function)} returned "
            f"{type(result).__name__} for task {task.id}; return a str or a Completion"
        )


class PythonStepAgent:
    """`protocol: steps`: a multi-turn agent (it has `begin`, no `complete`)."""

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]):
        self.function = function
        self.options = options

    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief) -> GeneratorSession:
        generator = self.function(task_message(task, sample, seed, brief), **self.options)
        if not inspect.isgenerator(generator):
            raise AgentError(f"{_name(self.function)} returned {type(generator).__name__}, "
                             "not a generator")
        return GeneratorSession(generator, _name(self.function))


def make(settings: PythonSettings, context: AgentContext) -> PythonAgent | PythonStepAgent:
    module_name, name = settings.function.split(":")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ParamsError(f"python agent: cannot load {settings.function}: {error}") from None
    steps = settings.protocol == "steps"
    if inspect.isgeneratorfunction(inspect.unwrap(function)) != steps:
        raise ParamsError(
            f"python agent: {settings.function} is a generator function: set protocol: steps"
            if not steps else
            f"python agent: protocol: steps needs a generator function (one that yields "
            f"actions); {settings.function} is not one"
        )
    return (PythonStepAgent if steps else PythonAgent)(function, settings.options)
