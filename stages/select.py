"""Stage `select`: the val scores → data/selection.json, by the rule in params.select.

It reads validation only (the scores, and the val split for its tasks' groups); the rule was
fixed in params before any test number existed, and the digests it records let the test stage
refuse a selection made from other scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.canonical import content_digest
from heldout.files import staged_outputs
from heldout.statistics.selection import SelectConfig, select_checkpoint
from heldout.tasks.sources import load_tasks
from stages.catalog import PER_TASK, SCORES, SELECTION, split_file
from stages.common import (
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    tracked_stage,
    val_scores_digest,
)


def run(root: Path | None = None) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    config = section(params, "select", SelectConfig)
    order = list(params.get("checkpoints") or {})
    manifest = read_manifest(root)
    with tracked_stage(root, params, "select", "select") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest))
        counts = pd.read_parquet(root / PER_TASK)
        # The val tasks' groups, as the score stage's intervals have them: the standard error
        # of the one-SE rule is the cluster one over groups.
        groups = {task.id: task.group for task in load_tasks(root / split_file("val"))}
        selection = select_checkpoint(counts, order, config, groups=groups)
        scores = json.loads((root / SCORES).read_text(encoding="utf-8"))
        alarms = scores.get("alarms", {})
        for row in selection["table"]:
            row["public_hidden_alarm"] = alarms.get(row["checkpoint"], {}).get("fired", False)
            # What the checkpoint spent per episode against the base, beside its val score.
            effort = scores["checkpoints"][row["checkpoint"]].get("effort") or {"measures": {}}
            row["effort_ratio"] = {measure: spent["ratio"]
                                   for measure, spent in effort["measures"].items()
                                   if spent["ratio"] is not None}
        selection.update(
            public_hidden_alarms={name: alarm["reason"] for name, alarm in alarms.items()
                                  if alarm["fired"]},
            val_scores_digest=val_scores_digest(root),
            select_params_digest=content_digest(config.model_dump()),
            harness=scores["harness"],
            test_version=manifest["test_version"],
            val_tasks=int(counts["task_id"].nunique()),
        )
        with staged_outputs() as outputs:
            outputs.write_json(root / SELECTION, selection)
        print(f"select: {selection['chosen']} by rule {config.rule} on val {config.metric}. "
              f"{selection['note']}")
        curse = selection["winners_curse"]
        print(f"select: {curse['note']}")
        if selection["chosen"] in selection["public_hidden_alarms"]:
            print(f"select: WARNING the chosen checkpoint tripped the public-versus-hidden "
                  f"alarm: {selection['public_hidden_alarms'][selection['chosen']]}")
        mlflow_run.set_tags({"chosen": selection["chosen"], "rule": config.rule})
        mlflow_run.log_params({"select.rule": config.rule, "select.metric": config.metric})
        mlflow_run.log_metrics({f"val.{row['checkpoint']}": row["value"]
                                for row in selection["table"]})
        mlflow_run.log_metrics({
            "pick_share": selection["pick_stability"]["shares"][selection["chosen"]],
            "winners_curse.inflation": curse["inflation"],
            "winners_curse.if_all_level": curse["if_all_level"],
            "configurations_tried": curse["configurations_tried"]})
        mlflow_run.log_artifact(root / SELECTION, "select")
    return selection
