"""Stage `sensitivity`: the harness sweep on the val split → data/sensitivity/val.json,
metrics/sensitivity.json and plots/sensitivity.png.

Each chosen checkpoint (params.sensitivity.checkpoints) and a fixed reference policy run under
the pinned harness and under each one-field change of it (heldout.episodes.sweep), at the
sweep's n and the pinned seed; every setting's pass@1 is compared with the pinned setting's,
task by task. Val only: the test split's verdict never depends on the sweep, and no stage
reads what this one writes."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.agents.registry import make_agent
from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutJob, RolloutsConfig, agent_context, roll_outs
from heldout.episodes.rows import rollout_table
from heldout.episodes.sweep import (
    PINNED,
    SensitivityConfig,
    Setting,
    excludes_zero,
    invariant_fields,
    largest_move,
    plan_settings,
    reference_verdict,
)
from heldout.errors import ParamsError
from heldout.files import staged_outputs
from heldout.report.sensitivity_figure import sensitivity_figure
from heldout.statistics.bca import difference_interval
from heldout.statistics.counts import per_task_counts, summarize_checkpoint
from heldout.statistics.grouping import group_labels
from heldout.statistics.intervals import Interval
from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks
from stages.catalog import SENSITIVITY, SENSITIVITY_METRICS, SENSITIVITY_PNG, split_file
from stages.common import (
    checkpoint_settings,
    eval_view,
    log_split_input,
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    tracked_stage,
)
from stages.progress import EpisodeProgress

REFERENCE = "reference"
# What a setting's summary keeps of summarize_checkpoint beside pass@1: where episodes went.
KEPT_RATES = ("error_rate", "timeout_rate", "truncation_rate", "refusal_rate", "budget_rate")


def run(root: Path | None = None, execute: ChunkExecutor | None = None) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    pinned = section(params, "harness", Harness)
    config = section(params, "sensitivity", SensitivityConfig)
    rollouts_config = section(params, "rollouts", RolloutsConfig)
    settings = plan_settings(pinned, config.fields, config.n)
    invariant = invariant_fields(config)
    arms = sweep_arms(root, params, config, pinned)
    manifest = read_manifest(root)
    with tracked_stage(root, params, "sensitivity", "sensitivity") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest) | {
            "harness": pinned.fingerprint(), "sweep_harness": settings[0].fingerprint})
        tasks = eval_view(root, "val", load_tasks(root / split_file("val")))
        started = time.perf_counter()
        counts = setting_counts(root, arms, tasks, settings, rollouts_config, execute)
        wall_s = time.perf_counter() - started
        groups = {task.id: task.group for task in tasks}
        results = {arm: compare_settings(counts[arm], settings, groups) for arm in arms}
        reference = results.pop(REFERENCE)
        differences = {name: Interval.from_json(row["difference"])
                       for name, row in reference["settings"].items() if name != PINNED}
        reference.update(agent=arms[REFERENCE],
                         **reference_verdict(settings, differences, invariant))
        sweep = {
            "split": "val",
            "val_digest": manifest["digests"]["val"],
            "test_version": manifest["test_version"],
            "pinned_harness": pinned.fingerprint(),
            "n": settings[0].harness.n,
            "n_tasks": len(tasks),
            "settings": [setting.to_json() for setting in settings],
            "checkpoints": results,
            "reference": reference,
        }
        keys = metric_keys(settings)
        metrics = dvc_metrics(sweep, keys)
        with staged_outputs() as outputs:
            outputs.write_json(root / SENSITIVITY, sweep)
            outputs.write_json(root / SENSITIVITY_METRICS, metrics)
            outputs.write_bytes(root / SENSITIVITY_PNG, sensitivity_figure(
                figure_panels(sweep), pinned=PINNED,
                title=f"harness sweep on val: {len(tasks)} tasks, n={sweep['n']} per setting "
                      "(star: pinned; red: paired difference from it excludes 0)"))
        for line in summary_lines(sweep):
            print(line)

        mlflow_run.set_tags({"reference_verdict": reference["verdict"]})
        mlflow_run.log_params({
            "sensitivity.checkpoints": ",".join(config.checkpoints) or "-",
            "sensitivity.n": sweep["n"],
            "sensitivity.reference": str(config.reference)[:500],
            "sensitivity.reference_invariant_to": ",".join(invariant) or "-",
            **{f"sensitivity.fields.{field}": str(values)[:500]
               for field, values in config.fields.items()},
            **{f"setting.{keys[s.name]}": s.fingerprint[:12] for s in settings},
        })
        mlflow_run.log_metrics({"wall_s": wall_s, **{
            f"{arm}.{key}": value for arm, row in metrics.items() for key, value in row.items()}})
        for path in (SENSITIVITY, SENSITIVITY_METRICS, SENSITIVITY_PNG):
            mlflow_run.log_artifact(root / path, "sensitivity")
        log_split_input(mlflow_run, root, manifest, "val", tasks)
    return sweep


def sweep_arms(root: Path, params: dict[str, Any], config: SensitivityConfig,
               pinned: Harness) -> dict[str, dict[str, Any]]:
    """The chosen checkpoints' agent settings, then the reference's, each checked."""
    known = list(params.get("checkpoints") or {})
    arms: dict[str, dict[str, Any]] = {}
    for name in config.checkpoints:
        if name not in known or name == REFERENCE:
            why = ("names the reference's row" if name == REFERENCE else
                   f"is not a checkpoint; the checkpoints are {', '.join(known) or 'none'}")
            raise ParamsError(f"params.yaml: sensitivity.checkpoints: {name!r} {why}")
        arms[name] = checkpoint_settings(params, name)
    try:  # bad settings fail here, under their own name, before any episode runs
        make_agent(REFERENCE, config.reference, agent_context(pinned, root))
    except ParamsError as error:
        raise ParamsError(str(error).replace("params.yaml: checkpoints.reference",
                                             "params.yaml: sensitivity.reference")) from None
    arms[REFERENCE] = dict(config.reference)
    return arms


def setting_counts(root: Path, arms: dict[str, dict[str, Any]], tasks: list[Task],
                   settings: list[Setting], config: RolloutsConfig,
                   execute: ChunkExecutor | None) -> dict[str, dict[str, pd.DataFrame]]:
    """Each arm's per-task counts under each setting, every arm and setting under way at once;
    the episodes resume from the cache, keyed by the setting's harness fingerprint, so
    settings never share an episode."""
    jobs = [RolloutJob(f"sensitivity:{arm}@{setting.name}", agent, setting.harness)
            for arm, agent in arms.items() for setting in settings]
    progress = EpisodeProgress(f"sensitivity: {len(arms)} arms x {len(settings)} settings")
    rows = iter(roll_outs(root, jobs, tasks, config, progress, execute))
    return {arm: {setting.name: per_task_counts(rollout_table(arm, next(rows)))
                  for setting in settings} for arm in arms}


def compare_settings(counts: dict[str, pd.DataFrame], settings: list[Setting],
                     groups: dict[str, str] | None = None) -> dict[str, Any]:
    """One arm: each setting's pass@1 with its interval and where its episodes went, and its
    paired difference from the pinned setting (setting − pinned, per-task pass rates:
    difference_interval) with whether that interval excludes 0; both over the `groups` (task
    id to group) when the tasks have them."""
    rates = {name: (table["c"] / table["n"]).set_axis(table["task_id"])
             for name, table in counts.items()}
    pinned = rates[PINNED]
    rows: dict[str, Any] = {}
    for setting in settings:
        summary = summarize_checkpoint(counts[setting.name], [1], groups=groups)
        row = {"pass_at_1": summary["pass_at_1"], "episodes": summary["episodes"],
               **{rate: summary[rate] for rate in KEPT_RATES}}
        if setting.name != PINNED:
            mine = rates[setting.name].reindex(pinned.index)
            difference = difference_interval((mine - pinned).to_numpy(),
                                             groups=group_labels(pinned.index, groups))
            row.update(difference=difference.to_json(), excludes_zero=excludes_zero(difference))
        rows[setting.name] = row
    moves = {name: Interval.from_json(row["difference"]) for name, row in rows.items()
             if name != PINNED}
    largest = largest_move(moves)
    return {
        "settings": rows,
        "largest_move": None if largest is None else {
            "setting": largest, "difference": rows[largest]["difference"],
            "excludes_zero": rows[largest]["excludes_zero"]},
        "moved": [name for name in moves if rows[name]["excludes_zero"]],
    }


def metric_keys(settings: list[Setting]) -> dict[str, str]:
    """A name MLflow and `dvc metrics show` accept for each setting (`max_turns=2` →
    `max_turns_2`), unique."""
    keys: dict[str, str] = {}
    for setting in settings:
        key = re.sub(r"[^\w.\-]+", "_", setting.name).strip("_")[:60] or "setting"
        keys[setting.name] = key if key not in keys.values() else f"{key}_{len(keys)}"
    return keys


def dvc_metrics(sweep: dict[str, Any], keys: dict[str, str]) -> dict[str, dict[str, float]]:
    """metrics/sensitivity.json: one flat row per checkpoint and the reference."""
    arms = {**sweep["checkpoints"], REFERENCE: sweep["reference"]}
    table = {}
    for arm, result in arms.items():
        row: dict[str, float] = {}
        for name, setting in result["settings"].items():
            key = keys[name]
            row[f"pass_at_1.{key}"] = setting["pass_at_1"]["estimate"]
            if name != PINNED:
                row[f"difference.{key}"] = setting["difference"]["estimate"]
                row[f"moved.{key}"] = float(setting["excludes_zero"])
        largest = result["largest_move"]
        row["largest_move"] = 0.0 if largest is None else largest["difference"]["estimate"]
        row["settings_moved"] = float(len(result["moved"]))
        if arm == REFERENCE:
            row["stayed_put"] = float(result["verdict"] == "stayed put")
        table[arm] = {key: round(float(value), 6) for key, value in row.items()}
    return table


def figure_panels(sweep: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    arms = {**sweep["checkpoints"], f"{REFERENCE} ({sweep['reference']['verdict']})":
            sweep["reference"]}
    return {arm: [{"setting": name, **{k: row["pass_at_1"][k] for k in ("estimate", "low",
                                                                         "high")},
                   "moved": row.get("excludes_zero", False)}
                  for name, row in result["settings"].items()]
            for arm, result in arms.items()}


def summary_lines(sweep: dict[str, Any]) -> list[str]:
    """One line per checkpoint and the reference: its largest move from the pinned setting."""
    lines = []
    for arm, result in {**sweep["checkpoints"], REFERENCE: sweep["reference"]}.items():
        pinned = result["settings"][PINNED]["pass_at_1"]["estimate"]
        largest = result["largest_move"]
        if largest is None:
            move = "no setting but the pinned one"
        else:
            d = largest["difference"]
            move = (f"largest move {largest['setting']}: {100 * d['estimate']:+.1f} points "
                    f"[{100 * d['low']:+.1f}, {100 * d['high']:+.1f}], "
                    + ("beyond its interval" if largest["excludes_zero"] else "within noise"))
        verdict = f"; {result['verdict']}" if arm == REFERENCE else ""
        lines.append(f"sensitivity: {arm}: pinned pass@1 {100 * pinned:.1f}%, {move}; "
                     f"{len(result['moved'])} of {len(result['settings']) - 1} settings "
                     f"moved{verdict}")
    return lines
