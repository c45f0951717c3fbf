"""Rollouts: rows that never vanish, common random numbers, and resume after a real kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from heldout.agents.protocol import Completion
from heldout.episodes.episode import Episode, plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.rows import ROW_COLUMNS, TIMING_COLUMNS, rollout_table
from heldout.errors import AgentError
from heldout.tasks.sources import load_tasks
from stages import catalog, rollouts, split
from tests.conftest import configure_small_project

TASKS = load_tasks("humaneval")[:6]
HARNESS = Harness(n=2, seed=11, timeout_s=5)


class FixedAgent:
    def __init__(self, completion: Completion | Exception):
        self.completion = completion

    def complete(self, task, sample, seed):
        if isinstance(self.completion, Exception):
            raise self.completion
        return self.completion


@pytest.fixture(scope="module")
def sandbox():
    opened = HARNESS.sandbox.open()
    yield opened
    opened.close()


def episode(task=TASKS[0]) -> Episode:
    return plan_episodes([task], HARNESS)[0]


def test_plan_is_tasks_by_samples_with_checkpoint_free_seeds():
    plan = plan_episodes(TASKS, HARNESS)
    assert len(plan) == len(TASKS) * HARNESS.n
    assert plan == plan_episodes(list(reversed(TASKS)), HARNESS)
    assert len({e.seed for e in plan}) == len(plan)
    assert plan_episodes(TASKS, HARNESS, rerun=1)[0].seed != plan[0].seed


def test_a_correct_completion_passes_and_a_wrong_one_fails(sandbox):
    right = run_episode(FixedAgent(Completion(TASKS[0].reference)), sandbox, HARNESS, episode())
    wrong = run_episode(FixedAgent(Completion("    return None\n")), sandbox, HARNESS, episode())
    assert (right["passed"], right["status"]) == (True, "ok")
    assert (wrong["passed"], wrong["status"]) == (False, "ok")
    assert wrong["error"]


def test_agent_failures_truncations_and_refusals_stay_as_rows(sandbox):
    failed = run_episode(FixedAgent(AgentError("server said 503")), sandbox, HARNESS, episode())
    assert (failed["status"], failed["passed"]) == ("error", False)
    assert "server said 503" in failed["error"]
    bug = run_episode(FixedAgent(ZeroDivisionError("x")), sandbox, HARNESS, episode())
    assert bug["status"] == "error" and "ZeroDivisionError" in bug["error"]
    cut = Completion(TASKS[0].reference, finish_reason="length")
    assert run_episode(FixedAgent(cut), sandbox, HARNESS, episode())["status"] == "truncated"
    refused = Completion("", finish_reason="refused")
    row = run_episode(FixedAgent(refused), sandbox, HARNESS, episode())
    assert (row["status"], row["passed"], row["exec_s"]) == ("refused", False, 0.0)


def test_a_program_past_the_time_budget_is_a_timeout_row(sandbox):
    slow = Completion("    import time\n    time.sleep(30)\n")
    harness = HARNESS.model_copy(update={"timeout_s": 1.0})
    row = run_episode(FixedAgent(slow), sandbox, harness, episode())
    assert (row["status"], row["passed"]) == ("timeout", False)


def test_errors_are_retried_as_the_harness_says(sandbox):
    calls = []

    class FlakyAgent:
        def complete(self, task, sample, seed):
            calls.append(sample)
            if len(calls) == 1:
                raise AgentError("first call fails")
            return Completion(task.reference)

    row = run_episode(FlakyAgent(), sandbox, HARNESS.model_copy(update={"retries": 1}), episode())
    assert row["passed"] and len(calls) == 2


def test_rollout_table_has_the_contract_columns_and_order():
    rows = [{**{c: None for c in ROW_COLUMNS}, "task_id": t, "sample": s, "seed": 1,
             "harness": "h", "completion": "", "completion_sha": "", "passed": False,
             "status": "ok", "error": "", "finish_reason": "stop", "tokens_in": 0,
             "tokens_out": 0, "turns": 1, "tool_calls": 1, "end_reason": "submitted",
             "agent_s": 0.0, "exec_s": 0.0, "cost_usd": 0.0, "trajectory": "[]",
             "step_timings": "[]"}
            for t, s in [("b", 1), ("a", 1), ("b", 0), ("a", 0)]]
    table = rollout_table("ck", rows)
    assert list(table.columns) == list(ROW_COLUMNS)
    order = list(zip(table.task_id, table["sample"], strict=True))
    assert order == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert set(table.checkpoint) == {"ck"}


def small_project(project: Path, n: int, checkpoints: dict) -> Path:
    return configure_small_project(project, n=n, checkpoints=checkpoints,
                                   rollouts={"in_flight": 1, "chunk_episodes": 8})


STAGE_IN_CHILD = "import sys; from stages import rollouts; rollouts.run(sys.argv[1])"


def kill_after_commits(child: subprocess.Popen, cache: Path, at_least: int) -> int:
    """Kill -9 the child's process group once its resume cache holds `at_least` episodes (or
    it ends first); how many it held when the kill was sent."""
    committed = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if cache.exists():
            try:
                with sqlite3.connect(cache) as db:
                    committed = db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
            except sqlite3.OperationalError:
                committed = 0
        if committed >= at_least:
            os.killpg(child.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    child.wait()
    return committed


def test_resume_after_kill_9_runs_only_missing_episodes_and_gives_identical_output(
    tmp_path: Path, monkeypatch
):
    from tests.conftest import copy_project

    checkpoints = {"ck": {"agent": "demo", "skill": 0.5}}
    killed = small_project(copy_project(tmp_path / "killed"), 8, checkpoints)
    clean = small_project(copy_project(tmp_path / "clean"), 8, checkpoints)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["MLFLOW_TRACKING_URI"])
    for project in (killed, clean):
        split.run(project)

    child = subprocess.Popen([sys.executable, "-c", STAGE_IN_CHILD, "ck"], cwd=killed, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    finished_before_kill = kill_after_commits(child, killed / ".heldout/episodes.sqlite", 10)
    assert child.returncode == -signal.SIGKILL, "the stage finished before it could be killed"
    assert not (killed / catalog.rollout_file("ck")).exists()

    resumed = rollouts.run("ck", killed)
    uninterrupted = rollouts.run("ck", clean)
    total = uninterrupted["episodes"]
    assert resumed["resumed"] >= finished_before_kill and resumed["resumed"] < total
    assert uninterrupted["resumed"] == 0

    a = pd.read_parquet(killed / catalog.rollout_file("ck"))
    b = pd.read_parquet(clean / catalog.rollout_file("ck"))
    assert len(a) == total
    pd.testing.assert_frame_equal(a.drop(columns=list(TIMING_COLUMNS)),
                                  b.drop(columns=list(TIMING_COLUMNS)))


def test_checkpoints_share_random_numbers_in_the_stage(tmp_path: Path, monkeypatch):
    from tests.conftest import copy_project

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    project = small_project(copy_project(tmp_path / "p"), 3, {
        "weak": {"agent": "demo", "skill": -0.5}, "strong": {"agent": "demo", "skill": 1.5}})
    split.run(project)
    for name in ("weak", "strong"):
        rollouts.run(name, project)
    weak, strong = (pd.read_parquet(project / catalog.rollout_file(n))
                    for n in ("weak", "strong"))
    assert list(weak.seed) == list(strong.seed)
    manifest = json.loads((project / "data/split/manifest.json").read_text())
    assert weak.task_id.nunique() == manifest["counts"]["val"]
