"""params.recipes in the pipeline (issue 42, item 1): every training seed of both recipes runs on
the test split inside the one access, sealed with the arms; the report stage draws the recipe
verdict (unit: the training seed) from that access alone; and the recipes are part of what the
access is, so changing them after it closed is another access, never a resume."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from flows.params import params_sections
from heldout.custody.guard import LEDGER, TestSetAccessError
from heldout.custody.keys import load_keys
from heldout.custody.ledger import read_ledger
from heldout.custody.seal import unseal
from heldout.errors import ParamsError
from stages import catalog, decontaminate
from stages import report as report_stage
from stages import test as test_stage
from stages.params_check import check_params

SEEDS = {"base_s2": -0.2, "base_s3": -0.8, "late_s2": 1.1, "late_s3": 1.9, "late_s4": 0.9}
RECIPES = {"old": ["base", "base_s2", "base_s3"], "new": ["late", "late_s2", "late_s3"]}


def with_recipes(project: Path, recipes: dict) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["checkpoints"].update({name: {"agent": "demo", "skill": skill}
                                  for name, skill in SEEDS.items()})
    params["recipes"] = recipes
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def project(selected_copy: Path) -> Path:
    with_recipes(selected_copy, RECIPES)
    return selected_copy


def seed_scores(access: dict, recipe: str) -> np.ndarray:
    counts = access["recipes"]["counts"]
    return np.array([np.mean([counts[seed]["passes"][task] / counts[seed]["episodes"][task]
                              for task in sorted(access["groups"])])
                     for seed in RECIPES[recipe]])


def test_the_seeds_run_in_the_access_and_the_report_draws_the_recipe_verdict(project: Path):
    access = test_stage.run(project)
    record = access["recipes"]
    assert (record["baseline"], record["candidate"]) == ("old", "new")
    n = yaml.safe_load((project / "params.yaml").read_text())["harness"]["n"]
    for seed in RECIPES["old"] + RECIPES["new"]:
        assert record["counts"][seed]["episodes"] == {task: n for task in access["groups"]}
    # Sealed with the arms' episodes, labelled apart from them (the base is also a seed).
    episodes = pd.read_parquet(io.BytesIO(unseal(
        (project / catalog.SEALED_TEST_EPISODES).read_bytes(), load_keys().current)))
    recipe_rows = episodes[episodes["checkpoint"].str.startswith("recipe:")]
    assert len(recipe_rows) == 6 * n * access["tasks"]
    for seed in RECIPES["old"] + RECIPES["new"]:
        rows = recipe_rows[recipe_rows["checkpoint"] == f"recipe:{seed}"]
        assert int(rows["passed"].sum()) == sum(record["counts"][seed]["passes"].values())

    decontaminate.run(project)  # the report reads what decontamination flagged
    report_stage.run(project)
    recipe = json.loads((project / catalog.RECIPE_REPORT / "report.json").read_text())
    headline = recipe["headline"]
    assert headline["unit"] == "seed" and headline["seeds"] == {"base": 3, "candidate": 3}
    old, new = seed_scores(access, "old"), seed_scores(access, "new")
    welch = stats.ttest_ind(new, old, equal_var=False)
    assert headline["difference"] == pytest.approx(new.mean() - old.mean(), abs=1e-12)
    assert headline["p_value"] == pytest.approx(welch.pvalue, rel=1e-9)
    assert recipe["seed_scores"]["candidate"] == pytest.approx(new.tolist())
    report = json.loads((project / catalog.REPORTS / "report.json").read_text())
    assert any(headline["line"] in note for note in report["headline"]["notes"])
    assert (project / catalog.RECIPE_REPORT / "report.md").read_text().startswith(
        "# Recipe comparison")


def test_recipes_changed_after_the_access_closed_are_another_access(project: Path):
    first = test_stage.run(project)
    swapped = {"new": RECIPES["new"], "old": RECIPES["old"]}  # the baseline is the first
    with_recipes(project, swapped)
    with pytest.raises(TestSetAccessError, match="already opened"):
        test_stage.run(project)
    with_recipes(project, {"old": RECIPES["old"], "new": ["late", "late_s2", "late_s4"]})
    with pytest.raises(TestSetAccessError, match="already opened"):
        test_stage.run(project)
    with_recipes(project, RECIPES)
    assert test_stage.run(project)["access_id"] == first["access_id"]  # its outputs, read
    assert [e["outcome"] for e in read_ledger(project / LEDGER)] == [
        "opened", "closed", "refused", "refused"]


def test_an_access_without_recipes_records_none(selected_copy: Path):
    access = test_stage.run(selected_copy)
    assert "recipes" not in access
    decontaminate.run(selected_copy)
    stale = selected_copy / catalog.RECIPE_REPORT / "report.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("# Recipe comparison of an earlier access\n")
    report_stage.run(selected_copy)
    assert not (selected_copy / catalog.RECIPE_REPORT).exists()


def problems(params: dict) -> str:
    with pytest.raises(ParamsError) as raised:
        check_params(params, params_sections())
    return str(raised.value)


def test_params_refuse_recipes_the_verdict_could_not_use(project: Path):
    params = yaml.safe_load((project / "params.yaml").read_text())
    check_params(params, params_sections())  # as written: valid
    assert "'nobody' is not a checkpoint" in problems(
        params | {"recipes": {"old": ["base", "base_s2", "nobody"], "new": RECIPES["new"]}})
    assert "at least 3 training seeds per arm" in problems(
        params | {"recipes": {"old": ["base", "base_s2"], "new": RECIPES["new"]}})
    assert "name two recipes" in problems(params | {"recipes": {"old": RECIPES["old"]}})
    assert "a seed of both recipes" in problems(
        params | {"recipes": {"old": RECIPES["old"], "new": ["late", "late_s2", "base"]}})


def test_the_plan_counts_the_seeds_episodes(project: Path):
    from cli.plan import stage_work

    params = yaml.safe_load((project / "params.yaml").read_text())
    counts = {"train": 10, "val": 12, "test": 14}
    with_seeds = {work.address: work for work in stage_work(project, params, counts)}["test"]
    without = {work.address: work for work in stage_work(
        project, params | {"recipes": {}}, counts)}["test"]
    n = params["harness"]["n"]
    assert with_seeds.episodes - without.episodes == 6 * 14 * n
    assert "6 recipe seeds" in with_seeds.stage and "recipe" not in without.stage
