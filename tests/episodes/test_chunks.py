"""Episodes in chunks: every pending episode runs once, rows land on their own episode whatever
order chunks finish in, a chunk is committed whole, and workers keep few sandboxes open."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from flows.summary import StageOutcome, outcomes_after_failure, pipeline_summary, stage_metric
from heldout.agents.protocol import AgentContext
from heldout.episodes import chunks
from heldout.episodes.cache import EpisodeCache
from heldout.episodes.chunks import (
    EpisodeWork,
    Rollout,
    chunked,
    collect_rollouts,
    collect_together,
    in_process,
    run_chunk,
)
from heldout.episodes.episode import plan_episodes
from heldout.episodes.harness import Harness
from heldout.tasks.sources import load_tasks

TASKS = load_tasks("humaneval")[:5]
HARNESS = Harness(n=3, seed=5, timeout_s=5)
CONTEXT = AgentContext(template="{prompt}", temperature=0.8, top_p=0.95, max_tokens=512,
                       max_turns=1, timeout_s=30, project_root=".")


def work(skill: float = 0.5, label: str = "ck") -> EpisodeWork:
    return EpisodeWork(label, {"agent": "demo", "skill": skill}, CONTEXT, HARNESS)


def key(episode) -> str:
    return f"{episode.task.id}/{episode.sample}"


def test_chunks_cover_the_episodes_in_order_with_a_short_last_one():
    episodes = plan_episodes(TASKS, HARNESS)
    parts = chunked(episodes, 4)
    assert [len(p) for p in parts] == [4, 4, 4, 3]
    assert [e for part in parts for e in part] == episodes
    assert chunked([], 4) == []


def test_rows_land_on_their_episodes_whatever_order_chunks_finish_in(tmp_path: Path):
    episodes = plan_episodes(TASKS, HARNESS)
    ran: list[int] = []

    def backwards(pieces):
        for index in reversed(range(len(pieces))):
            ran.append(index)
            yield index, run_chunk(*pieces[index])

    cache = EpisodeCache(tmp_path / "episodes.sqlite")
    rows = collect_rollouts(work(), episodes, backwards, cache, key, 4)
    assert ran == [3, 2, 1, 0]
    assert sorted((r["task_id"], r["sample"]) for r in rows) == sorted(
        (e.task.id, e.sample) for e in episodes)
    threaded = collect_rollouts(work(), episodes, in_process,
                                EpisodeCache(tmp_path / "other.sqlite"), key, 4)
    by_episode = {(r["task_id"], r["sample"]): r["completion"] for r in threaded}
    assert all(by_episode[(r["task_id"], r["sample"])] == r["completion"] for r in rows)

    # Resumed: everything comes from the cache, nothing is handed to the executor.
    def refuse(pieces):
        assert pieces == [], "a finished episode was run again"
        return iter(())

    seen: list[bool] = []
    again = collect_rollouts(work(), episodes, refuse, cache, key, 4,
                             lambda row, cached: seen.append(cached))
    assert len(again) == len(episodes) and all(seen)


def test_a_chunk_that_fails_commits_nothing_and_earlier_chunks_stay(tmp_path: Path):
    episodes = plan_episodes(TASKS, HARNESS)

    def dies_on_the_second(pieces):
        yield 0, run_chunk(*pieces[0])
        raise RuntimeError("worker lost")

    cache = EpisodeCache(tmp_path / "episodes.sqlite")
    with pytest.raises(RuntimeError, match="worker lost"):
        collect_rollouts(work(), episodes, dies_on_the_second, cache, key, 4)
    assert len(cache.get_many([key(e) for e in episodes])) == 4


def test_rollouts_collected_together_go_out_in_one_call_taking_turns(tmp_path: Path):
    first, second = plan_episodes(TASKS, HARNESS), plan_episodes(TASKS[:2], HARNESS, rerun=1)
    calls: list[list[str]] = []

    def records(pieces):
        calls.append([work_.label for work_, _ in pieces])
        return in_process(pieces)

    cache = EpisodeCache(tmp_path / "episodes.sqlite")
    def seeded(episode) -> str:
        return f"{key(episode)}/{episode.seed}"

    together = [Rollout(work(label="a"), first, seeded),
                Rollout(work(label="b"), second, seeded)]
    rows = collect_together(together, records, cache, 4)
    # 15 and 6 episodes in chunks of 4: a's four and b's two, every one handed over at once,
    # each rollout's first chunk before any rollout's second.
    assert calls == [["a", "b", "a", "b", "a", "a"]]
    assert [len(r) for r in rows] == [15, 6]
    for rollout, its_rows in zip(together, rows, strict=True):
        assert sorted((r["task_id"], r["sample"], r["seed"]) for r in its_rows) == sorted(
            (e.task.id, e.sample, e.seed) for e in rollout.episodes)
    assert collect_together(together, refuse_all, cache, 4) == [
        sorted(r, key=lambda row: (row["task_id"], row["sample"])) for r in rows]


def refuse_all(pieces):
    assert pieces == [], "a finished episode was run again"
    return iter(())


def test_reruns_of_one_agent_share_a_runner_and_another_agent_does_not(monkeypatch):
    opened = iter(f"sandbox{i}" for i in range(10))
    monkeypatch.setattr(type(HARNESS.sandbox), "open",
                        lambda self: FakeSandbox([], next(opened)))
    pool = chunks._RunnerPool(keep=2)
    first = pool.acquire(work(label="test:base"))
    assert pool.acquire(work(label="test:base:rerun3")) is first
    assert pool.acquire(work(0.9, label="test:base")) is not first


class FakeSandbox:
    def __init__(self, log: list[str], name: str):
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)


def test_a_worker_keeps_two_idle_runners_and_never_closes_one_in_use(monkeypatch):
    closed: list[str] = []
    opened = iter(f"sandbox{i}" for i in range(10))
    monkeypatch.setattr(type(HARNESS.sandbox), "open",
                        lambda self: FakeSandbox(closed, next(opened)))
    pool = chunks._RunnerPool(keep=2)
    a, b, c = work(0.1), work(0.2), work(0.3)
    held = pool.acquire(a)
    for w in (b, c):
        pool.acquire(w)
        pool.release(w)
    assert closed == []  # a is in use; b and c idle, within keep
    pool.acquire(work(0.4))
    assert closed == ["sandbox1"]  # the least recently used idle one: b's
    assert pool.acquire(a) is held  # reused, not reopened
    pool.release(a)
    pool.release(a)
    pool.close_idle()
    assert sorted(closed) == ["sandbox0", "sandbox1", "sandbox2"]  # d still acquired


def test_the_pipeline_summary_accounts_for_every_planned_stage():
    planned = ["split", "rollouts@base", "score", "report"]
    done = [StageOutcome("split", "up_to_date", 0.4),
            StageOutcome("rollouts@base", "failed", 2.0, "exit 2")]
    outcomes = done + outcomes_after_failure(planned, done)
    summary = pipeline_summary(outcomes, b"lock", 3.0)
    assert summary["failed"] == ["rollouts@base"]
    assert summary["not_reached"] == ["score", "report"]
    assert summary["counts"] == {"ran": 0, "up_to_date": 1, "failed": 1, "not_reached": 2}
    assert summary["stage_wall_s"] == pytest.approx(2.4)
    assert summary["dvc_lock_sha256"] == hashlib.sha256(b"lock").hexdigest()
    assert pipeline_summary([], None, 0.0)["dvc_lock_sha256"] is None
    assert stage_metric("rollouts@step_10") == "stage_s.rollouts.step_10"
