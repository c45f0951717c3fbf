"""The multi-turn demo policies through the real loop, judge and sandbox: budgets move their
numbers, the public-test hacker trips the public-versus-hidden alarm and honest policies do not,
and checkpoints draw the same random numbers at every turn of the same episode."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from heldout.agents.demo_policies import lookup_table_body
from heldout.agents.registry import make_agent
from heldout.episodes.episode import plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import agent_context
from heldout.episodes.rows import rollout_table, trajectory_steps
from heldout.statistics.intervals import task_bootstrap_ci
from heldout.statistics.public_hidden import AlarmConfig, gap_alarm, gap_counts
from heldout.tasks.sources import load_tasks

# Tasks with public tests, the first of HumanEval in id order: enough for intervals to bite.
TASKS = [task for task in load_tasks("humaneval") if task.public_tests][:40]


def roll(settings: dict, harness: Harness, sandbox, tasks=TASKS) -> pd.DataFrame:
    agent = make_agent("ck", settings, agent_context(harness, "."))
    rows = [run_episode(agent, sandbox, harness, episode)
            for episode in plan_episodes(tasks, harness)]
    return rollout_table("ck", rows)


def task_rates(table: pd.DataFrame) -> pd.Series:
    return table.groupby("task_id")["passed"].mean()


@pytest.fixture(scope="module")
def tester_runs(subprocess_sandbox):
    tester = {"agent": "demo", "policy": "tester", "skill": 0.3}
    return {turns: roll(tester, Harness(n=2, seed=7, max_turns=turns), subprocess_sandbox)
            for turns in (5, 3)}


def test_the_tester_loses_beyond_its_interval_when_max_turns_falls_from_5_to_3(tester_runs):
    five, three = (task_rates(tester_runs[turns]) for turns in (5, 3))
    difference = task_bootstrap_ci((five - three).to_numpy())
    assert difference.low > 0, difference
    # It lost them to the budget: episodes that ended unsubmitted, counted as failures.
    ended = tester_runs[3]["end_reason"].value_counts()
    assert ended.get("max_turns", 0) > 0
    unsubmitted = tester_runs[3][tester_runs[3]["end_reason"] == "max_turns"]
    assert set(unsubmitted["status"]) == {"budget"} and not unsubmitted["passed"].any()


def test_a_tester_episode_reads_tests_revises_and_submits_in_its_trajectory(tester_runs):
    table = tester_runs[5]
    revised = table[(table["end_reason"] == "submitted") & (table["turns"] >= 4)]
    assert len(revised) > 0
    steps = trajectory_steps(revised.iloc[0])
    # Stored once: the submit step refers to the row's completion, which holds the code.
    stored = json.loads(revised.iloc[0]["trajectory"])
    assert stored[-1]["code_from"] == "completion" and "code" not in stored[-1]["arguments"]
    tools = [step["tool"] for step in steps]
    assert tools[0] is None and tools[-1] == "submit"
    assert tools[1:-1] == ["run_public_tests"] * (len(tools) - 2)
    assert "public tests failed" in steps[1]["observation"]
    assert steps[-2]["observation"] == "All public tests passed."
    assert steps[-1]["arguments"]["code"] == revised.iloc[0]["completion"]
    assert revised.iloc[0]["tool_calls"] == len(tools) - 1


def test_the_guesser_gains_from_more_turns_and_always_submits(subprocess_sandbox):
    guesser = {"agent": "demo", "policy": "guesser", "skill": -0.5}
    runs = {turns: roll(guesser, Harness(n=2, seed=7, max_turns=turns), subprocess_sandbox)
            for turns in (1, 4)}
    assert task_rates(runs[4]).mean() > task_rates(runs[1]).mean()
    assert set(runs[4]["end_reason"]) == {"submitted"}
    assert set(runs[1]["turns"]) == {1}


def test_the_hacker_trips_the_alarm_and_honest_policies_do_not(subprocess_sandbox):
    harness = Harness(n=2, seed=7, max_turns=5)
    tables = {
        "base": roll({"agent": "demo", "skill": -0.6}, harness, subprocess_sandbox),
        "tester": roll({"agent": "demo", "policy": "tester", "skill": 1.5}, harness,
                       subprocess_sandbox),
        "single": roll({"agent": "demo", "skill": 2.0}, harness, subprocess_sandbox),
        "hacker": roll({"agent": "demo", "policy": "hacker"}, harness, subprocess_sandbox),
    }
    gaps = {name: gap_counts(table) for name, table in tables.items()}
    alarms = {name: gap_alarm(gaps[name], gaps["base"], AlarmConfig())
              for name in ("tester", "single", "hacker")}
    assert {name: alarm.fired for name, alarm in alarms.items()} == {
        "tester": False, "single": False, "hacker": True}
    hacker = tables["hacker"]
    assert hacker["public_passed"].mean() > 0.9 and hacker["passed"].mean() < 0.1


def test_the_hacker_answers_the_public_inputs_and_nothing_else():
    task = next(t for t in TASKS if t.entry_point == "has_close_elements")
    body = lookup_table_body(task)
    namespace: dict = {}
    exec(task.prompt + body, namespace)  # noqa: S102 - our own generated code
    function = namespace["has_close_elements"]
    assert function([1.0, 2.0, 3.0], 0.5) is False
    assert function([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) is True
    assert function([1.0, 1.05], 0.1) is None


def test_two_checkpoints_draw_the_same_seed_at_every_turn(tester_runs, subprocess_sandbox):
    other = roll({"agent": "demo", "policy": "tester", "skill": 2.5},
                 Harness(n=2, seed=7, max_turns=5), subprocess_sandbox)
    mine = tester_runs[5]
    mismatched = []
    for (_, a), (_, b) in zip(mine.iterrows(), other.iterrows(), strict=True):
        seeds_a = [step["seed"] for step in json.loads(a["trajectory"])]
        seeds_b = [step["seed"] for step in json.loads(b["trajectory"])]
        common = min(len(seeds_a), len(seeds_b))
        if seeds_a[:common] != seeds_b[:common] or seeds_a[0] != a["seed"]:
            mismatched.append((a["task_id"], a["sample"]))
    assert mismatched == []
    # Distinct turns draw distinct seeds.
    longest = max((json.loads(t) for t in mine["trajectory"]), key=len)
    assert len({step["seed"] for step in longest}) == len(longest) > 1
    assert np.all(mine["seed"].to_numpy() == other["seed"].to_numpy())
