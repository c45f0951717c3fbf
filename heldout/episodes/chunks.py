"""Episodes in chunks that can run anywhere: the stage's own process or a worker process of a
Dask cluster on another machine. A chunk is the unit of resume and of distribution, not of
serialisation: wherever it runs, its episodes are in flight together on that process's event
loop (heldout.episodes.engine), with every other chunk's the process runs.

A chunk travels with everything a worker needs to run it (`EpisodeWork`: the checkpoint's
settings and the harness), and comes back as rows; the stage's own process commits them to the
resume cache. A worker keeps the agent and sandbox it opened for later chunks of the same work,
because opening a sandbox costs as much as running a dozen episodes.

Every row is validated (heldout.episodes.rows.validate_row) before it is committed, and every
cached row as it is read back: a row that comes back invalid from any worker is committed as an
`error` row naming the field, and a stored row that is not authenticated, unreadable or invalid
(written by an older heldout, or edited: heldout.episodes.cache) is reported in one warning line
and its episode run again, never a crash.
"""

from __future__ import annotations

import asyncio
import atexit
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from heldout.agents.protocol import Agent, AgentContext
from heldout.agents.registry import close_agent, make_agent
from heldout.aio import event_loop, run_blocking
from heldout.canonical import content_digest
from heldout.episodes.cache import EpisodeCache
from heldout.episodes.engine import Lanes, run_episodes
from heldout.episodes.episode import Episode
from heldout.episodes.harness import Harness
from heldout.episodes.rows import invalid_row, row_problems
from heldout.sandbox.protocol import Sandbox


@dataclass(frozen=True)
class EpisodeWork:
    """One checkpoint's episodes under one harness: what a chunk needs besides its episodes.
    `in_flight` and `agent_threads` say how the process that runs it runs episodes
    (params.rollouts); they change no row."""

    label: str
    settings: dict[str, Any]
    context: AgentContext
    harness: Harness
    in_flight: int = 256
    agent_threads: int = 4

    def runner_key(self) -> str:
        """What a runner (agent, sandbox, lanes) serves: not the label, so the reruns of one
        agent under one harness share a sandbox."""
        return content_digest({"settings": self.settings, "context": vars(self.context),
                               "harness": self.harness.fingerprint()})


Chunk = list[Episode]
Piece = tuple[EpisodeWork, Chunk]
# Runs chunks somewhere, each with the work it belongs to; yields (piece index, rows in the
# chunk's order) as each chunk finishes, in any order.
ChunkExecutor = Callable[[list[Piece]], Iterable[tuple[int, list[dict]]]]


@dataclass(frozen=True)
class Rollout:
    """One work's episodes, and the key each is kept under in the resume cache."""

    work: EpisodeWork
    episodes: list[Episode]
    key_of: Callable[[Episode], str]


def chunked(episodes: list[Episode], size: int) -> list[Chunk]:
    return [episodes[start:start + size] for start in range(0, len(episodes), size)]


def run_chunk(work: EpisodeWork, episodes: Chunk) -> list[dict]:
    """Every episode of the chunk as a row, in the chunk's order, its episodes in flight
    together on this process's event loop (call it from any thread but the loop's)."""
    return run_blocking(run_chunk_async(work, episodes))


async def run_chunk_async(work: EpisodeWork, episodes: Chunk) -> list[dict]:
    # Opening a sandbox or an agent may block (a container starting): not on the loop.
    runner = await asyncio.get_running_loop().run_in_executor(None, _RUNNERS.acquire, work)
    try:
        return await run_episodes(runner.agent, runner.sandbox, runner.lanes, work.harness,
                                  episodes, work.in_flight)
    finally:
        _RUNNERS.release(work)


def warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def collect_rollouts(
    work: EpisodeWork,
    episodes: list[Episode],
    execute: ChunkExecutor,
    cache: EpisodeCache,
    key_of: Callable[[Episode], str],
    chunk_size: int,
    on_done: Callable[[dict, bool], None] = lambda row, cached: None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> list[dict]:
    """Every episode's row of one work (collect_together)."""
    return collect_together([Rollout(work, episodes, key_of)], execute, cache, chunk_size,
                            on_done, warn)[0]


def collect_together(
    rollouts: list[Rollout],
    execute: ChunkExecutor,
    cache: EpisodeCache,
    chunk_size: int,
    on_done: Callable[[dict, bool], None] = lambda row, cached: None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> list[list[dict]]:
    """Each rollout's rows: from the cache when it finished before, else run in chunks by
    `execute`, each chunk validated and committed to the cache the moment it comes back.
    Every rollout's chunks go to `execute` in one call, taken in turn (each one's first chunk,
    then each one's second), so all are under way at once: one slow episode (a sandbox's time
    limit) holds up the others' none, where rollouts one after another would each wait on
    their own slowest. Cached rows that cannot be used are run again, and `warn` is told once
    how many and why."""
    keys = [{id(e): rollout.key_of(e) for e in rollout.episodes} for rollout in rollouts]
    rows: list[list[dict]] = [[] for _ in rollouts]
    rejected: Counter[str] = Counter()
    chunks: list[list[Chunk]] = []
    for number, rollout in enumerate(rollouts):
        fingerprint = rollout.work.harness.fingerprint()
        found = cache.read(list(keys[number].values()))
        rejected.update(found.unreadable.values())
        pending = []
        for episode in rollout.episodes:
            row = found.rows.get(keys[number][id(episode)])
            problems = [] if row is None else _episode_problems(episode, fingerprint, row)
            if row is not None and not problems:
                rows[number].append(row)
                on_done(row, True)
                continue
            if problems:
                rejected[problems[0]] += 1
            pending.append(episode)
        chunks.append(chunked(pending, chunk_size))
    if rejected:
        warn(_rejected_line(cache, rejected))
    pieces: list[Piece] = []
    owners: list[int] = []  # the rollout each piece is of
    for turn in zip_longest(*chunks):
        for number, chunk in enumerate(turn):
            if chunk is not None:
                pieces.append((rollouts[number].work, chunk))
                owners.append(number)
    for index, chunk_rows in execute(pieces):
        number, (work, chunk) = owners[index], pieces[index]
        fingerprint = work.harness.fingerprint()
        checked = [_checked(e, fingerprint, row) for e, row in zip(chunk, chunk_rows, strict=True)]
        cache.put_many([(keys[number][id(e)], row) for e, row in zip(chunk, checked, strict=True)])
        for row in checked:
            rows[number].append(row)
            on_done(row, False)
    return rows


def _identity(episode: Episode, fingerprint: str) -> dict[str, Any]:
    return {"task_id": episode.task.id, "sample": episode.sample, "seed": episode.seed,
            "harness": fingerprint}


def _episode_problems(episode: Episode, fingerprint: str, row: Any) -> list[str]:
    """What is wrong with a row as this episode's: as a row, or as another episode's."""
    problems = row_problems(row)
    if problems:
        return problems
    return [f"field '{column}': {row[column]!r} is not this episode's {expected!r}"
            for column, expected in _identity(episode, fingerprint).items()
            if row[column] != expected]


def _checked(episode: Episode, fingerprint: str, row: Any) -> dict:
    """The row as it came back, or the error row that stands for it (heldout.episodes.rows)."""
    problems = _episode_problems(episode, fingerprint, row)
    return invalid_row(_identity(episode, fingerprint), problems) if problems else row


def _rejected_line(cache: EpisodeCache, rejected: Counter[str]) -> str:
    total = sum(rejected.values())
    ranked = sorted(rejected.items(), key=lambda item: (-item[1], item[0]))
    reasons = [f"{reason} ({count})" for reason, count in ranked[:3]]
    if len(rejected) > 3:
        reasons.append(f"and {len(rejected) - 3} other reasons")
    episodes = "episode" if total == 1 else "episodes"
    return (f"{cache.path}: {total} stored {episodes} could not be used and will run again: "
            + "; ".join(reasons))


def in_process(pieces: list[Piece]) -> Iterator[tuple[int, list[dict]]]:
    """A ChunkExecutor on this process's event loop (no orchestrator needed): every chunk is
    handed over at once, and the engine's `in_flight` bound says how many episodes run."""
    loop = event_loop()
    futures = {asyncio.run_coroutine_threadsafe(run_chunk_async(work, chunk), loop): index
               for index, (work, chunk) in enumerate(pieces)}
    try:
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:  # a failed or abandoned rollout leaves nothing running behind it
        for future in futures:
            future.cancel()


@dataclass
class _Runner:
    agent: Agent
    sandbox: Sandbox
    lanes: Lanes
    users: int = 0


@dataclass
class _RunnerPool:
    """The agents and sandboxes this process holds, one per work. Idle ones beyond `keep` are
    closed as new work arrives, so a long-lived cluster worker does not collect a sandbox per
    checkpoint it ever served; one in use is never closed under a chunk."""

    keep: int = 2
    _runners: dict[str, _Runner] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self, work: EpisodeWork) -> _Runner:
        key = work.runner_key()
        with self._lock:
            runner = self._runners.get(key)
            if runner is None:
                self._close_idle(self.keep - 1)
                runner = _Runner(make_agent(work.label, work.settings, work.context),
                                 work.harness.sandbox.open(),
                                 Lanes.open(work.agent_threads, work.harness.sandbox.workers))
                self._runners[key] = runner
            else:  # most recently used last
                self._runners[key] = self._runners.pop(key)
            runner.users += 1
            return runner

    def release(self, work: EpisodeWork) -> None:
        with self._lock:
            self._runners[work.runner_key()].users -= 1

    def close_idle(self) -> None:
        with self._lock:
            self._close_idle(0)

    def _close_idle(self, keep: int) -> None:
        idle = [key for key, runner in self._runners.items() if runner.users == 0]
        for key in idle[: max(0, len(idle) - keep)]:
            runner = self._runners.pop(key)
            runner.lanes.close()
            runner.sandbox.close()
            close_agent(runner.agent)


_RUNNERS = _RunnerPool()
close_idle_runners = _RUNNERS.close_idle
atexit.register(close_idle_runners)
