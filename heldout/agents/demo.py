"""The embedded default's checkpoints: synthetic policies, not models.

A demo checkpoint answers each episode with the task's reference solution or with one of its
mutants (heldout.agents.mutation). The probability of the reference is a logistic function of the
checkpoint's `skill` minus a per-task difficulty fixed by a hash of the task id; on a share of
tasks (also fixed by a hash) later checkpoints "narrow": the probability of the right program
falls by `narrowing`, as reinforcement learning is reported to trade coverage for precision.
The draws come from the episode seed alone, so checkpoints share their random numbers (common
random numbers): on the same episode a more skilled checkpoint solves whenever a less skilled
one does, except where narrowing says otherwise.

A demo checkpoint's `policy` says how it acts: `single` answers in one turn as above; the
multi-turn policies (heldout.agents.demo_policies) use the episode's tools: `tester` writes,
tests, revises and submits, `guesser` stacks independent guesses, `hacker` answers the public
tests' inputs from a lookup table and nothing else.

These exist so every stage has real code to execute and real differences to measure.
"""

from __future__ import annotations

import hashlib
import math
import random
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

from pydantic import Field

from heldout.agents.mutation import mutants
from heldout.agents.patch_mutation import patch_mutants
from heldout.agents.protocol import AgentSettings, Completion
from heldout.errors import AgentError
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task


class DemoSettings(AgentSettings):
    skill: float = Field(default=0.0, description="logit of solving a task of median difficulty")
    policy: Literal["single", "tester", "guesser", "hacker"] = "single"
    revision_gain: float = Field(
        default=1.0, ge=0.0, description="logit a tester gains per revision after a failed run")
    narrowing: float = Field(default=0.0, ge=0.0, le=1.0)
    narrow_share: float = Field(default=0.2, ge=0.0, le=1.0)
    difficulty_spread: float = Field(default=1.5, gt=0.0)


def _unit(label: str, task_id: str) -> float:
    digest = hashlib.sha256(f"heldout-demo:{label}:{task_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


def difficulty(task_id: str, spread: float) -> float:
    return spread * NormalDist().inv_cdf(_unit("difficulty", task_id))


def narrows_on(task_id: str, share: float) -> bool:
    return _unit("narrowing", task_id) < share


@lru_cache(maxsize=4096)
def _mutants_by_operator(prompt: str, reference: str) -> tuple[tuple[str, ...], ...]:
    groups: dict[str, list[str]] = {}
    for operator, completion in mutants(prompt, reference):
        groups.setdefault(operator, []).append(completion)
    return tuple(tuple(group) for group in groups.values())


_PATCH_MUTANTS: dict[str, tuple[tuple[str, ...], ...]] = {}


def _mutants_of(task: Task) -> tuple[tuple[str, ...], ...]:
    """The reference's mutants, grouped by operator: a repository task's are diffs (its
    reference patch mutated where it writes), a whole program is mutated alone, a function
    body in the context of its signature."""
    if task.kind == "repository":
        if task.content_hash not in _PATCH_MUTANTS:
            _PATCH_MUTANTS[task.content_hash] = patch_mutants(task.files, task.reference)
        return _PATCH_MUTANTS[task.content_hash]
    context = task.prompt if task_kind(task.kind).completes_prompt else ""
    return _mutants_by_operator(context, task.reference)


class DemoAgent:
    def __init__(self, settings: DemoSettings):
        self.settings = settings

    def probability_of_reference(self, task: Task, gain: float = 0.0) -> float:
        s = self.settings
        p = 1 / (1 + math.exp(difficulty(task.id, s.difficulty_spread) - s.skill - gain))
        return p * (1 - s.narrowing) if narrows_on(task.id, s.narrow_share) else p

    def draw_program(self, task: Task, seed: int, gain: float = 0.0) -> str:
        """The reference with probability_of_reference(task, gain), else one of its mutants,
        drawn from `seed` alone."""
        if not task.reference:
            raise AgentError(f"task {task.id}: the demo agent needs a reference solution")
        rng = random.Random(seed)
        draw = rng.random()
        by_operator = _mutants_of(task)
        if draw < self.probability_of_reference(task, gain) or not by_operator:
            return task.reference
        # Operator first, then a mutant of it: constant shifts are the most numerous mutants
        # and would otherwise crowd out every other kind of mistake.
        return rng.choice(rng.choice(by_operator))

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        text = self.draw_program(task, seed)
        return Completion(text=text, tokens_in=len(task.prompt.split()),
                          tokens_out=len(text.split()))
