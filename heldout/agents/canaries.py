"""The harness canaries: `oracle` must pass every task, `blind` must pass none, and `stacker`
must pass exactly the episodes its hashes say.

They run through the same harness and sandbox as the checkpoints; if either extreme misbehaves,
the sandbox or the tasks are broken, and that must never pass for a bad (or good) model. The
stacker is skill-free: a guess a turn, the reference in about 1 of STACKER_CANDIDATES, only the
last submitted. Its score under the pinned harness is known before it runs; a harness loosened
so that guesses stack (a tested program counted, a retry, several submissions) moves it, which
neither extreme can show.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

from pydantic import Field

from heldout.agents.protocol import (
    Action,
    AgentContext,
    AgentSettings,
    Completion,
    EpisodeBrief,
    Observation,
)
from heldout.errors import AgentError
from heldout.tasks.record import Task


class OracleAgent:
    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        if task.reference is None:
            raise AgentError(f"task {task.id}: no reference solution for the oracle canary")
        return Completion(text=task.reference)


class BlindAgent:
    """An answer that does nothing, in the shape the task's kind asks for: a function body of
    `pass` indented like the function it completes; a program that reads its input and prints
    nothing."""

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        if task.kind not in BLIND_ANSWERS:
            raise AgentError(f"task {task.id}: no blind answer for kind {task.kind!r}")
        return Completion(text=BLIND_ANSWERS[task.kind](task))


BLIND_ANSWERS: dict[str, Callable[[Task], str]] = {
    "python-function": lambda task: f"{body_indent(task)}pass\n",
    "python-program": lambda task: "import sys\n\nsys.stdin.read()\n",
    "repository": lambda task: "",  # an empty diff: the repository as it was
}


def body_indent(task: Task) -> str:
    for line in reversed(task.prompt.splitlines()):
        stripped = line.lstrip()
        if stripped.startswith(("def ", "async def ")) and f"{task.entry_point}(" in stripped:
            return line[: len(line) - len(stripped)] + "    "
    return "    "


def make_oracle(settings: AgentSettings, context: AgentContext) -> OracleAgent:
    return OracleAgent()


def make_blind(settings: AgentSettings, context: AgentContext) -> BlindAgent:
    return BlindAgent()


# --- the stacker: a guesser whose score under the pinned harness is known in advance --------

# Candidate answers of each guess: candidate 0 is the reference, the others the blind answer.
STACKER_CANDIDATES = 4
# The test tool a guess is run through on every turn but the last; the repository kind's takes
# no code (it tests the tree), so there the stacker makes one guess and submits it.
TEST_TOOL = "run_public_tests"
GUESSES_TESTED_KINDS = ("python-function", "python-program")


class StackerSettings(AgentSettings):
    candidates: int = Field(default=STACKER_CANDIDATES, ge=2, le=1000,
                            description="candidate answers per guess, one the reference")


def stacker_candidate(task_id: str, sample: int, seed: int, guess: int, candidates: int) -> int:
    """Which candidate guess `guess` (0-based) of an episode is: 0 is the reference. A sha256 of
    the episode and the guess alone: no process state, the same on every machine."""
    digest = hashlib.sha256(
        f"heldout-stacker\x00{task_id}\x00{sample}\x00{seed}\x00{guess}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % candidates


def stacker_guesses(kind: str, tools: Iterable[str], max_turns: float,
                    max_tool_calls: float) -> int:
    """How many guesses the stacker makes in one episode: one a turn, each one tool call, the
    last submitted. One alone where no test tool takes a program (the harness offers none, or
    the kind's tests the tree as it stands)."""
    if TEST_TOOL not in set(tools) or kind not in GUESSES_TESTED_KINDS:
        return 1
    return max(1, int(min(max_turns, max_tool_calls)))


def stacker_expected_passes(episodes: Iterable[tuple[Task, int, int]], tools: Iterable[str],
                            max_turns: int, max_tool_calls: int,
                            candidates: int = STACKER_CANDIDATES) -> list[tuple[str, int]]:
    """The (task id, sample) of each episode (task, sample, seed) whose submitted guess is the
    reference: the episodes the stacker passes under a harness that judges only the submitted
    program, once. From the hashes alone, before anything runs."""
    tools = tuple(tools)
    return sorted(
        (task.id, sample) for task, sample, seed in episodes
        if stacker_candidate(task.id, sample, seed,
                             stacker_guesses(task.kind, tools, max_turns, max_tool_calls) - 1,
                             candidates) == 0)


class StackerAgent:
    """Skill-free: each turn it makes one guess (the reference or the blind answer, by the
    hash), runs it through the test tool and ignores what it is told; on its last guess it
    submits. Under the pinned harness only the submitted guess is judged, so it passes exactly
    the episodes `stacker_expected_passes` names; a harness that lets guesses stack (a tested
    program counted, a retry with fresh guesses, several submissions) passes more."""

    def __init__(self, candidates: int = STACKER_CANDIDATES):
        self.candidates = candidates

    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief) -> StackerSession:
        if task.reference is None:
            raise AgentError(f"task {task.id}: no reference solution for the stacker canary")
        if task.kind not in BLIND_ANSWERS:
            raise AgentError(f"task {task.id}: no blind answer for kind {task.kind!r}")
        guesses = stacker_guesses(task.kind, (tool.name for tool in brief.tools),
                                  brief.budgets.get("turns", 1),
                                  brief.budgets.get("tool_calls", 1))
        answers = [task.reference, BLIND_ANSWERS[task.kind](task)]
        return StackerSession([
            answers[min(stacker_candidate(task.id, sample, seed, guess, self.candidates), 1)]
            for guess in range(guesses)])


class StackerSession:
    def __init__(self, guesses: list[str]):
        self.guesses = guesses
        self.made = 0

    def act(self, observation: Observation | None, deadline_s: float) -> Action:
        # What the test tool said is never read: the guesses were fixed when the episode began.
        program = self.guesses[min(self.made, len(self.guesses) - 1)]
        self.made += 1
        tool = "submit" if self.made >= len(self.guesses) else TEST_TOOL
        return Action(tool, {"code": program})

    def close(self) -> None:
        pass


def make_stacker(settings: StackerSettings, context: AgentContext) -> StackerAgent:
    return StackerAgent(settings.candidates)
