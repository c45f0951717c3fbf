"""What one access is (issue 23, item 1): the models, not their names; the evaluated content of
the test set, not its file; and an audit that reads every experiment and ignores git's replace
objects. Each case is an insider's shortcut that must end refused or found."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlflow
import pytest
import yaml

from heldout.custody.guard import LEDGER, TestSetAccessError
from heldout.custody.ledger import read_ledger
from heldout.custody.lock import AccessKey
from stages import select, split
from stages import test as test_stage
from tests.custody.test_custody_audit import audit_of, commit_ledger, git, record_access
from tests.custody.test_lock import set_params
from tests.ledger_tools import keep_store_lines


@pytest.fixture
def project(selected_copy: Path) -> Path:
    return selected_copy


def outcomes(project: Path) -> list[str]:
    return [entry["outcome"] for entry in read_ledger(project / LEDGER)]


def set_checkpoint(project: Path, name: str, **settings) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["checkpoints"][name].update(settings)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_new_model_behind_the_base_name_is_a_new_access(project: Path):
    first = test_stage.run(project)
    set_checkpoint(project, "base", skill=1.0)  # another model, the same name
    with pytest.raises(TestSetAccessError, match="already opened"):
        test_stage.run(project)
    assert outcomes(project) == ["opened", "closed", "refused"]
    set_params(project, "test", reaccess={"access": "late", "reason": "the new base model"})
    second = test_stage.run(project)
    assert second["accesses_of_this_test_version"] == 2
    assert second["base_settings"] != first["base_settings"]
    assert second["access_id"] != first["access_id"]
    assert outcomes(project) == ["opened", "closed", "refused", "opened", "closed"]


def test_a_new_model_behind_the_candidate_name_is_a_new_access(project: Path):
    test_stage.run(project)
    set_checkpoint(project, "late", skill=0.5)
    # Val must agree with the new model before selection can pick it again.
    from stages import rollouts, score
    rollouts.run("late", project)
    score.run(project)
    select.run(project)
    with pytest.raises(TestSetAccessError, match="already opened"):
        test_stage.run(project)
    assert outcomes(project)[-1] == "refused"


def test_the_same_models_again_read_the_closed_access_and_never_recompute_it(project: Path):
    first = test_stage.run(project)
    assert test_stage.run(project)["access_id"] == first["access_id"]  # its outputs, read
    (project / "data/test/access.json").unlink()
    with pytest.raises(TestSetAccessError, match="numbers are fixed"):
        test_stage.run(project)
    assert outcomes(project) == ["opened", "closed", "refused"]


def edit_test_metadata(project: Path) -> None:
    """Touch one field nobody evaluates on every test task, and deal the split again."""
    manifest = json.loads((project / "data/split/manifest.json").read_text())
    source = project / "tasks" / "small.jsonl"
    records = [json.loads(line) for line in source.read_text().splitlines()]
    for record in records:
        record["metadata"] = {**record.get("metadata", {}), "note": "reviewed"}
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    split.run(project)
    select.run(project)
    after = json.loads((project / "data/split/manifest.json").read_text())
    assert after["test_version"] != manifest["test_version"], "the file changed"
    assert after["test_content_version"] == manifest["test_content_version"]


def test_a_metadata_edit_keeps_the_count(project: Path):
    test_stage.run(project)
    edit_test_metadata(project)
    with pytest.raises(TestSetAccessError, match="already opened"):
        test_stage.run(project)
    set_params(project, "test", reaccess={"access": "late", "reason": "metadata reviewed"})
    assert test_stage.run(project)["accesses_of_this_test_version"] == 2


def test_a_changed_set_is_a_new_version_that_names_its_predecessors_count(project: Path):
    from stages import rollouts, score

    test_stage.run(project)
    before = json.loads((project / "data/split/manifest.json").read_text())
    source = project / "tasks" / "small.jsonl"
    records = [json.loads(line) for line in source.read_text().splitlines()]
    for record in records:  # every prompt changed: every split, the test split's included
        record["prompt"] = record["prompt"] + "\n"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    split.run(project)
    for name in ("base", "late"):
        rollouts.run(name, project)
    score.run(project)
    select.run(project)
    # The same tasks under a new content: a re-access of every one of them, which needs a
    # reason, and the new version's first access still records its predecessor's count.
    with pytest.raises(TestSetAccessError, match=f"{access_tasks(project)} of the "):
        test_stage.run(project)
    set_params(project, "test", reaccess={"access": "late", "reason": "prompts reformatted"})
    access = test_stage.run(project)
    assert access["content_version"] != before["test_content_version"]
    assert access["accesses_of_this_test_version"] == 1
    assert access["tasks_seen_before"] == access["tasks"]
    assert access["predecessor"] == {"content_version": before["test_content_version"],
                                     "test_version": before["test_version"], "accesses": 1}
    opened = [e for e in read_ledger(project / LEDGER) if e["outcome"] == "opened"]
    assert opened[-1]["predecessor"]["accesses"] == 1


def access_tasks(project: Path) -> int:
    return json.loads((project / "data/test/access.json").read_text())["tasks"]


# --- the audit reads the whole store and ignores replace objects -----------------------------


@pytest.fixture
def repo(project: Path) -> Path:
    git(project, "init", "-q")
    return project


# One access key opens once (the ledger store's constraint): a second access is another key.
SECOND = AccessKey("t-0123456789ab", "early", "base", "f" * 64, "e" * 64, "b" * 64,
                   "c-0123456789ab", "i" * 64)


def test_renaming_the_experiment_does_not_hide_an_erased_access(repo: Path):
    record_access(repo)
    commit_ledger(repo)
    run_id = record_access(repo, access=SECOND)  # its lines are not committed yet
    client = mlflow.MlflowClient()
    experiment = client.get_run(run_id).info.experiment_id
    client.rename_experiment(experiment, "nothing-to-see")
    lines = (repo / LEDGER).read_text().splitlines()
    (repo / LEDGER).write_text("\n".join(lines[:2]) + "\n")  # the uncommitted access dropped
    keep_store_lines(repo, 2)  # from the ledger store too, where the lines live
    result = audit_of(repo)
    assert not result.ok
    assert any(run_id in problem for problem in result.problems), result.problems
    assert "every experiment" in result.scope


def test_another_experiment_in_params_does_not_hide_an_erased_access(repo: Path):
    record_access(repo)
    run_id = record_access(repo, access=SECOND)
    lines = (repo / LEDGER).read_text().splitlines()
    (repo / LEDGER).write_text("\n".join(lines[:2]) + "\n")
    keep_store_lines(repo, 2)
    set_params(repo, "mlflow", experiment="elsewhere")
    assert any(run_id in problem for problem in audit_of(repo).problems)


def test_git_replace_of_the_committed_ledger_is_found(repo: Path):
    record_access(repo)
    record_access(repo, access=SECOND)
    commit = commit_ledger(repo)
    whole = (repo / LEDGER).read_text()
    forged = "\n".join(whole.splitlines()[:2]) + "\n"  # the second access dropped
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=forged,
                          capture_output=True, text=True, check=True).stdout.strip()
    real = git(repo, "rev-parse", f"{commit}:{LEDGER}").strip()
    git(repo, "replace", real, blob)
    (repo / LEDGER).write_text(forged)
    keep_store_lines(repo, 2)
    result = audit_of(repo)
    assert not result.ok
    assert any("committed" in problem and "gone" in problem for problem in result.problems), \
        result.problems
