"""Episodes in flight on the process's event loop: hundreds at once, none with a thread.

Each episode's steps (heldout.episodes.waits) run as a task on the process's one loop
(heldout.aio), at most `in_flight` episodes of the process at once. An episode waits on three
kinds of call: a model call that has a coroutine (an endpoint's HTTP client) is awaited on the
loop; any other agent call (the demo, python and command agents) runs on `agent_threads`
threads; a sandbox call (a tool that runs a program, the judge) on as many threads as the
sandbox has workers, so programs are judged while other episodes' model calls are out.

The time an episode waits for a thread or a slot is heldout's queue, not the episode's: its wall
budget runs on a clock that leaves it out (heldout.aio.queue_clock), so how many episodes shared
the machine changes when an episode ends, never how.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from heldout.agents.protocol import Agent
from heldout.aio import Slots, queue_clock
from heldout.episodes.episode import Episode, episode_steps
from heldout.episodes.harness import Harness
from heldout.episodes.waits import Wait, wait_with
from heldout.sandbox.protocol import Sandbox


@dataclass
class Lanes:
    """Where one agent's and one sandbox's blocking calls run, and how many at once."""

    agent_slots: Slots
    agent_pool: ThreadPoolExecutor
    sandbox_slots: Slots
    sandbox_pool: ThreadPoolExecutor

    @classmethod
    def open(cls, agent_threads: int, sandbox_workers: int) -> Lanes:
        return cls(Slots(agent_threads),
                   ThreadPoolExecutor(agent_threads, thread_name_prefix="heldout-agent"),
                   Slots(sandbox_workers),
                   ThreadPoolExecutor(sandbox_workers, thread_name_prefix="heldout-sandbox"))

    def close(self) -> None:
        self.agent_pool.shutdown(wait=False, cancel_futures=True)
        self.sandbox_pool.shutdown(wait=False, cancel_futures=True)

    async def answer(self, wait: Wait) -> Any:
        if wait.coroutine is not None:
            return await wait.coroutine()
        slots, pool = ((self.agent_slots, self.agent_pool) if wait.kind == "agent"
                       else (self.sandbox_slots, self.sandbox_pool))
        async with slots.taken():
            # The thread runs the call in this episode's context: what it waits for in a queue
            # of its own (an endpoint's slot) is this episode's queue time too.
            context = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(pool, context.run, wait.call)


@dataclass
class EpisodeCount:
    """How many episodes this process has in flight, and the most it had at once."""

    slots: Slots = field(default_factory=lambda: Slots(1))
    done: int = 0

    @property
    def in_flight(self) -> int:
        return self.slots.used

    def drain_peak(self) -> int:
        """The most episodes in flight at once since the last drain."""
        peak, self.slots.peak = self.slots.peak, self.slots.used
        return peak


EPISODES = EpisodeCount()


async def run_episodes(agent: Agent, sandbox: Sandbox, lanes: Lanes, harness: Harness,
                       episodes: list[Episode], in_flight: int) -> list[dict]:
    """Every episode's row, in the order of `episodes`, at most `in_flight` episodes of this
    process at once (the latest caller's bound holds for all)."""
    EPISODES.slots.set_limit(in_flight)
    return list(await asyncio.gather(*(
        _one(agent, sandbox, lanes, harness, episode) for episode in episodes)))


async def _one(agent: Agent, sandbox: Sandbox, lanes: Lanes, harness: Harness,
               episode: Episode) -> dict:
    async with EPISODES.slots.taken():
        clock: Callable[[], float] = queue_clock()  # gather gave this episode its own context
        row = await wait_with(episode_steps(agent, sandbox, harness, episode, clock),
                              lanes.answer)
        EPISODES.done += 1
        return row
