"""Task kinds by name. A kind brings its schema (the model its task records must pass), its
program builder (how a completion and the hidden tests become the program the sandbox runs)
and its scorer version. Adding a kind is an entry here plus its module, which holds the three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from heldout.plugins import Plugin, Registry
from heldout.sandbox.protocol import Program

DEFAULT_KIND = "python-function"

# A kind's target is its module's TaskKind; its settings model is its tasks' schema.
TASK_KINDS = Registry("task kind", [
    Plugin(DEFAULT_KIND, "heldout.tasks.python_function:KIND", "Task"),
    Plugin("python-program", "heldout.tasks.python_program:KIND", "ProgramTask"),
    Plugin("repository", "heldout.tasks.repository:KIND", "RepositoryTask"),
])


@dataclass(frozen=True)
class TaskKind:
    # Part of the harness fingerprint: bumped whenever a program's layout or the meaning of a
    # pass changes, so that scores from before and after are never compared.
    scorer_version: str
    # (task, completion) -> the program the sandbox runs; a judged program carries the trusted
    # part (the tests) apart from the code under judgement (heldout.sandbox.protocol.Program).
    build_program: Callable[..., Program]
    # Whether a completion continues the prompt's code (a function's body after its signature)
    # rather than being a program of its own: what code-aware agents and tools build upon.
    completes_prompt: bool = True
    # The task whose hidden tests are the public ones: what the public-versus-hidden alarm
    # judges. Most kinds keep their public tests in the `tests` format.
    public_task: Callable[[Any], Any] = lambda task: task.model_copy(
        update={"tests": task.public_tests})
    # The task's code as a training copy would hold it, which decontamination fingerprints
    # rename-invariantly: for most kinds the prompt, then the solution.
    program_text: Callable[[Any], str] = lambda task: task.prompt + (task.reference or "")


def task_kind(name: str) -> TaskKind:
    return TASK_KINDS[name].load()
