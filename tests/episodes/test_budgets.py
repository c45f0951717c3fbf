"""Budgets: limits that count what an episode spends, and the one rule by which a task's runtime
overrides the harness's limits for its programs."""

from __future__ import annotations

import pytest

from heldout.agents.protocol import Completion
from heldout.episodes.budgets import (
    BudgetExceeded,
    EpisodeBudgets,
    ExecLimits,
    Limit,
    WallTime,
    exec_limits,
)
from heldout.episodes.episode import plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.judge import score_many
from heldout.sandbox.protocol import ExecResult
from heldout.tasks.record import TaskRuntime
from heldout.tasks.sources import load_tasks

TASK = load_tasks("humaneval")[0]
GIVEN = ExecLimits(timeout_s=10.0, memory_mb=512)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RecordingSandbox:
    """Fails every program, and remembers the limits of each batch it was given."""

    def __init__(self):
        self.batches: list[tuple[int, float, int]] = []

    def run_many(self, programs, *, timeout_s, memory_mb):
        self.batches.append((len(programs), timeout_s, memory_mb))
        return [ExecResult(False, "failed", 1, "", "", 0.0, True) for _ in programs]


class Answering:
    def complete(self, task, sample, seed):
        return Completion(text="    return True\n")


def test_a_limit_allows_spending_up_to_it_and_raises_past_it():
    turns = Limit("turns", 3)
    turns.spend()
    turns.spend(2)
    assert (turns.used, turns.remaining) == (3, 0)
    with pytest.raises(BudgetExceeded) as raised:
        turns.spend()
    assert (raised.value.kind, raised.value.limit, raised.value.used) == ("turns", 3, 4)
    assert str(raised.value) == "turns budget exceeded: 4 spent of 3"
    assert turns.remaining == 0


def test_wall_time_is_spent_by_the_clock():
    clock = Clock()
    wall = WallTime(30.0, clock)
    clock.now += 12.5
    assert (wall.kind, wall.used, wall.remaining) == ("wall_s", 12.5, 17.5)
    wall.check()
    clock.now += 17.5
    wall.check()  # exactly the limit is still within it
    clock.now += 0.1
    with pytest.raises(BudgetExceeded, match="wall_s budget exceeded"):
        wall.check()


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        (None, GIVEN),
        (TaskRuntime(image="python:3.12"), GIVEN),
        (TaskRuntime(timeout_s=2.5), ExecLimits(2.5, 512)),
        (TaskRuntime(memory_mb=2048), ExecLimits(10.0, 2048)),
        (TaskRuntime(timeout_s=2.5, memory_mb=2048), ExecLimits(2.5, 2048)),
    ],
)
def test_a_tasks_runtime_overrides_the_limits_it_sets(runtime, expected):
    assert exec_limits(TASK.model_copy(update={"runtime": runtime}), GIVEN) == expected


def test_episode_budgets_come_from_the_harness_and_the_task():
    harness = Harness(max_turns=4, max_tokens=300, agent_timeout_s=60, timeout_s=3)
    task = TASK.model_copy(update={"runtime": TaskRuntime(memory_mb=1024)})
    clock = Clock()
    budgets = EpisodeBudgets.start(harness, task, clock)
    assert (budgets.turns.kind, budgets.turns.limit, budgets.turns.used) == ("turns", 4, 0)
    assert (budgets.tokens.kind, budgets.tokens.limit) == ("tokens", 300)
    assert budgets.execution == ExecLimits(3.0, 1024)
    clock.now += 59
    assert budgets.wall.remaining == 1
    budgets.tokens.spend(300)
    with pytest.raises(BudgetExceeded, match="tokens"):
        budgets.tokens.spend(1)


def test_the_judge_runs_each_tasks_programs_under_that_tasks_limits():
    slow = TASK.model_copy(update={"id": "slow", "runtime": TaskRuntime(timeout_s=30.0)})
    sandbox = RecordingSandbox()
    score_many([(TASK, ""), (slow, ""), (TASK, "")], sandbox, timeout_s=10.0, memory_mb=512)
    assert sandbox.batches == [(2, 10.0, 512), (1, 30.0, 512)]


def test_an_episode_scores_under_the_task_overrides_of_the_harness_limits():
    harness = Harness(n=1, timeout_s=4, retries=0)
    task = TASK.model_copy(update={"runtime": TaskRuntime(memory_mb=1024),
                                   "public_tests": "assert True\n"})
    sandbox = RecordingSandbox()
    row = run_episode(Answering(), sandbox, harness, plan_episodes([task], harness)[0])
    assert (row["passed"], row["public_passed"]) == (False, False)
    assert sandbox.batches == [(2, 4.0, 1024)]  # hidden and public tests, in one batch


class PassingSandbox:
    """Passes every program: what is left to decide a pass is the episode's own ending."""

    def run_many(self, programs, *, timeout_s, memory_mb):
        return [ExecResult(True, "ok", 0, "", "", 0.0, True) for _ in programs]


class CutOff:
    """A reply the token budget cut off, whose program happens to pass as it stands."""

    def complete(self, task, sample, seed):
        return Completion(text="    return True\n", finish_reason="length")


@pytest.mark.parametrize(("on_truncation", "passed"), [("fail", False), ("score", True)])
def test_a_reply_cut_at_max_tokens_passes_only_when_the_harness_says_score(on_truncation,
                                                                           passed):
    harness = Harness(n=1, retries=0, on_truncation=on_truncation)
    row = run_episode(CutOff(), PassingSandbox(), harness, plan_episodes([TASK], harness)[0])
    assert row["status"] == "truncated" and row["passed"] is passed
    assert row["error"] == ("" if passed else "cut at max_tokens (harness.on_truncation: fail)")
    assert Harness(on_truncation="score").fingerprint() != Harness().fingerprint()
