"""`heldout compare A1,A2,A3 B1,B2,B3 --out DIR`: two recipes, a rollout file per training seed,
compared with the seed as the unit (cli/recipes.py, heldout.report.recipe; issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.test_compare_cli import heldout
from tests.report.test_report import OTHER_HARNESS, rollouts
from tests.report.test_score_cli import AGREEMENT_TASKS, demo_samples, needs_sandbox, write_samples

TASKS, EPISODES = 40, 4
HALF = 6  # tasks every seed passes in half its episodes: the evaluation noise


def seed_file(folder: Path, name: str, passes: int, **options: str) -> Path:
    """40 tasks × 4 episodes: the first `passes` pass always, the next HALF pass in 2 of 4."""
    outcomes = {f"t{i:03d}": ([True] * EPISODES if i < passes else
                              [True, False] * (EPISODES // 2) if i < passes + HALF else
                              [False] * EPISODES) for i in range(TASKS)}
    path = folder / f"{name}.parquet"
    rollouts(name, outcomes, **options).to_parquet(path)
    return path


def arm(folder: Path, recipe: str, passes: tuple[int, ...]) -> str:
    return ",".join(str(seed_file(folder, f"{recipe}{seed}", count))
                    for seed, count in enumerate(passes, start=1))


def test_three_seeds_per_side_give_a_recipe_verdict_with_the_seed_as_unit(tmp_path: Path):
    done = heldout("compare", arm(tmp_path, "a", (10, 12, 11)), arm(tmp_path, "b", (20, 23, 21)),
                   "--out", tmp_path / "out", "--target-effect", "0.05")
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[0]
    # Scores: (passes + 3)/40 per seed: base 32.5, 37.5, 35.0; candidate 57.5, 65.0, 60.0.
    assert line.startswith("Better: recipe B 60.8% vs recipe A 35.0% over 3 and 3 seeds, "
                           "+25.8 points [")
    assert line.endswith("— unit: seed") and len(line) <= 160
    assert "Sizing: " in done.stdout and "not a claim about any one checkpoint" in done.stdout
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.json", "report.md"}
    report = json.loads((tmp_path / "out/report.json").read_text())
    headline = report["headline"]
    assert headline["unit"] == "seed" and headline["seeds"] == {"base": 3, "candidate": 3}
    assert headline["verdict"] == "better" and headline["test"] == "Welch's t test over seeds"
    assert headline["low"] > 0 and headline["p_value"] < 0.05
    # Each seed's evaluation variance: 6 tasks at p = 1/2 over n − 1 = 3, over 40² tasks².
    evaluation = 6 * 0.25 / 3 / TASKS**2
    base = report["variance"]["base"]
    assert base["evaluation"] == pytest.approx(evaluation)
    assert base["between_seeds"] == pytest.approx(0.000625)  # the scores' s²: (2.5 points)²
    assert base["training"] == pytest.approx(0.000625 - evaluation)
    assert report["sizing"]["basis"] == "target" and report["sizing"]["seeds_per_arm"] > 3
    # The arms' task rates correlate, so pairing by task narrows the tasks' error; the
    # verdict's is the seeds' (unpaired_se), which these tasks' all-or-nothing rates leave
    # below both.
    assert report["task_correlation"] > 0.5
    assert report["unpaired_se"] < report["paired_se"] < report["unpaired_task_se"]


def test_two_seeds_per_side_exit_2_naming_the_rule(tmp_path: Path):
    done = heldout("compare", arm(tmp_path, "a", (10, 12)), arm(tmp_path, "b", (20, 23)),
                   "--out", tmp_path / "out")
    assert done.returncode == 2
    assert "at least 3 training seeds per arm" in done.stderr
    assert "A has 2; B has 2" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_seeds_on_other_tasks_or_harnesses_or_with_checkpoint_options_exit_2(tmp_path: Path):
    base = arm(tmp_path, "a", (10, 12, 11))
    elsewhere = seed_file(tmp_path, "b3", 21, harness=OTHER_HARNESS)
    other_harness = f"{arm(tmp_path, 'b', (20, 23))},{elsewhere}"
    refused = heldout("compare", base, other_harness, "--out", tmp_path / "out")
    assert refused.returncode == 2 and "must be evaluated under one harness" in refused.stderr
    fewer_tasks = tmp_path / "short.parquet"
    rollouts("short", {"t000": [True] * EPISODES}).to_parquet(fewer_tasks)
    refused = heldout("compare", base, f"{arm(tmp_path, 'b', (20, 23))},{fewer_tasks}",
                      "--out", tmp_path / "out")
    assert refused.returncode == 2 and "hold different tasks (39 differ" in refused.stderr
    refused = heldout("compare", base, arm(tmp_path, "b", (20, 23, 21)), "--out",
                      tmp_path / "out", "--rerun-a", base.split(",")[0])
    assert refused.returncode == 2 and "takes none of them" in refused.stderr
    assert not (tmp_path / "out").exists()


@needs_sandbox
def test_samples_files_as_seeds_are_scored_each_into_a_folder_of_its_own(tmp_path: Path):
    tasks = AGREEMENT_TASKS[:4]
    arms = [",".join(str(write_samples(tmp_path / f"{recipe}{seed}.jsonl",
                                       demo_samples(tasks, shift=shift + seed)))
                     for seed in range(3)) for recipe, shift in (("a", 0), ("b", 3))]
    done = heldout("compare", *arms, "--tasks", "humaneval", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out/scored").iterdir()) == [
        "base-1", "base-2", "base-3", "candidate-1", "candidate-2", "candidate-3"]
    headline = json.loads((tmp_path / "out/report.json").read_text())["headline"]
    assert headline["unit"] == "seed" and headline["seeds"] == {"base": 3, "candidate": 3}
