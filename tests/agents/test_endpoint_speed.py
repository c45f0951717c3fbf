"""Real endpoints at real speed: hundreds of episodes in flight on one process, the same rows at
any concurrency and any completion order, an endpoint's limits measured and respected, a
stalled connection that stalls nobody else, and a kill -9 that resumes.

The endpoint is tests/latency_server.py on loopback: real HTTP, real latencies, real 429s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from heldout.agents.endpoint_limit import EndpointLimit, drain_endpoint_stats
from heldout.aio import run_blocking
from heldout.episodes.engine import EPISODES
from heldout.episodes.episode import plan_episodes
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig, roll_out
from heldout.episodes.rows import TIMING_COLUMNS, rollout_table
from heldout.errors import ParamsError
from heldout.tasks.sources import load_tasks
from stages import catalog, rollouts, split
from stages.common import section
from tests.conftest import configure_small_project, copy_project
from tests.episodes.test_rollouts import STAGE_IN_CHILD, kill_after_commits
from tests.latency_server import LatencyServer

TASKS = load_tasks("humaneval")[:30]


def answer_for(tasks: list) -> Any:
    """The task's reference for two seeds in three, a wrong body for the third: rows that
    differ by episode, the same for the same episode whoever asks."""
    by_prompt = {task.prompt: task for task in tasks}

    def answer(body: dict[str, Any]) -> str:
        first = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"),
                     body.get("prompt", ""))
        task = next((t for prompt, t in by_prompt.items() if prompt in first), None)
        if task is None or int(body.get("seed") or 0) % 3 == 0:
            return "    return None\n"
        return task.reference

    return answer


class Quiet:
    def start(self, total: int) -> None:
        self.total = total

    def advance(self, row: dict, cached: bool) -> None:
        pass

    def finish(self) -> None:
        pass


@pytest.fixture
def server():
    started = LatencyServer(latency_s=0.02, spread=1.0, answer=answer_for(TASKS), seed=3).start()
    yield started
    started.stop()


def checkpoint(server: LatencyServer, **settings: Any) -> dict[str, Any]:
    return {"agent": "openai", "base_url": server.url, "model": "loopback", **settings}


def rows_of(tmp_path: Path, name: str, settings: dict, tasks: list, harness: Harness,
            **config: Any) -> pd.DataFrame:
    rows = roll_out(tmp_path / name, name, settings, tasks, harness,
                    RolloutsConfig(**config), Quiet())
    return rollout_table("ck", rows).drop(columns=list(TIMING_COLUMNS))


def test_the_same_rows_at_any_concurrency_and_any_completion_order(tmp_path, server):
    server.turns = 3
    harness = Harness(n=4, seed=5, timeout_s=5, max_turns=3)
    settings = checkpoint(server, protocol="tools")
    tables = {in_flight: rows_of(tmp_path, f"at{in_flight}", settings, TASKS[:12], harness,
                                 in_flight=in_flight, chunk_episodes=7)
              for in_flight in (1, 16, 256)}
    # Log-normal latencies (sigma 1) finish episodes in another order on every run.
    assert len(tables[1]) == 48 and tables[1].passed.sum() > 0 and not tables[1].passed.all()
    assert set(tables[1].turns) == {3}
    for in_flight in (16, 256):
        pd.testing.assert_frame_equal(tables[1], tables[in_flight])


def test_how_fast_a_checkpoint_is_asked_is_no_part_of_its_episodes_identity(tmp_path, server):
    harness = Harness(n=2, seed=5, timeout_s=5)
    config = RolloutsConfig(in_flight=64)
    first = roll_out(tmp_path, "ck", checkpoint(server, max_in_flight=4), TASKS[:5], harness,
                     config, Quiet())
    served = server.served
    again = roll_out(tmp_path, "ck", checkpoint(server, max_in_flight=200), TASKS[:5], harness,
                     RolloutsConfig(in_flight=3, agent_threads=1), Quiet())
    assert server.served == served  # every episode came from the cache
    assert sorted(r["seed"] for r in again) == sorted(r["seed"] for r in first)
    with pytest.raises(ParamsError, match="rollouts.concurrency: Value error, is gone"):
        section({"rollouts": {"concurrency": 2}}, "rollouts", RolloutsConfig)


def test_one_process_keeps_hundreds_of_episodes_in_flight(tmp_path, server):
    """Refused answers have nothing to judge, so the model calls alone bound the episodes:
    this measures the engine and the client, not the sandbox (benchmarks/bench_endpoint.py
    measures the whole)."""
    server.latency_s, server.spread, server.refuse = 0.5, 0.0, True
    harness = Harness(n=40, seed=5, timeout_s=5)
    drain_endpoint_stats()
    EPISODES.drain_peak()
    started = time.monotonic()
    table = rows_of(tmp_path, "wide", checkpoint(server), TASKS, harness, in_flight=256)
    took = time.monotonic() - started
    assert len(table) == 1200 and set(table.status) == {"refused"}
    assert EPISODES.drain_peak() >= 200
    # The adaptive limit starts at 32 and grows 1.5 times a round trip to the ceiling of 256.
    assert server.max_in_flight >= 200
    # 1,200 half-second calls: a dozen rounds, not 600 s (nor 300 s at the old two in flight).
    assert took < 40
    stats = drain_endpoint_stats()[server.url]
    assert stats.requests == 1200 and stats.retries == 0


def test_a_429_storm_is_ridden_out_under_the_servers_capacity(tmp_path, server):
    server.latency_s, server.spread, server.capacity = 0.03, 0.0, 12
    harness = Harness(n=10, seed=5, timeout_s=5)
    drain_endpoint_stats()
    table = rows_of(tmp_path, "storm", checkpoint(server, max_retries=20, backoff_base_s=0.05,
                                                  backoff_max_s=0.2), TASKS[:20], harness)
    assert set(table.status) == {"ok"} and len(table) == 200
    stats = drain_endpoint_stats()[server.url]
    assert server.refused > 0 and stats.congested == server.refused
    # The limit settled near what the server takes, not at the ceiling of 256 or the start of
    # 32: after the first storm (32 sent to a server that takes 12), few are refused: the
    # sawtooth from 0.8 of 13 back to 13 refuses about one in 30.
    assert 6 <= stats.limits[-1] <= 18
    settled = server.statuses[100:]
    assert settled.count(429) < 0.08 * len(settled)


def test_a_servers_retry_after_holds_every_request_of_the_run_until_it_passes(tmp_path, server):
    # Half a second a request: the four the server takes stay in it while the rest of the
    # first burst arrives, however slowly a loaded machine sends them.
    server.latency_s, server.spread, server.capacity, server.retry_after_s = 0.5, 0.0, 4, 1
    harness = Harness(n=4, seed=5, timeout_s=5)
    table = rows_of(tmp_path, "after", checkpoint(server, max_retries=10), TASKS[:10], harness)
    assert set(table.status) == {"ok"}
    arrivals = list(zip(server.arrivals, server.statuses, strict=True))
    refused = [at for at, status in arrivals if status == 429]
    assert refused
    first = refused[0]
    # Whatever else was in flight arrives (the rest of the burst, within 0.3 s and refused as
    # well) and finishes; nothing new is sent for the second it asked for.
    burst = [status for at, status in arrivals if first < at < first + 0.3]
    assert set(burst) <= {429}, burst
    assert [at - first for at, _ in arrivals if first + 0.3 <= at < first + 0.9] == []
    assert server.arrivals[-1] > first + 1.0


def test_retry_after_closes_the_endpoint_to_every_request_until_it_passes():
    async def scenario() -> list[float]:
        limit = EndpointLimit(ceiling=4, start=4)
        async with limit.slot() as first:
            pass
        limit.congested(first, retry_after_s=0.5)
        began = time.monotonic()

        async def one() -> float:
            async with limit.slot():
                return time.monotonic() - began

        return list(await asyncio.gather(*(one() for _ in range(3))))

    waited = run_blocking(scenario())
    assert min(waited) >= 0.45


def test_one_burst_of_refusals_is_one_cut_and_success_grows_the_limit():
    async def scenario() -> EndpointLimit:
        limit = EndpointLimit(ceiling=64, start=20)
        limit.succeeded(0.1)
        assert limit.limit == 20.5  # slow start: half a request a success
        tickets = []
        for _ in range(5):
            async with limit.slot() as ticket:
                tickets.append(ticket)
        for ticket in tickets:  # five refusals of requests sent before the first cut
            limit.congested(ticket, None)
        assert limit.limit == pytest.approx(20.5 * 0.8)
        for _ in range(16):
            limit.succeeded(0.1)  # after a cut: one more a round trip (1/limit a success)
        assert limit.limit == pytest.approx(16.4 + 16 / 16.9, abs=0.02)
        async with limit.slot() as late:
            pass
        limit.congested(late, None)  # sent after the cut: cuts again
        assert limit.limit == pytest.approx((16.4 + 16 / 16.9) * 0.8, abs=0.02)
        return limit

    assert run_blocking(scenario()).slots.limit == 13


def test_waiting_for_the_endpoint_is_not_spent_from_an_episodes_wall_budget(tmp_path, server):
    """Twenty one-call episodes through two slots of 0.3 s each wait up to 2.7 s for a slot;
    their wall budget of 1 s counts only their own call."""
    server.latency_s, server.spread = 0.3, 0.0
    harness = Harness(n=1, seed=5, timeout_s=5, agent_timeout_s=1.0)
    table = rows_of(tmp_path, "queued", checkpoint(server, max_in_flight=2), TASKS[:20],
                    harness)
    assert list(table.status.unique()) == ["ok"], table.error.unique()
    assert server.max_in_flight == 2


def test_a_stalled_connection_ends_its_episode_at_its_deadline_and_stalls_nobody(
    tmp_path, server
):
    harness = Harness(n=4, seed=5, timeout_s=5, agent_timeout_s=2.0, retries=0)
    stalled_seed = next(e.seed for e in plan_episodes(TASKS[:10], harness)
                        if e.task.id == TASKS[3].id)
    server.stalls = lambda body: body.get("seed") == stalled_seed
    server.latency_s = 0.05
    started = time.monotonic()
    table = rows_of(tmp_path, "stall", checkpoint(server), TASKS[:10], harness)
    took = time.monotonic() - started
    stalled = table[table.seed == stalled_seed]
    assert list(stalled.end_reason) == ["timeout"]
    assert set(table[table.seed != stalled_seed].status) <= {"ok"}
    assert took < 2.0 + 3.0  # the others ended long before; the stall only at its deadline


def test_a_kill_9_with_hundreds_in_flight_resumes_only_what_had_not_finished(
    tmp_path, monkeypatch
):
    server = LatencyServer(latency_s=0.3, spread=0.5, answer=answer_for(TASKS), seed=1,
                           turns=2).start()
    try:
        ck = checkpoint(server, protocol="tools")
        projects = [configure_small_project(copy_project(tmp_path / name), tasks=30, n=10,
                                            checkpoints={"ck": ck},
                                            harness={"max_turns": 2},
                                            rollouts={"in_flight": 256, "chunk_episodes": 4})
                    for name in ("killed", "clean")]
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
        monkeypatch.setenv("MLFLOW_TRACKING_URI", env["MLFLOW_TRACKING_URI"])
        for project in projects:
            split.run(project)
        killed, clean = projects
        child = subprocess.Popen([sys.executable, "-c", STAGE_IN_CHILD, "ck"], cwd=killed,
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)
        committed = kill_after_commits(child, killed / ".heldout" / "episodes.sqlite", 8)
        assert child.returncode == -signal.SIGKILL, "the stage finished before it was killed"
        while server.in_flight:  # the dead process's last requests, still being answered
            time.sleep(0.05)
        served_before = server.served
        resumed = rollouts.run("ck", killed)
        rerun_requests = server.served - served_before
        uninterrupted = rollouts.run("ck", clean)
    finally:
        server.stop()
    total = uninterrupted["episodes"]
    assert committed <= resumed["resumed"] < total
    assert rerun_requests == 2 * (total - resumed["resumed"])  # two turns an episode, no more
    # What the run logs to MLflow about its speed is its own requests', not the killed run's.
    assert resumed["requests"] == rerun_requests and resumed["requests_retried"] == 0
    assert uninterrupted["requests"] == 2 * total
    assert uninterrupted["episodes_in_flight_max"] == total  # every episode at once
    assert 0.3 * 0.5 < uninterrupted["latency_p50_s"] < uninterrupted["latency_p95_s"] < 3
    a, b = (pd.read_parquet(p / catalog.rollout_file("ck")) for p in (killed, clean))
    pd.testing.assert_frame_equal(a.drop(columns=list(TIMING_COLUMNS)),
                                  b.drop(columns=list(TIMING_COLUMNS)))
