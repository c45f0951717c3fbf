"""A held-out family run through every stage (issue 42, item 2): split deals one family to test
whole, the test stage records each test task's family inside the access and binds them to its
closed line, and the report puts the family split beside the variant split.

HumanEval (the embedded default) has no families: its group is the task id and nothing in a
task says which kind of problem it is. So the tasks here are 48 real HumanEval tasks, for the
real demo agents to run, labelled with stand-in families (metadata.family, blocks of twelve
consecutive ids): the mechanics are under test, not what the numbers say of families."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from heldout.canonical import content_digest
from heldout.custody.guard import LEDGER
from heldout.custody.ledger import read_ledger
from heldout.tasks.sources import load_tasks
from stages import decontaminate, rollouts, score, select, split
from stages import report as report_stage
from stages import test as test_stage
from tests.conftest import configure_small_project, write_jsonl

FAMILIES = ("strings", "lists", "numbers", "parsing")  # stand-in labels, twelve tasks each


def stand_in_family(task_id: str) -> str:
    return FAMILIES[int(task_id.rsplit("/", 1)[1]) // 12]


def test_a_held_out_family_runs_through_the_pipeline_beside_the_variant_split(
        project: Path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    configure_small_project(project, tasks=48,
                            split={"hold_out": {"field": "metadata.family",
                                                "values": ["parsing"]}})
    write_jsonl(project / "tasks" / "small.jsonl",
                [{**task.to_record(), "metadata": {"family": stand_in_family(task.id)}}
                 for task in load_tasks("humaneval")[:48]])
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["split"]["hold_out"]["values"] == ["parsing"]

    manifest = split.run(project)
    assert manifest["split_kind"] == ("family (held out: metadata.family = parsing) + variant "
                                      "(stratified by metadata.family)")
    # twelve groups a family (each task its own): 4 / 4 / 4 by 0.3 / 0.35 / 0.35
    seen = {"train": 4, "val": 4, "test": 4}
    assert manifest["families"] == {"lists": seen, "numbers": seen, "strings": seen,
                                    "parsing": {"train": 0, "val": 0, "test": 12}}
    assert manifest["counts"] == {"train": 12, "val": 12, "test": 24}
    val_ids = [json.loads(line)["id"] for line in
               (project / "data/split/val.jsonl").read_text().splitlines()]
    assert not any(stand_in_family(task_id) == "parsing" for task_id in val_ids)

    decontaminate.run(project)
    for name in ("base", "late"):
        rollouts.run(name, project)
    score.run(project)
    select.run(project)
    access = test_stage.run(project)
    # every test task's family, recorded inside the access and bound to its closed line
    assert len(access["families"]) == 24
    assert access["families"] == {task_id: stand_in_family(task_id)
                                  for task_id in access["families"]}
    assert sorted(access["families"]) == sorted(access["groups"])
    closed = [e for e in read_ledger(project / LEDGER) if e.get("outcome") == "closed"]
    assert closed[-1]["verdict"]["families_digest"] == content_digest(access["families"])

    report = report_stage.run(project)
    by_family = report["by_family"]
    unseen, variant = by_family["splits"]
    assert (unseen["name"], unseen["tasks"]) == ("family split: unseen families", 12)
    assert (variant["name"], variant["tasks"]) == ("variant split: seen families, new groups",
                                                   12)
    assert [(row["name"], row["held_out"], row["tasks"]) for row in by_family["environments"]] \
        == [("lists", False, 4), ("numbers", False, 4), ("parsing", True, 12),
            ("strings", False, 4)]
    for row in (unseen, variant, *by_family["environments"]):
        assert row["low"] <= row["difference"] <= row["high"]  # 4 tasks or more: measured
    assert report["protocol"]["split"]["kind"] == manifest["split_kind"]
    markdown = (project / "reports/report.md").read_text()
    assert "By family: unseen families and new groups" in markdown
    assert "| variant split: seen families, new groups | 12 |" in markdown
    assert "| split kind | family (held out: metadata.family = parsing)" in markdown
    assert "whole families no earlier stage saw beside new groups of seen ones" in markdown
    assert 'id="by-family"' in (project / "reports/report.html").read_text()
