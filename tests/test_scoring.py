"""The scorer on HumanEval, on both backends: every canonical solution passes, every empty body
fails, known-wrong completions fail with the right status; and the program it builds."""

from __future__ import annotations

import ast
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heldout.episodes.judge import NO_MARKER_NOTE, _judge, build_program, score, score_many
from heldout.errors import SandboxError
from heldout.sandbox.protocol import ExecResult
from heldout.tasks.record import Task, TaskRuntime
from heldout.tasks.sources import load_tasks
from tests.test_sandbox import (  # noqa: F401 (fixtures)
    BACKENDS,
    docker_sandbox,
    subprocess_sandbox,
)

HUMANEVAL = load_tasks("humaneval")
LIMITS = {"timeout_s": 3.0, "memory_mb": 512}
FIRST = HUMANEVAL[0]  # has_close_elements(numbers, threshold)


@pytest.fixture(params=BACKENDS)
def sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")


def test_every_canonical_solution_passes_and_every_empty_body_fails(sandbox):
    pairs = [(t, t.reference) for t in HUMANEVAL] + [(t, "") for t in HUMANEVAL]
    results = score_many(pairs, sandbox, **LIMITS)
    canonical, empty = results[: len(HUMANEVAL)], results[len(HUMANEVAL) :]
    failing = {t.id: r.stderr_tail[-300:] for t, r in zip(HUMANEVAL, canonical, strict=True)
               if not r.passed}
    assert failing == {}
    assert [r.status for r in canonical] == ["ok"] * len(HUMANEVAL)
    assert not any(r.passed for r in empty)
    assert Counter(r.status for r in empty) == {"failed": len(HUMANEVAL)}
    assert all("heldout-checks-returned" not in r.stdout_tail for r in results)


WRONG = {
    "a wrong answer": ("    return False\n", "failed", "AssertionError"),
    "an exception": ("    return numbers[10**9]\n", "failed", "IndexError"),
    "a syntax error": ("    return (\n", "failed", "SyntaxError"),
    "a body outside the function": ("return True\n", "failed", "'return' outside function"),
    "an infinite loop": ("    while True:\n        pass\n", "timeout", "no exit within"),
    "a memory hog": ("    return [0] * 10**10\n", "oom", "MemoryError"),
    "an exit before the tests": ("    pass\nimport sys\nsys.exit(0)\n", "failed", NO_MARKER_NOTE),
}


@pytest.mark.parametrize("name", WRONG)
def test_a_known_wrong_completion_fails_with_its_status(sandbox, name):
    completion, status, evidence = WRONG[name]
    result = score(FIRST, completion, sandbox, timeout_s=1.5, memory_mb=256)
    assert (result.passed, result.status) == (False, status)
    assert evidence in result.stderr_tail


def test_the_nonce_is_handed_on_stdin_and_never_in_the_program():
    program = build_program(FIRST, FIRST.reference, "feedface" * 4)
    assert program.stdin == "feedface" * 4
    assert "feedface" not in program.source
    assert (program.group, program.image) == (FIRST.id, None)


def test_a_task_runtime_picks_the_image_and_the_limits(request):
    subprocess_backend = request.getfixturevalue("subprocess_sandbox")
    slow = FIRST.model_copy(update={"runtime": TaskRuntime(image="python:3.12", timeout_s=0.5)})
    assert build_program(slow, "", "n").image == "python:3.12"
    looping = "    while True:\n        pass\n"
    fast, limited = score_many([(FIRST, FIRST.reference), (slow, looping)], subprocess_backend,
                               timeout_s=30, memory_mb=256)
    assert (fast.status, limited.status) == ("ok", "timeout")
    assert "no exit within 0.5 s" in limited.stderr_tail


def test_a_kind_without_a_scorer_is_refused():
    other = Task.model_construct(**{**FIRST.model_dump(), "kind": "repo-patch"})
    with pytest.raises(SandboxError, match="no scorer for kind 'repo-patch'"):
        build_program(other, "", "n")


@given(st.text())
def test_any_completion_text_stays_inside_its_literal(completion):
    """Whatever a completion holds (quotes, the placeholders' names, a marker), the program
    parses and receives exactly the solution and the tests, as data."""
    program = build_program(FIRST, completion, "n")
    tree = ast.parse(program.source)
    main = next(node for node in tree.body if getattr(node, "name", "") == "_heldout_main")
    receiving = next(
        node for node in main.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "(solution, tests)"
    )
    solution, tests = ast.literal_eval(receiving.value)
    assert solution == FIRST.prompt + completion + "\n"
    assert tests == FIRST.tests


def test_judging_needs_exit_0_and_the_exact_marker_line():
    def ran(status: str, stdout: str) -> ExecResult:
        return ExecResult(status == "ok", status, 0 if status == "ok" else 1, stdout, "", 0.1,
                          True)

    nonce = "ab" * 16
    marker = f"\nheldout-checks-returned:{nonce}\n"
    assert _judge(ran("ok", "out" + marker), nonce).passed
    assert _judge(ran("ok", "out" + marker), nonce).stdout_tail == "out"
    assert not _judge(ran("ok", "out\nheldout-checks-returned:" + "cd" * 16 + "\n"), nonce).passed
    assert not _judge(ran("failed", marker), nonce).passed
    no_marker = _judge(ran("ok", "out"), nonce)
    assert (no_marker.passed, no_marker.status) == (False, "failed")
