"""The paired report on 10,000 tasks × 10 episodes: issue 15 asks for under 10 s.

Run by hand: .venv/bin/python benchmarks/bench_report_scale.py
Prints the wall time of build_report and of writing the report (figures included)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from heldout.report import build_report, write_report
from heldout.statistics.power import Reruns

TASKS, EPISODES = 10_000, 10


def rollouts(name: str, probabilities: np.ndarray, uniforms: np.ndarray) -> pd.DataFrame:
    passed = (uniforms < probabilities[:, None]).ravel()
    return pd.DataFrame({
        "checkpoint": name, "task_id": np.repeat([f"t{i:05d}" for i in range(TASKS)], EPISODES),
        "sample": np.tile(np.arange(EPISODES), TASKS), "seed": 0, "harness": "h" * 64,
        "completion": "", "completion_sha": "", "passed": passed, "public_passed": None,
        "status": "ok", "error": "", "finish_reason": "stop", "tokens_in": 0, "tokens_out": 0,
        "turns": 1, "tool_calls": 1, "end_reason": "submitted", "agent_s": 0.0, "exec_s": 0.0,
        "cost_usd": 0.0, "trajectory": "[]", "step_timings": "[]",
    })


def main() -> None:
    rng = np.random.default_rng(0)
    base_p = rng.beta(0.5, 0.5, TASKS)
    uniforms = rng.random((TASKS, EPISODES))  # common random numbers
    base = rollouts("base", base_p, uniforms)
    candidate = rollouts("candidate", np.clip(base_p + 0.02, 0, 1), uniforms)
    started = time.perf_counter()
    # Three runs with a drift (sd 0.01 over an episode variance of 0.00004): the timing of the
    # report with reruns is the point here.
    report = build_report(base, candidate, reruns=Reruns((0.50, 0.51, 0.49), 0.00004))
    built = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        write_report(report, Path(folder))
        written = time.perf_counter() - started
    print(f"{TASKS} tasks × {EPISODES} episodes: build_report {built:.2f} s, write_report "
          f"{written:.2f} s; verdict: {report.verdict}")


if __name__ == "__main__":
    main()
