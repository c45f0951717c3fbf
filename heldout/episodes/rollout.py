"""Rolling out one agent on a task list: plan every episode, resume what the cache holds, run
the rest in chunks, report each finished episode to whoever watches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from heldout.agents.protocol import AgentContext
from heldout.agents.registry import make_agent
from heldout.canonical import content_digest
from heldout.episodes.cache import EpisodeCache
from heldout.episodes.chunks import (
    ChunkExecutor,
    EpisodeWork,
    close_idle_runners,
    collect_rollouts,
    in_threads,
)
from heldout.episodes.episode import episode_key_for, plan_episodes
from heldout.episodes.harness import Harness
from heldout.errors import ParamsError
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task


class RolloutsConfig(BaseModel):
    """`params.rollouts`: how episodes are executed (not part of the harness fingerprint)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int = Field(default=4, ge=1, description="chunks in flight at once (threads)")
    chunk_episodes: int = Field(
        default=20, ge=1,
        description="episodes per mapped task: the unit of scheduling and of resume",
    )
    cache: str = Field(default=".heldout/episodes.sqlite", description="resume store")


class EpisodeObserver(Protocol):
    """Told how many episodes there are, then of each as it finishes (on the collecting
    thread), then that the work ended, however it ended."""

    def start(self, total: int) -> None: ...

    def advance(self, row: dict, cached: bool) -> None: ...

    def finish(self) -> None: ...


def agent_context(harness: Harness, root: Path) -> AgentContext:
    return AgentContext(
        template=harness.template, temperature=harness.temperature, top_p=harness.top_p,
        max_tokens=harness.max_tokens, max_turns=harness.max_turns,
        timeout_s=harness.agent_timeout_s, project_root=str(root),
    )


def check_scorer_version(tasks: list[Task], harness: Harness) -> None:
    """The harness's scorer_version must be the one of the tasks' kind: it is what the
    fingerprint says a pass means."""
    versions = sorted({task_kind(task.kind).scorer_version for task in tasks})
    if versions and versions != [harness.scorer_version]:
        raise ParamsError(
            f"params.yaml: harness.scorer_version: {harness.scorer_version!r}, but these tasks "
            f"are scored by {', '.join(versions)}; set it to "
            f"{versions[0] if len(versions) == 1 else 'one of them, with one kind per task set'}")


def roll_out(
    root: Path, label: str, settings: dict[str, Any], tasks: list[Task], harness: Harness,
    config: RolloutsConfig, observer: EpisodeObserver, execute: ChunkExecutor | None = None,
    sealing_key: bytes | None = None, rerun: int = 0,
) -> list[dict]:
    """Every episode of one agent on these tasks, resumed from the cache where it can be, the
    rest run in chunks by `execute` (default: rollouts.concurrency threads of this process).
    With `sealing_key`, the cache keeps these episodes encrypted (heldout.episodes.cache);
    `rerun` > 0 draws every episode's seed anew (heldout.episodes.seeds), for the run-level
    drift."""
    check_scorer_version(tasks, harness)
    work = EpisodeWork(label, settings, agent_context(harness, root), harness)
    make_agent(label, settings, work.context)  # bad settings fail here, before any chunk ships
    episodes = plan_episodes(tasks, harness, rerun)
    cache = EpisodeCache(root / config.cache, sealing_key)
    observer.start(len(episodes))
    try:
        return collect_rollouts(
            work,
            episodes,
            execute or in_threads(config.concurrency),
            cache,
            episode_key_for(harness, content_digest(settings)),
            config.chunk_episodes,
            observer.advance,
        )
    finally:
        observer.finish()
        cache.close()
        close_idle_runners()
