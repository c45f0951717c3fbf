"""The stacker canary's agent: its guesses are a function of the episode and the hashes alone,
it tests every guess but the last and submits the last, and the episodes it passes under the
pinned harness are known before it runs, about 1 in STACKER_CANDIDATES of them."""

from __future__ import annotations

import hashlib

import pytest
from scipy.stats import binomtest

from heldout.agents.canaries import (
    BLIND_ANSWERS,
    STACKER_CANDIDATES,
    StackerAgent,
    stacker_candidate,
    stacker_expected_passes,
    stacker_guesses,
)
from heldout.agents.protocol import AgentContext, EpisodeBrief, Observation
from heldout.agents.registry import make_agent
from heldout.episodes.environments import TOOL_SPECS
from heldout.episodes.seeds import episode_seed
from heldout.tasks.sources import load_tasks

TASKS = load_tasks("humaneval")[:40]
CONTEXT = AgentContext(template="{prompt}", temperature=0.8, top_p=0.95, max_tokens=64,
                       max_turns=5, timeout_s=10.0, project_root=".")


def brief(turns: int = 5, tool_calls: int = 8, tools=("run_public_tests", "submit")):
    return EpisodeBrief(tools=tuple(TOOL_SPECS[name] for name in tools),
                        budgets={"turns": turns, "tool_calls": tool_calls, "tokens": 2048})


def play(agent: StackerAgent, task, sample: int, seed: int, episode_brief: EpisodeBrief):
    """Every action of one episode, answered with feedback that would mislead a skilled agent
    (every test run 'passed'): the stacker must ignore it."""
    session = agent.begin(task, sample, seed, episode_brief)
    actions, observation = [], Observation(None, task.prompt, {}, 1, seed, {})
    for turn in range(1, 20):
        action = session.act(observation, 60.0)
        actions.append(action)
        if action.tool == "submit":
            return actions
        observation = Observation(action.tool, "All public tests passed.", {"passed": True},
                                  turn + 1, seed + turn, {})
    raise AssertionError("the stacker never submitted")


def test_each_guess_is_the_hash_of_the_episode_and_the_last_alone_is_submitted():
    agent = make_agent("stacker", {"agent": "stacker"}, CONTEXT)
    assert isinstance(agent, StackerAgent) and agent.candidates == STACKER_CANDIDATES
    task = TASKS[0]
    for sample in range(6):
        seed = episode_seed(2026, task.id, sample)
        actions = play(agent, task, sample, seed, brief())
        assert [a.tool for a in actions] == ["run_public_tests"] * 4 + ["submit"]
        assert actions == play(agent, task, sample, seed, brief())  # deterministic
        for guess, action in enumerate(actions):
            digest = hashlib.sha256(f"heldout-stacker\x00{task.id}\x00{sample}\x00{seed}\x00"
                                    f"{guess}".encode()).digest()
            right = int.from_bytes(digest[:8], "big") % STACKER_CANDIDATES == 0
            assert action.arguments["code"] == (task.reference if right else "    pass\n")
    # The turn budget, the tool-call budget and the tools decide how many guesses it makes.
    assert len(play(agent, task, 0, 1, brief(turns=3))) == 3
    assert len(play(agent, task, 0, 1, brief(turns=9, tool_calls=2))) == 2
    assert len(play(agent, task, 0, 1, brief(tools=("submit",)))) == 1
    assert stacker_guesses("repository", ("run_public_tests", "submit"), 5, 8) == 1


def test_whole_program_and_repository_tasks_guess_their_kinds_blind_answer():
    program_task = TASKS[1].model_copy(update={"kind": "python-program"})
    repo_task = TASKS[2].model_copy(update={"kind": "repository"})
    agent = StackerAgent()
    codes = {action.arguments["code"] for sample in range(12)
             for action in play(agent, program_task, sample, sample, brief())}
    assert codes == {program_task.reference, BLIND_ANSWERS["python-program"](program_task)}
    for sample in range(12):
        (only,) = play(agent, repo_task, sample, sample, brief())
        right = stacker_candidate(repo_task.id, sample, sample, 0, STACKER_CANDIDATES) == 0
        assert only.tool == "submit" and only.arguments["code"] == (
            repo_task.reference if right else "")


def test_the_expected_passes_are_the_episodes_whose_submitted_guess_is_the_reference():
    agent = StackerAgent()
    episodes = [(task, sample, episode_seed(7, task.id, sample))
                for task in TASKS for sample in range(5)]
    expected = stacker_expected_passes(episodes, ("run_public_tests", "submit"), 5, 8)
    submitted_reference = sorted(
        (task.id, sample) for task, sample, seed in episodes
        if play(agent, task, sample, seed, brief())[-1].arguments["code"] == task.reference)
    assert expected == submitted_reference and 0 < len(expected) < len(episodes)
    # Another turn budget submits another guess: another, equally predictable, set.
    assert stacker_expected_passes(episodes, ("run_public_tests", "submit"), 3, 8) != expected


def test_over_many_episodes_the_stacker_submits_the_reference_about_one_time_in_k():
    tasks = load_tasks("humaneval")
    episodes = [(task, sample, episode_seed(11, task.id, sample))
                for task in tasks for sample in range(10)]
    for candidates in (STACKER_CANDIDATES, 3):
        passes = len(stacker_expected_passes(episodes, ("run_public_tests", "submit"), 5, 8,
                                             candidates))
        assert binomtest(passes, len(episodes), 1 / candidates).pvalue > 1e-3
    # Guesses within an episode are independent draws: the reference among any of 5 guesses
    # (what a harness that lets them stack would pass) is about 1 - (1 - 1/K)^5.
    any_right = sum(any(stacker_candidate(t.id, s, seed, g, STACKER_CANDIDATES) == 0
                        for g in range(5)) for t, s, seed in episodes)
    assert binomtest(any_right, len(episodes),
                     1 - (1 - 1 / STACKER_CANDIDATES) ** 5).pvalue > 1e-3


def test_a_task_without_a_reference_is_an_agent_error():
    from heldout.errors import AgentError

    with pytest.raises(AgentError, match="no reference solution for the stacker"):
        StackerAgent().begin(TASKS[0].model_copy(update={"reference": None}), 0, 0, brief())
