"""Closed means closed (issue 37): after an access closes, any input of the test stage that
changes makes the next run a new access, refused without a reason and ledgered, whatever the
input; a report re-draws the closed verdict, never re-decides it. Each case is a shortcut a
busy insider would try, on the stage a user runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from heldout.custody.guard import LEDGER, TestSetAccessError, sealing
from heldout.custody.ledger import read_ledger
from heldout.errors import StageError
from heldout.statistics import decision, rule
from stages import access_inputs, catalog, decontaminate, rollouts, score, select, split
from stages import report as report_stage
from stages import test as test_stage
from tests.custody.test_lock import audit_of, set_params


@pytest.fixture(scope="module")
def closed_once(selected: Path, tmp_path_factory) -> tuple[Path, dict]:
    """A project whose first access closed (and decontamination's report, for the report),
    made once per module: each test changes its own copy."""
    project = copied(selected, tmp_path_factory.mktemp("closed") / "project")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
        access = test_stage.run(project)
        decontaminate.run(project)  # flags only: it excludes no test task
    return project, access


def copied(source: Path, destination: Path) -> Path:
    with sealing():  # this process guards `source`; copying it is not reading it
        shutil.copytree(source, destination)
    return destination


@pytest.fixture
def project(closed_once: tuple[Path, dict], tmp_path: Path, monkeypatch) -> Path:
    copy = copied(closed_once[0], tmp_path / "closed")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{copy / 'own.db'}")
    return copy


@pytest.fixture
def closed(closed_once: tuple[Path, dict]) -> dict:
    """What the closed access's test stage returned."""
    return closed_once[1]


def ledger(project: Path) -> list[dict]:
    return read_ledger(project / LEDGER)


def worst_tasks(project: Path, count: int = 4) -> list[str]:
    """The test tasks on which the candidate did worst against the base: what an insider
    would like to leave out."""
    rates = {arm: pd.read_parquet(project / catalog.test_rollout_file(arm))
             .groupby("task_id")["passed"].mean() for arm in ("base", "candidate")}
    return sorted((rates["candidate"] - rates["base"]).sort_values().index[:count])


def exclude_from_test(project: Path, ids: list[str]) -> None:
    """What `decontaminate.policy: drop` writes for test items a training corpus copies."""
    path = project / catalog.EXCLUDED
    excluded = json.loads(path.read_text()) if path.is_file() else {"train": [], "val": []}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**excluded, "test": ids}))


def comment_one_hidden_test(project: Path, task_id: str) -> None:
    source = project / "tasks" / "small.jsonl"
    records = [json.loads(line) for line in source.read_text().splitlines()]
    (record,) = [r for r in records if r["id"] == task_id]
    record["tests"] = "# reviewed\n" + record["tests"]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    split.run(project)
    select.run(project)  # a selection names the test set it was made for


def rerun_val(project: Path) -> None:
    for name in ("base", "late"):
        rollouts.run(name, project)
    score.run(project)
    select.run(project)


def refused_as_a_new_access(project: Path, closed: dict, *, differs_in: str) -> str:
    """Run the test stage; assert it is refused, ledgered under a new access id, with the
    closed access's outputs left in place and the audit passing. Returns the refusal."""
    before = ledger(project)
    with pytest.raises(TestSetAccessError, match="already opened") as raised:
        test_stage.run(project)
    after = ledger(project)
    assert [e["outcome"] for e in after[len(before):]] == ["refused"]
    assert after[-1]["access_id"] != closed["access_id"]
    assert differs_in in str(raised.value)
    assert json.loads((project / catalog.ACCESS).read_text())["access_id"] == closed[
        "access_id"], "a refused access leaves the closed one's outputs"
    result = audit_of(project)
    assert result.ok, result.problems
    return str(raised.value)


# --- every input, changed after the access closed --------------------------------------------


def test_excluding_the_tasks_the_candidate_lost_is_a_new_access(project: Path, closed: dict):
    report_before = report_stage.run(project)
    lost = worst_tasks(project)
    exclude_from_test(project, lost)
    refused_as_a_new_access(project, closed, differs_in="computed_from.excluded_test")
    # The report still draws the closed access's verdict from the closed access's files.
    report = report_stage.run(project)
    recorded = [e for e in ledger(project) if e["outcome"] == "closed"][-1]["verdict"]
    assert report["headline"]["verdict"] == recorded["verdict"]
    assert report["headline"] == report_before["headline"]
    # With a reason it is another access, which counts the tasks it had already opened.
    set_params(project, "test", reaccess={"access": "late", "reason": "corpus overlap found"})
    again = test_stage.run(project)
    assert again["tasks"] == closed["tasks"] - len(lost)
    assert again["tasks_seen_before"] == again["tasks"]
    assert again["accesses_of_this_test_version"] == 2
    card = report_stage.run(project)["protocol"]["test_access"]
    assert (card["opened"], card["tasks_seen_before"]) == (2, again["tasks"])
    assert "of its tasks, opened by an earlier access" in (
        project / "reports" / "report.md").read_text()


@pytest.mark.parametrize("runs", [5, 12])
def test_choosing_the_runs_is_a_new_access(project: Path, closed: dict, runs: int):
    set_params(project, "reruns", runs=runs)
    refusal = refused_as_a_new_access(project, closed,
                                      differs_in=f"params.reruns.runs (4 → {runs})")
    assert f"{closed['tasks']} of the {closed['tasks']} test tasks" in refusal


def test_a_cosmetic_edit_of_one_hidden_test_is_a_new_access(project: Path, closed: dict):
    task = sorted(closed["groups"])[0]
    comment_one_hidden_test(project, task)
    manifest = json.loads((project / catalog.MANIFEST).read_text())
    assert manifest["test_content_version"] != closed["content_version"]
    refusal = refused_as_a_new_access(project, closed,
                                      differs_in="computed_from.content_version")
    assert f"{closed['tasks']} of the {closed['tasks']} test tasks" in refusal


def test_a_new_model_behind_a_name_is_a_new_access(project: Path, closed: dict):
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["checkpoints"]["base"]["skill"] += 0.1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    refusal = refused_as_a_new_access(project, closed, differs_in="params.checkpoints.base.skill")
    assert "vs base (settings" in refusal and "params.reaccess" not in refusal


def test_another_harness_is_a_new_access(project: Path, closed: dict):
    set_params(project, "harness", temperature=0.7)
    rerun_val(project)  # val and the selection agree with the new harness
    refusal = refused_as_a_new_access(project, closed,
                                      differs_in="params.harness.temperature (0.8 → 0.7)")
    assert ledger(project)[-1]["harness"] != closed["harness"], refusal


def test_a_params_key_added_later_is_in_the_identity_without_anyone_naming_it(
        project: Path, closed: dict, monkeypatch):
    class RerunsWithOrder(access_inputs.RerunsConfig):  # what a later change of heldout adds
        order: str = "sequential"

    # Where the access reads its sections (stages/access_inputs.py, for the stage and the plan).
    monkeypatch.setattr(access_inputs, "RerunsConfig", RerunsWithOrder)
    assert test_stage.run(project)["access_id"] == closed["access_id"], \
        "the new key at its default is not in params.yaml: the same access, nothing opened"
    set_params(project, "reruns", order="interleaved")
    refused_as_a_new_access(project, closed, differs_in="params.reruns.order")


def test_what_only_says_who_looks_leaves_the_access_as_it_is(project: Path, closed: dict):
    """The reason for another look, the spend's reason, the MLflow experiment and the
    episodes' execution are recorded apart: changing them reads the closed results."""
    set_params(project, "test", reaccess={"access": "late", "reason": "nothing changed"})
    set_params(project, "rollouts", in_flight=3, chunk_episodes=5)
    set_params(project, "mlflow", experiment="elsewhere")
    before = ledger(project)
    assert test_stage.run(project)["access_id"] == closed["access_id"]
    assert ledger(project) == before


# --- the count is per task ------------------------------------------------------------------


def test_a_re_dealt_split_says_how_many_of_its_tasks_were_seen(project: Path, closed: dict):
    set_params(project, "split", salt="another-salt")
    split.run(project)
    rerun_val(project)
    manifest = json.loads((project / catalog.MANIFEST).read_text())
    assert manifest["test_content_version"] != closed["content_version"]
    with pytest.raises(TestSetAccessError, match=r"(\d+) of the (\d+) test tasks") as raised:
        test_stage.run(project)
    seen = int(str(raised.value).split(" of the ")[0].rsplit(" ", 1)[-1])
    assert 0 < seen < closed["tasks"] + 40
    set_params(project, "test", reaccess={"access": "late", "reason": "a re-dealt split"})
    access = test_stage.run(project)
    assert access["tasks_seen_before"] == seen
    assert ledger(project)[-2]["seen_before"] == seen


# --- a report re-draws the closed verdict ----------------------------------------------------


def test_the_closed_line_holds_the_verdict_and_the_report_draws_the_same(project: Path,
                                                                         closed: dict):
    line = [e for e in ledger(project) if e["outcome"] == "closed"][-1]
    assert set(line["outputs"]) == set(closed["outputs"])
    report = report_stage.run(project)
    assert report["headline"]["verdict"] == line["verdict"]["verdict"]
    assert not any("RE-DRAWN" in w for w in report["headline"]["warnings"])


def test_a_rollout_file_changed_after_the_access_closed_gets_no_report(project: Path,
                                                                        closed: dict):
    path = project / catalog.test_rollout_file("candidate")
    table = pd.read_parquet(path)
    table[~table["task_id"].isin(worst_tasks(project))].to_parquet(path, index=False)
    with pytest.raises(StageError, match="is not the file access .* closed with"):
        report_stage.run(project)


def test_edited_groups_get_no_report(project: Path, closed: dict):
    path = project / catalog.ACCESS
    access = json.loads(path.read_text())
    access["groups"] = {task: "one-group" for task in access["groups"]}
    path.write_text(json.dumps(access))
    with pytest.raises(StageError, match="task groups are not the ones"):
        report_stage.run(project)


def test_a_verdict_the_rule_now_decides_otherwise_is_shown_beside_the_recorded_one(
        project: Path, closed: dict, monkeypatch):
    recorded = [e for e in ledger(project) if e["outcome"] == "closed"][-1]["verdict"]
    assert recorded["verdict"].startswith("not decidable")  # 19 tasks, fewer than 30
    # The rule's constants live in heldout.statistics.rule; the gate reads decision's copy.
    monkeypatch.setattr(decision, "MIN_UNITS", 5)
    monkeypatch.setattr(rule, "MIN_UNITS", 5)
    report = report_stage.run(project)
    (warning,) = [w for w in report["headline"]["warnings"] if w.startswith("RE-DRAWN")]
    assert f"its verdict was {recorded['verdict']}" in warning
    assert "min_units 30 → 5" in warning
    assert warning in (project / "reports" / "report.md").read_text()
