"""The learning completion passes nothing (issue 22; docs/sandbox.md, "A world of its own").

One fixed completion, the same text for every task, that solves nothing: it guesses, keeps in
every channel that might outlive a program which guesses were followed by another call, and
answers with what it learned. Before every program started from nothing and the judge made
every call whatever the answers, it passed 39 of 2,624 HumanEval samples (21 tasks) on the
subprocess backend and 63 (30 tasks) on docker, and on each backend some of the 64 samples of
the four tasks below and of the parity program; a do-nothing body passed 0. Now: 0 of 2,624 on
each backend.
`benchmarks/bench_learner.py` runs it over every task on both backends.
"""

from __future__ import annotations

import json

import pytest

from heldout.episodes.judge import score
from heldout.sandbox.config import make_sandbox
from heldout.tasks.sources import load_tasks
from tests.learning import passes_over_samples

# The tasks on which it learned most, 16 samples each, one worker: each run may learn from
# every earlier one.
LEARNABLE = ("HumanEval/52", "HumanEval/0", "HumanEval/48", "HumanEval/3")
LIMITS = {"timeout_s": 5.0, "memory_mb": 512}


@pytest.fixture(params=("subprocess", "docker"))
def one_worker(request):
    # Only this parameter's backend: skip, saying why, where it is missing.
    request.getfixturevalue(f"{request.param}_sandbox")
    with make_sandbox(request.param, workers=1) as sandbox:
        yield sandbox


def test_the_learning_completion_passes_no_sample(one_worker):
    tasks = [task for task in load_tasks("humaneval") if task.id in LEARNABLE]
    assert len(tasks) == len(LEARNABLE)
    assert passes_over_samples(tasks, one_worker, 16, LIMITS) == dict.fromkeys(LEARNABLE, 0)


# A program task whose answers are among the learner's guesses: YES or NO for each of five
# numbers, with no pattern a constant could pass.
PARITY = {"id": "prog/parity", "kind": "python-program", "compare": "exact",
          "prompt": "Parity\n\nRead an integer; print YES if it is even, else NO.\n",
          "tests": json.dumps([{"input": f"{x}\n", "output": "YES\n" if x % 2 == 0 else "NO\n"}
                               for x in (4, 7, 10, 13, 21)]),
          "reference": "print('YES' if int(input()) % 2 == 0 else 'NO')\n"}


def test_the_learning_program_passes_no_sample(one_worker, tmp_path):
    source = tmp_path / "parity.jsonl"
    source.write_text(json.dumps(PARITY) + "\n")
    tasks = [*load_tasks(str(source)), *load_tasks("tasks/examples/python_program.jsonl")[:2]]
    reference = score(tasks[0], PARITY["reference"], one_worker, **LIMITS)
    assert reference.passed, reference.stderr_tail
    passes = passes_over_samples(tasks, one_worker, 16, LIMITS)
    assert passes == {task.id: 0 for task in tasks}
