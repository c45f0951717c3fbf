"""The scorer on HumanEval, on both backends: every canonical solution passes, every empty body
fails, known-wrong completions fail with the right status and the judge's reason; and the
judged program it builds, whose candidate part never holds the tests."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heldout.episodes.judge import build_program, score, score_many
from heldout.errors import SandboxError
from heldout.tasks.record import Task, TaskRuntime
from heldout.tasks.sources import load_tasks

HUMANEVAL = load_tasks("humaneval")
LIMITS = {"timeout_s": 3.0, "memory_mb": 512}
FIRST = HUMANEVAL[0]  # has_close_elements(numbers, threshold)



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
    assert all(r.stderr_tail.endswith("\n[heldout judge] the tests passed") for r in canonical)


WRONG = {
    "a wrong answer": ("    return False\n", "failed", "AssertionError"),
    "an exception": ("    return numbers[10**9]\n", "failed", "IndexError"),
    "a syntax error": ("    return (\n", "failed", "SyntaxError"),
    "a body outside the function": ("return True\n", "failed", "'return' outside function"),
    "an infinite loop": ("    while True:\n        pass\n", "timeout",
                         "the candidate used its 1.5 s of CPU"),
    "a memory hog": ("    return [0] * 10**10\n", "oom", "MemoryError"),
    "an exit before the tests": ("    pass\nimport sys\nsys.exit(0)\n", "failed",
                                 "[heldout judge] the solution did not load: SystemExit: 0"),
}


@pytest.mark.parametrize("name", WRONG)
def test_a_known_wrong_completion_fails_with_its_status(sandbox, name):
    completion, status, evidence = WRONG[name]
    result = score(FIRST, completion, sandbox, timeout_s=1.5, memory_mb=256)
    assert (result.passed, result.status) == (False, status)
    assert evidence in result.stderr_tail


def test_the_tests_go_to_the_judge_and_never_into_the_candidates_program():
    program = build_program(FIRST, FIRST.reference)
    assert program.source == FIRST.prompt + FIRST.reference + "\n"
    assert json.loads(program.judge) == {"prompt": FIRST.prompt, "tests": FIRST.tests,
                                         "entry_point": FIRST.entry_point}
    assert FIRST.tests.strip() not in program.source and program.stdin == ""
    assert (program.group, program.image) == (FIRST.id, None)


def test_a_task_runtime_picks_the_image_and_the_limits(request):
    subprocess_backend = request.getfixturevalue("subprocess_sandbox")
    slow = FIRST.model_copy(update={"runtime": TaskRuntime(image="python:3.12", timeout_s=0.5)})
    assert build_program(slow, "").image == "python:3.12"
    looping = "    while True:\n        pass\n"
    fast, limited = score_many([(FIRST, FIRST.reference), (slow, looping)], subprocess_backend,
                               timeout_s=30, memory_mb=256)
    assert (fast.status, limited.status) == ("ok", "timeout")
    assert limited.exec_s < 2 and "the candidate used its 0.5 s of CPU" in limited.stderr_tail


def test_a_kind_without_a_scorer_is_refused():
    other = Task.model_construct(**{**FIRST.model_dump(), "kind": "repo-patch"})
    with pytest.raises(SandboxError, match="no scorer for kind 'repo-patch'"):
        build_program(other, "")


@given(st.text())
def test_any_completion_text_is_the_candidates_source_and_nothing_else(completion):
    """Whatever a completion holds (quotes, a forged reply, the tests' text), it is the
    candidate's program, and the judge's part is the task's alone."""
    program = build_program(FIRST, completion)
    assert program.source == FIRST.prompt + completion + "\n"
    assert json.loads(program.judge)["tests"] == FIRST.tests
