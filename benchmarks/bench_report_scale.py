"""The paired report on 10,000 tasks under the test access's default design (12 paired runs of
2 episodes, pooled): issue 39 asks for under 10 s.

Run by hand: PYTHONPATH=. .venv/bin/python benchmarks/bench_report_scale.py [--tasks N]
Prints the wall time of build_report and of writing the report (figures included)."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from heldout.report import build_report, write_report
from heldout.statistics.counts import pool_runs
from stages.reruns import RerunsConfig

DESIGN = RerunsConfig()


def run_table(name: str, probabilities: np.ndarray, uniforms: np.ndarray,
              started: float) -> pd.DataFrame:
    """One run of one arm: every task's episodes, passing where the uniform falls below its
    probability."""
    tasks, episodes = uniforms.shape
    passed = (uniforms < probabilities[:, None]).ravel()
    return pd.DataFrame({
        "checkpoint": name, "task_id": np.repeat([f"t{i:05d}" for i in range(tasks)], episodes),
        "sample": np.tile(np.arange(episodes), tasks), "seed": 0, "harness": "h" * 64,
        "completion": "", "completion_sha": "", "passed": passed, "public_passed": None,
        "status": "ok", "error": "", "finish_reason": "stop", "tokens_in": 0, "tokens_out": 0,
        "turns": 1, "tool_calls": 1, "end_reason": "submitted", "agent_s": 0.0, "exec_s": 0.0,
        "cost_usd": 0.0, "trajectory": "[]", "step_timings": "[]",
        "started_at": started + np.arange(tasks * episodes, dtype=float),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    tasks = parser.parse_args().tasks
    rng = np.random.default_rng(0)
    base_p = rng.beta(0.5, 0.5, tasks)
    runs: dict[str, list[pd.DataFrame]] = {"base": [], "candidate": []}
    for run in range(DESIGN.runs):  # turn about, under common random numbers
        uniforms = rng.random((tasks, DESIGN.episodes))
        for offset, (arm, p) in enumerate((("base", base_p),
                                           ("candidate", np.clip(base_p + 0.02, 0, 1)))):
            runs[arm].append(run_table(arm, p, uniforms, 1e9 * (2 * run + offset + 1)))
    base, candidate, reruns = pool_runs(runs["base"], runs["candidate"])
    started = time.perf_counter()
    report = build_report(base, candidate, reruns=reruns)
    built = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        write_report(report, Path(folder))
        written = time.perf_counter() - started
    print(f"{tasks:,} tasks × {DESIGN.runs} runs × {DESIGN.episodes} episodes: build_report "
          f"{built:.2f} s, write_report {written:.2f} s, together {built + written:.2f} s; "
          f"verdict: {report.verdict}")


if __name__ == "__main__":
    main()
