"""The learning completion against the judge, by hand:
`PYTHONPATH=. .venv/bin/python benchmarks/bench_learner.py`.

Issue 22's trial, run as it was run: one fixed, task-agnostic completion (tests/data/learner.py)
that solves nothing, 16 samples a task in a row on one worker (or one container per task), over
all 164 HumanEval tasks and the embedded python-program set, on each backend. Prints the
passes per backend and task kind, beside a do-nothing control; the bar is 0. The docker half
needs DOCKER_HOST (`eval "$(scripts/container-engine.sh)"`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from heldout.episodes.judge import score
from heldout.sandbox.config import make_sandbox
from heldout.tasks.sources import load_tasks
from tests.learning import passes_over_samples

LIMITS = {"timeout_s": 5.0, "memory_mb": 512}
PROGRAMS = "tasks/examples/python_program.jsonl"


def control_passes(tasks, sandbox) -> int:
    return sum(score(task, "    pass\n" if task.kind != "python-program" else "pass\n",
                     sandbox, **LIMITS).passed for task in tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--tasks", type=int, default=164, help="the first N HumanEval tasks")
    parser.add_argument("--backends", default="subprocess,docker")
    options = parser.parse_args()
    sets = {"python-function": load_tasks("humaneval")[:options.tasks],
            "python-program": load_tasks(PROGRAMS)}
    for backend in options.backends.split(","):
        if backend == "docker" and not os.environ.get("DOCKER_HOST"):
            print("docker: skipped (DOCKER_HOST is unset)")
            continue
        for kind, tasks in sets.items():
            with make_sandbox(backend, workers=1) as sandbox:
                started = time.monotonic()
                passes = passes_over_samples(tasks, sandbox, options.samples, LIMITS)
                seconds = time.monotonic() - started
                control = control_passes(tasks, sandbox)
            passed = {task: count for task, count in passes.items() if count}
            print(json.dumps({"backend": backend, "kind": kind, "tasks": len(tasks),
                              "samples": len(tasks) * options.samples,
                              "learner_passes": sum(passes.values()),
                              "tasks_passed": len(passed), "control_passes": control,
                              "seconds": round(seconds, 1), "passed": passed}))


if __name__ == "__main__":
    main()
