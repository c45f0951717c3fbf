"""Verdicts idle and beside busy processes, by hand (issue 27, item 2):
`PYTHONPATH=. .venv/bin/python benchmarks/bench_load_verdicts.py [--busy 8]`.

The programs the demo checkpoints submit, for every HumanEval task (the test split's among
them, without opening it): the reference and its first `--mutants` mutants
(heldout/agents/mutation.py, as the demo agent draws them), judged under the harness's limits
once on an idle machine and once beside `--busy` processes that spin, each in a session of its
own (the kernel shares the CPU between sessions). Prints the statuses that differ, row by row,
and the time each pass took; the bar is 0 rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager

from heldout.agents.mutation import mutants
from heldout.episodes.judge import score_many
from heldout.sandbox.config import make_sandbox
from heldout.tasks.sources import load_tasks


@contextmanager
def busy(processes: int):
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 start_new_session=True) for _ in range(processes)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def programs(mutants_per_task: int) -> list[tuple]:
    pairs = []
    for task in load_tasks("humaneval"):
        pairs.append((task, "reference", task.reference))
        for operator, completion in mutants(task.prompt, task.reference)[:mutants_per_task]:
            pairs.append((task, operator, completion))
    return pairs


def judged(pairs: list[tuple], backend: str, timeout_s: float) -> tuple[list[dict], float]:
    started = time.monotonic()
    with make_sandbox(backend, workers=2) as sandbox:
        results = score_many([(task, completion) for task, _, completion in pairs], sandbox,
                             timeout_s=timeout_s, memory_mb=512)
    rows = [{"task": task.id, "program": operator, "status": result.status,
             "passed": result.passed, "cpu_s": getattr(result, "cpu_s", None),
             "wall_s": result.exec_s}
            for (task, operator, _), result in zip(pairs, results, strict=True)]
    return rows, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=8)
    parser.add_argument("--mutants", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=10.0, help="harness.timeout_s")
    parser.add_argument("--backend", default="subprocess")
    options = parser.parse_args()
    pairs = programs(options.mutants)
    idle, idle_s = judged(pairs, options.backend, options.timeout)
    with busy(options.busy):
        loaded, loaded_s = judged(pairs, options.backend, options.timeout)
    differ = [(a, b) for a, b in zip(idle, loaded, strict=True)
              if (a["status"], a["passed"]) != (b["status"], b["passed"])]
    slowest = max(loaded, key=lambda row: row["wall_s"])
    print(json.dumps({
        "programs": len(pairs), "tasks": len({row["task"] for row in idle}),
        "busy": options.busy, "timeout_s": options.timeout, "backend": options.backend,
        "idle_s": round(idle_s, 1), "loaded_s": round(loaded_s, 1),
        "statuses_idle": Counter(row["status"] for row in idle),
        "statuses_loaded": Counter(row["status"] for row in loaded),
        "passed_idle": sum(row["passed"] for row in idle),
        "passed_loaded": sum(row["passed"] for row in loaded),
        "rows_that_differ": len(differ), "differ": differ[:20],
        "slowest_loaded": slowest}, indent=1))


if __name__ == "__main__":
    main()
