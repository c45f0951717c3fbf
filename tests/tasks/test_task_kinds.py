"""Task kinds: a task's kind chooses the schema its record must pass, the program that scores
it and the scorer version; adding a kind is one registry entry plus its module (here, this
module plays the new kind's)."""

from __future__ import annotations

from typing import Literal

import pytest

from heldout.episodes.harness import Harness
from heldout.episodes.judge import build_program, score
from heldout.errors import InputFileError, SandboxError
from heldout.plugins import Plugin
from heldout.sandbox.protocol import Program
from heldout.tasks import python_function
from heldout.tasks.kinds import DEFAULT_KIND, TASK_KINDS, TaskKind, task_kind
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes

ECHO_LINE = ('{"id": "e1", "kind": "echo", "prompt": "Say hi.", "entry_point": "-", '
             '"tests": "-", "expected": "hi"}')


class EchoTask(Task):
    """The schema of a kind whose completion passes when it equals `expected`."""

    kind: Literal["echo"] = "echo"
    expected: str


def build_echo(task: EchoTask, completion: str) -> Program:
    """A plain program (no judge): it passes by exiting 0."""
    source = f"import sys\nsys.exit(0 if {completion!r} == {task.expected!r} else 1)\n"
    return Program(source=source, group=task.id)


KIND = TaskKind(scorer_version="echo/1", build_program=build_echo)


@pytest.fixture
def echo_kind(monkeypatch):
    monkeypatch.setitem(TASK_KINDS._plugins, "echo",
                        Plugin("echo", "tests.tasks.test_task_kinds:KIND", "EchoTask"))


def test_python_function_is_the_default_kind_and_sets_the_harness_scorer_version():
    assert TASK_KINDS.names == (DEFAULT_KIND, "python-program", "repository")
    assert DEFAULT_KIND == "python-function"
    assert task_kind(DEFAULT_KIND) is python_function.KIND
    assert Harness().scorer_version == python_function.SCORER_VERSION == "python-function/2"
    assert TASK_KINDS[DEFAULT_KIND].settings_model() is Task


def test_a_record_is_validated_by_its_kinds_schema(echo_kind):
    [task] = load_jsonl_bytes(ECHO_LINE.encode(), "echo.jsonl")
    assert (type(task), task.kind, task.expected) == (EchoTask, "echo", "hi")
    with pytest.raises(InputFileError) as raised:
        load_jsonl_bytes(ECHO_LINE.replace(', "expected": "hi"', "").encode(), "echo.jsonl")
    assert [(p.line, p.field, p.message) for p in raised.value.problems] == [
        (1, "expected", "required field is missing")
    ]


def test_the_tasks_kind_builds_its_program_and_the_judge_scores_it(
    echo_kind, subprocess_sandbox
):
    [task] = load_jsonl_bytes(ECHO_LINE.encode(), "echo.jsonl")
    assert task_kind(task.kind).scorer_version == "echo/1"
    program = build_program(task, "hi")
    assert program.judge is None and "'hi' == 'hi'" in program.source
    limits = {"timeout_s": 5.0, "memory_mb": 256}
    assert score(task, "hi", subprocess_sandbox, **limits).passed
    assert not score(task, "bye", subprocess_sandbox, **limits).passed


def test_without_its_registry_entry_a_kind_is_unknown_to_loader_and_judge():
    with pytest.raises(InputFileError, match="unknown kind 'echo'; heldout knows python-function"):
        load_jsonl_bytes(ECHO_LINE.encode(), "echo.jsonl")
    task = EchoTask(id="e1", prompt="Say hi.", entry_point="-", tests="-", expected="hi")
    with pytest.raises(SandboxError, match="task e1: no scorer for kind 'echo'"):
        build_program(task, "hi")
