"""The stacker canary in the score stage: under the pinned harness it passes exactly the
episodes its hashes name; a harness that lets an episode's guesses stack passes it more often
and fails the stage, while the oracle and blind canaries, at their extremes, see nothing."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from heldout.agents.canaries import STACKER_CANDIDATES, stacker_expected_passes
from heldout.episodes import episode as episode_module
from heldout.episodes.episode import plan_episodes
from heldout.episodes.harness import Harness
from heldout.episodes.judge import score_many
from heldout.episodes.waits import Wait
from heldout.statistics.counts import CanaryError
from heldout.tasks.sources import load_tasks
from stages import score, split
from stages.common import read_params, section
from tests.conftest import configure_small_project


@pytest.fixture
def small(project: Path, monkeypatch) -> Path:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    configure_small_project(project, tasks=45, n=1)
    split.run(project)
    return project


def canaries_of(project: Path) -> tuple[dict, int]:
    params = read_params(project)
    harness = section(params, "harness", Harness)
    assert (harness.max_turns, harness.tools) == (5, ("run_public_tests", "submit"))
    canaries, _seconds = score.run_canaries(project, params, harness)
    tasks = load_tasks(project / "data/split/val.jsonl")
    single = harness.model_copy(update={"n": 1})
    expected = stacker_expected_passes(
        [(e.task, e.sample, e.seed) for e in plan_episodes(tasks, single)], single.tools,
        single.max_turns, single.max_tool_calls, STACKER_CANDIDATES)
    return canaries, len(expected)


def test_under_the_pinned_harness_the_stacker_passes_exactly_what_its_hashes_say(small: Path):
    canaries, expected = canaries_of(small)
    assert canaries["oracle_failed"] == [] and canaries["blind_passed"] == []
    assert canaries["stacker_episodes"] == len(load_tasks(small / "data/split/val.jsonl"))
    assert canaries["stacker_expected"] == expected > 0
    assert canaries["stacker_passes"] == expected
    assert canaries["stacker_stacked"] == [] and canaries["stacker_missed"] == []
    assert canaries["stacker_pass_rate"] == canaries["stacker_expected_rate"]
    print(f"stacker under the pinned harness: {canaries['stacker_passes']} passes of "
          f"{canaries['stacker_episodes']} episodes, {expected} expected")


def loosened_loop(real_loop):
    """The episode loop of a harness that lets guesses stack: after the agent's turns, each
    program it ran the public tests on is judged by the hidden tests too, and the first that
    passes is the episode's answer (as if the best of its tries had been submitted)."""

    def loop(agent, environment, budgets, task, sample, seed):
        outcome = yield from real_loop(agent, environment, budgets, task, sample, seed)
        tried = [step.arguments["code"] for step in outcome.steps
                 if step.tool == "run_public_tests" and "code" in step.arguments]
        for program in tried:
            (result,) = yield Wait("sandbox", partial(
                score_many, [(task, program)], environment.sandbox,
                timeout_s=budgets.execution.timeout_s, memory_mb=budgets.execution.memory_mb))
            if result.passed:
                outcome.program, outcome.end_reason = program, "submitted"
                break
        return outcome

    return loop


def test_a_harness_that_lets_guesses_stack_fails_the_stacker_alone(small: Path, monkeypatch):
    monkeypatch.setattr(episode_module, "loop_steps", loosened_loop(episode_module.loop_steps))
    canaries, expected = canaries_of(small)
    # The extremes cannot see it: the oracle's one answer was right, the blind's every one wrong.
    assert canaries["oracle_failed"] == [] and canaries["blind_passed"] == []
    assert canaries["oracle_pass_rate"] == 1.0 and canaries["blind_pass_rate"] == 0.0
    # The stacker can: some episodes passed on a guess it only tested.
    assert canaries["stacker_expected"] == expected
    assert canaries["stacker_passes"] > expected
    assert len(canaries["stacker_stacked"]) == canaries["stacker_passes"] - expected
    assert canaries["stacker_missed"] == []
    print(f"stacker under the loosened harness: {canaries['stacker_passes']} passes of "
          f"{canaries['stacker_episodes']} episodes, {expected} expected")
    with pytest.raises(CanaryError) as raised:
        score.run(small)
    message = str(raised.value)
    assert (f"the stacker (a skill-free guesser, its pass count known in advance) passed "
            f"{canaries['stacker_passes']} episodes where {expected} were expected") in message
    assert "lets guesses stack" in message and canaries["stacker_stacked"][0] in message
    assert "oracle" not in message and "blind" not in message
    assert not (small / "data/scores/val.json").exists()


def test_a_harness_that_fails_right_answers_is_named_as_such(small: Path, monkeypatch):
    """Below the expectation: a harness that judges something other than what a multi-turn
    episode submitted (here, always a body that does nothing) fails the stacker's right
    answers; the single-shot oracle does not take the path it breaks."""
    real = episode_module.loop_steps

    def lose_the_last_submission(agent, environment, budgets, task, sample, seed):
        outcome = yield from real(agent, environment, budgets, task, sample, seed)
        if len(outcome.steps) > 1:
            outcome.program = "    pass\n"
        return outcome

    monkeypatch.setattr(episode_module, "loop_steps", lose_the_last_submission)
    canaries, expected = canaries_of(small)
    assert canaries["oracle_failed"] == [] and canaries["stacker_passes"] == 0
    assert len(canaries["stacker_missed"]) == expected > 0
    with pytest.raises(CanaryError, match=r"failed though the guess submitted was the "
                                          r"reference, so the harness fails right answers"):
        score.run(small)


class Quiet:
    def start(self, total: int) -> None: ...

    def advance(self, row: dict, cached: bool) -> None: ...

    def finish(self) -> None: ...


@pytest.mark.parametrize("kind", ["python-program", "repository"])
def test_the_stacker_is_exact_on_whole_programs_and_repositories(tmp_path: Path, kind: str):
    """Each kind's wrong guess is its own blind answer; under the pinned harness the episodes
    it passes are the ones its hashes name. (On a repository the test tool takes no program,
    so it makes one guess and submits it.)"""
    from heldout.episodes.rollout import RolloutJob, RolloutsConfig, roll_outs
    from heldout.tasks import python_program, repository
    from tests.repository_fixtures import require_test_python

    if kind == "repository":
        require_test_python("subprocess")
    module = {"python-program": python_program, "repository": repository}[kind]
    tasks = load_tasks(Path(__file__).resolve().parents[2] / "tasks" / "examples"
                       / f"{kind.replace('-', '_')}.jsonl")
    if kind == "repository":
        tasks = tasks[:6]  # 12 episodes, a judged pytest run each: 2 name the reference
    harness = Harness(max_turns=5, n=3 if kind == "python-program" else 2, seed=2026,
                      timeout_s=30.0, scorer_version=module.SCORER_VERSION)
    (rows,) = roll_outs(tmp_path, [RolloutJob("canary:stacker", score.CANARIES["stacker"],
                                              harness)], tasks, RolloutsConfig(), Quiet())
    expected = stacker_expected_passes(
        [(e.task, e.sample, e.seed) for e in plan_episodes(tasks, harness)], harness.tools,
        harness.max_turns, harness.max_tool_calls, STACKER_CANDIDATES)
    assert all(row["status"] == "ok" and row["end_reason"] == "submitted" for row in rows)
    assert {row["turns"] for row in rows} == ({5} if kind == "python-program" else {1})
    passed = sorted((row["task_id"], row["sample"]) for row in rows if row["passed"])
    assert passed == expected and 0 < len(expected) < len(rows)
    print(f"stacker on {kind}: {len(passed)} passes of {len(rows)}, {len(expected)} expected")
