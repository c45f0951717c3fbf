from __future__ import annotations

import ast

import pytest

from heldout.agents.mutation import OPERATORS, mutants
from heldout.tasks.sources import load_tasks

PROMPT = "def clip(xs, lo):\n    '''Values of xs at least lo, and at most 10.'''\n"
REFERENCE = (
    "    if not xs:\n        return []\n"
    "    return [min(x, 10) for x in xs if x >= lo and x > 0]\n"
)


def test_every_operator_fires_on_a_reference_that_offers_it():
    found = {operator for operator, _ in mutants(PROMPT, REFERENCE)}
    assert found == set(OPERATORS) - {"swap_arithmetic"}
    assert "swap_arithmetic" in {op for op, _ in mutants("def f(a):\n", "    return a + 1\n")}


def test_each_mutant_changes_one_spot_of_the_reference_and_never_the_prompt():
    for operator, completion in mutants(PROMPT, REFERENCE):
        assert completion != REFERENCE
        ast.parse(PROMPT + completion)
        lines = zip(REFERENCE.splitlines(), completion.splitlines(), strict=False)
        changed = [(a, b) for a, b in lines if a != b]
        assert len(changed) <= 1 or operator == "drop_guard", (operator, completion)


def test_known_mutants_are_produced():
    completions = {c for _, c in mutants(PROMPT, REFERENCE)}
    assert REFERENCE.replace("min(x, 10)", "max(x, 10)") in completions
    assert REFERENCE.replace("x >= lo", "x < lo") in completions
    assert REFERENCE.replace("x, 10)", "x, 11)") in completions
    assert REFERENCE.replace(" and ", " or ") in completions
    assert REFERENCE.replace("    if not xs:\n        return []\n", "    pass\n") in completions


def test_mutants_are_distinct_deterministic_and_capped():
    first = mutants(PROMPT, REFERENCE)
    assert first == mutants(PROMPT, REFERENCE)
    assert len({c for _, c in first}) == len(first)
    assert len(mutants(PROMPT, REFERENCE, limit=3)) == 3


def test_a_reference_that_does_not_parse_has_no_mutants():
    assert mutants(PROMPT, "    return (\n") == []


@pytest.mark.parametrize("task", load_tasks("humaneval")[:20], ids=lambda t: t.id)
def test_humaneval_references_have_mutants(task):
    assert mutants(task.prompt, task.reference), task.id
