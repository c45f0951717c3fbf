"""The learning completion of issue 22: one fixed text, the same for every task, that solves
nothing and learns hidden answers wherever state survives from one judged program to the next
and the judge's pattern of calls says which answers were right (tests/data/learner.py).

Used by tests/sandbox/test_learning_completion.py (a few tasks) and benchmarks/bench_learner.py
(every HumanEval task and every embedded program, on both backends)."""

from __future__ import annotations

from pathlib import Path

from heldout.episodes.judge import score_many

LEARNER = (Path(__file__).parent / "data" / "learner.py").read_text(encoding="utf-8")


def function_completion() -> str:
    """A python-function body: each call asks the learner, by the function's own name."""
    return ("    import sys as __sys\n"
            "    return _learn(__sys._getframe().f_code.co_name, dict(locals()))\n\n"
            + LEARNER)


def program_completion() -> str:
    """A python-program: each run on a case's input asks the learner; runs of one program are
    forks of one candidate process, their parent."""
    return (LEARNER + "\nprint(_guess(_sys.stdin.read(), _os.getppid(), _PROGRAM_GUESSES))\n")


def passes_over_samples(tasks, sandbox, samples: int, limits: dict) -> dict[str, int]:
    """Per task, how many of `samples` runs of the learner, on `sandbox`, passed. A task's
    runs are one batch, as a checkpoint's episodes of a task are: on one worker (or in the
    docker backend's one container per task) they run one after another, so every run may
    learn from every earlier one."""
    passes = {}
    for task in tasks:
        completion = (program_completion() if task.kind == "python-program"
                      else function_completion())
        results = score_many([(task, completion)] * samples, sandbox, **limits)
        passes[task.id] = sum(result.passed for result in results)
    return passes
