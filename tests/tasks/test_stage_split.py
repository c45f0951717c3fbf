"""The split stage, called as dvc.yaml's command calls it but without Prefect around it."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from heldout.custody.guard import sealing
from heldout.custody.keys import load_keys
from heldout.custody.seal import unseal
from heldout.errors import ParamsError, SplitError
from heldout.tasks.sources import load_jsonl_bytes, load_tasks
from heldout.tasks.split import split_digest
from stages import split
from tests.conftest import task_record, write_jsonl


def use_tasks(project: Path, records: list[dict]) -> None:
    write_jsonl(project / "tasks" / "mine.jsonl", records)
    params = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(
        params.replace("source: humaneval", "source: tasks/mine.jsonl")
    )


def runs_tagged(tracking_uri: str, **tags: str) -> list:
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("heldout")
    query = " and ".join(f"tags.`heldout.{k}` = '{v}'" for k, v in tags.items())
    return client.search_runs([experiment.experiment_id], filter_string=query)


def test_split_stage_writes_the_contract_and_logs_a_tagged_run(project: Path, monkeypatch):
    uri = f"sqlite:///{project / 'own.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    records = [task_record(f"t{i}", group=f"family-{i % 25}") for i in range(200)]
    use_tasks(project, records)

    manifest = split.run(project)

    split_dir = project / "data" / "split"
    written = {name: load_tasks(split_dir / f"{name}.jsonl") for name in ("train", "val")}
    with sealing():  # the split stage's own context: this process has the guard installed
        sealed = (split_dir / "test.sealed").read_bytes()
    assert b"HumanEval" not in sealed and b'"prompt"' not in sealed, "a plain read shows nothing"
    plain = unseal(sealed, load_keys().current)
    written["test"] = load_jsonl_bytes(plain, "test")
    assert sum(len(ts) for ts in written.values()) == 200
    for name, tasks in written.items():
        assert manifest["digests"][name] == split_digest(tasks)
        assert manifest["counts"][name] == len(tasks)
    assert json.loads((split_dir / "manifest.json").read_text()) == manifest
    val_prints = json.loads((split_dir / "fingerprints" / "val.json").read_text())
    assert {item["id"] for item in val_prints["items"]} == {t.id for t in written["val"]}

    (run,) = runs_tagged(uri, stage="split", test_version=manifest["test_version"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["heldout.split.test"] == manifest["digests"]["test"]
    assert run.data.metrics["tasks_test"] == len(written["test"])
    contexts = {
        next(tag.value for tag in d.tags if tag.key == "mlflow.data.context")
        for d in run.inputs.dataset_inputs
    }
    assert contexts == {"train", "val"}, "the split stage must not log the test split as input"
    artifacts = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "split")}
    assert "split/manifest.json" in artifacts and "split/test.jsonl" not in artifacts


def test_a_failing_split_leaves_no_output_and_a_failed_run(project: Path, monkeypatch):
    uri = f"sqlite:///{project / 'own.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    use_tasks(project, [task_record("a", group="one"), task_record("b", group="one")])
    with pytest.raises(SplitError, match="would be empty"):
        split.run(project)
    assert not (project / "data" / "split").exists() or not any(
        (project / "data" / "split").rglob("*")
    )
    (run,) = runs_tagged(uri, stage="split")
    assert run.info.status == "FAILED"


def test_bad_params_name_the_field(project: Path):
    params = (project / "params.yaml").read_text().replace("salt: heldout-2026", "salt: ''")
    (project / "params.yaml").write_text(params)
    with pytest.raises(ParamsError, match=r"params.yaml: split.salt: String should have"):
        split.run(project)


def test_a_val_split_too_thin_to_choose_on_is_said_before_any_rollout(project: Path, capsys):
    """40 tasks in 8 families: val holds a few of them, too few groups for select's intervals
    (issue 27, item 3); 200 tasks in 200 groups are enough, and nothing is said."""
    use_tasks(project, [task_record(f"t{i}", group=f"family-{i % 8}") for i in range(40)])
    manifest = split.run(project)
    val = [json.loads(line) for line in (project / "data/split/val.jsonl").read_text().splitlines()]
    groups = len({record["group"] for record in val})
    assert manifest["counts"]["val"] == len(val) and groups < 10
    warning = [line for line in capsys.readouterr().out.splitlines() if "WARNING" in line]
    assert warning == [
        f"split: WARNING val holds {len(val)} tasks in {groups} group{'s' * (groups != 1)}, too "
        "few for select to choose between checkpoints on (its intervals need at least 10 "
        "groups). Give val more groups (more tasks, or a larger split.fractions.val), or fix the "
        "choice in advance (select.rule: last, select.final: NAME)"]
    use_tasks(project, [task_record(f"t{i}") for i in range(200)])
    split.run(project)
    assert "WARNING" not in capsys.readouterr().out
