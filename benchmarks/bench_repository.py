"""Repository tasks' speed, by hand: `.venv/bin/python benchmarks/bench_repository.py`.

1. The judge: seconds per task for the 12 embedded repositories' reference patches, on each
   backend, one program at a time (latency) and all 12 on 2 workers (throughput), side by side
   with a plain `python3 -m pytest` of the same hidden tests on the host (no sandbox, no judge).
2. The `run` tool: its overhead outside the command itself, the median of ROUNDS calls of
   `true` through RepositoryEnvironment minus the median of a plain
   `subprocess.run(["/bin/sh", "-c", "true"])` measured alternately in the same run.
The docker half needs DOCKER_HOST (`eval "$(scripts/container-engine.sh)"`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The plain pytest run the judge is held to lives with the tests (tests/repository_fixtures.py),
# which are not an installed package.
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from heldout.episodes.budgets import ExecLimits  # noqa: E402
from heldout.episodes.judge import score_many  # noqa: E402
from heldout.episodes.repository_environment import RepositoryEnvironment  # noqa: E402
from heldout.sandbox.config import make_sandbox  # noqa: E402
from heldout.tasks.sources import load_tasks  # noqa: E402
from tests.repository_fixtures import plain_pytest_passes  # noqa: E402

TASKS = load_tasks(REPO / "tasks/examples/repository.jsonl")
LIMITS = {"timeout_s": 30.0, "memory_mb": 1024}
ROUNDS = 30


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def judge(backend: str) -> dict[str, float]:
    with make_sandbox(backend, workers=2) as sandbox:
        score_many([(TASKS[0], TASKS[0].reference)], sandbox, **LIMITS)  # warm: workers up
        one = [timed(lambda task=task: score_many([(task, task.reference)], sandbox, **LIMITS))
               for task in TASKS]
        pairs = [(task, task.reference) for task in TASKS]
        passed: list = []
        whole = timed(lambda: passed.extend(score_many(pairs, sandbox, **LIMITS)))
        assert all(result.passed for result in passed)
        tool = RepositoryEnvironment(TASKS[0], sandbox, ExecLimits(timeout_s=10.0,
                                                                   memory_mb=1024),
                                     "{prompt}", ("submit",))
        tool_s, plain_s = [], []
        for _ in range(ROUNDS):
            tool_s.append(timed(lambda: tool.call("run", {"command": "true"})))
            plain_s.append(timed(lambda: subprocess.run(["/bin/sh", "-c", "true"])))
    return {"latency_s": statistics.median(one), "throughput_s_per_task": whole / len(TASKS),
            "run_tool_s": statistics.median(tool_s), "plain_s": statistics.median(plain_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    plain = statistics.median(timed(lambda task=task: plain_pytest_passes(task, task.reference))
                              for task in TASKS)
    print(f"plain pytest on the host, median per task: {plain:.3f} s")
    backends = ["subprocess"] + (["docker"] if os.environ.get("DOCKER_HOST") else [])
    for backend in backends:
        found = judge(backend)
        overhead_ms = (found["run_tool_s"] - found["plain_s"]) * 1000
        print(f"{backend}: judge latency {found['latency_s']:.3f} s/task "
              f"({found['latency_s'] / plain:.2f}x plain pytest), 12 tasks on 2 workers "
              f"{found['throughput_s_per_task']:.3f} s/task; run tool `true` "
              f"{found['run_tool_s'] * 1000:.1f} ms vs plain subprocess.run "
              f"{found['plain_s'] * 1000:.1f} ms: overhead {overhead_ms:.1f} ms")


if __name__ == "__main__":
    main()
