"""Stage `score`: every checkpoint's val rollouts → per-task counts and every estimator, after
the harness canaries have shown the sandbox can tell right from wrong."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.agents.canaries import STACKER_CANDIDATES, stacker_expected_passes
from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.episode import plan_episodes
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutJob, RolloutsConfig, roll_outs
from heldout.episodes.rows import FAILURES, rollout_table
from heldout.errors import StageError
from heldout.files import staged_outputs
from heldout.report.effort import CLOCKS, MEASURES
from heldout.report.figures import checkpoints_pass_at_k_figure
from heldout.statistics.counts import (
    CanaryError,
    ScoreConfig,
    canaries_failed,
    canary_failures,
    check_comparable,
    combine_counts,
    describe_canary_failures,
    per_task_counts,
    stacker_failures,
    summarize_checkpoint,
)
from heldout.statistics.public_hidden import AlarmConfig, gap_alarm, gap_counts, summarize_gap
from heldout.tasks.sources import load_tasks
from stages.catalog import (
    PASSK_CSV,
    PASSK_PNG,
    PER_TASK,
    SCORES,
    VAL_METRICS,
    rollout_file,
    split_file,
    val_metrics_file,
)
from stages.common import (
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
from stages.val_effort import effort_record, val_effort
from stages.val_grader import grader_reasons

# The candidates are in the stacker's settings, so its cached episodes are keyed by them.
CANARIES = {"oracle": {"agent": "oracle"}, "blind": {"agent": "blind"},
            "stacker": {"agent": "stacker", "candidates": STACKER_CANDIDATES}}
# What scoring reads of a rollout file. The completions and their hashes, most of its bytes,
# are left on disk; the strings that repeat down the rows are read dictionary-encoded (as
# categoricals), so a million episodes take a few MB instead of a few hundred.
SCORED_COLUMNS = ["checkpoint", "task_id", "harness", "passed", "public_passed", "status"]
REPEATED_STRINGS = ["checkpoint", "task_id", "harness", "status"]


def read_rollouts(root: Path, checkpoints: list[str]) -> dict[str, pd.DataFrame]:
    """Each checkpoint's episodes, the columns scoring needs only."""
    tables = {}
    for name in checkpoints:
        path = root / rollout_file(name)
        if not path.is_file():
            raise StageError(f"{path}: missing; run the rollouts of '{name}' first (dvc repro)")
        tables[name] = pd.read_parquet(path, columns=SCORED_COLUMNS,
                                       read_dictionary=REPEATED_STRINGS)
    return tables


def run_canaries(
    root: Path, params: dict[str, Any], harness: Harness, execute: ChunkExecutor | None = None
) -> tuple[dict[str, Any], float]:
    """Oracle, blind and stacker, one episode per val task, through the same harness and
    sandbox, and on the same executor as the rollouts (`execute`: the flow's task runner,
    threads or Dask): what they showed, and the seconds their episodes took (for MLflow only: a
    wall-clock number in val.json would change the scores' digest, and so the selection's, on
    every run)."""
    config = section(params, "rollouts", RolloutsConfig)
    tasks = eval_view(root, "val", load_tasks(root / split_file("val")))
    single = harness.model_copy(update={"n": 1})
    progress = EpisodeProgress(f"canaries: {', '.join(CANARIES)}")
    rows = roll_outs(root, [RolloutJob(f"canary:{name}", settings, single)
                            for name, settings in CANARIES.items()],
                     tasks, config, progress, execute)
    tables = {name: rollout_table(name, its_rows)
              for name, its_rows in zip(CANARIES, rows, strict=True)}
    counts = {name: per_task_counts(tables[name]) for name in ("oracle", "blind")}
    episodes_s = progress.elapsed()
    failures = canary_failures(counts["oracle"], counts["blind"])
    # The stacker's expectation, from its hashes before any verdict: the episodes whose
    # submitted guess is the reference. Tasks the oracle failed (or the blind agent passed) are
    # left out of it, and reported by those canaries instead, first in the message.
    expected = stacker_expected_passes(
        ((e.task, e.sample, e.seed) for e in plan_episodes(tasks, single)), single.tools,
        single.max_turns, single.max_tool_calls, CANARIES["stacker"]["candidates"])
    return {
        "oracle_pass_rate": float(counts["oracle"]["c"].sum() / counts["oracle"]["n"].sum()),
        "blind_pass_rate": float(counts["blind"]["c"].sum() / counts["blind"]["n"].sum()),
        **failures,
        **stacker_failures(tables["stacker"], expected, failures),
    }, episodes_s


def run(root: Path | None = None, execute: ChunkExecutor | None = None) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    harness = section(params, "harness", Harness)
    checkpoints = list(params.get("checkpoints") or {})
    ks = section(params, "score", ScoreConfig).ks(harness.n)  # refused before any canary runs
    manifest = read_manifest(root)
    with tracked_stage(root, params, "score", "score") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest) | {"harness": harness.fingerprint()})
        canaries, canary_episodes_s = run_canaries(root, params, harness, execute)
        mlflow_run.log_metrics({
            "canary_oracle_pass_rate": canaries["oracle_pass_rate"],
            "canary_blind_pass_rate": canaries["blind_pass_rate"],
            **{f"canary_{key}": canaries[key] for key in (
                "stacker_pass_rate", "stacker_expected_rate", "stacker_passes",
                "stacker_expected")},
            "canary_episodes_s": canary_episodes_s})
        if canaries_failed(canaries):
            raise CanaryError(describe_canary_failures(canaries))

        rollouts = read_rollouts(root, checkpoints)
        check_comparable(rollouts, harness.fingerprint())
        # Counted file by file: concatenated, categoricals of different files turn into
        # Python strings, one per episode.
        counts = combine_counts(per_task_counts(table) for table in rollouts.values())
        # Every interval rests on the val tasks' groups (the split key): tasks of one group
        # rise and fall together, so they count as one unit, not several.
        val_tasks = load_tasks(root / split_file("val"))
        groups = {task.id: task.group for task in val_tasks}
        summaries = {
            name: summarize_checkpoint(counts[counts["checkpoint"] == name], ks, groups=groups)
            for name in checkpoints
        }
        efforts = val_effort(root, checkpoints, params.get("base"),
                             sorted(counts["task_id"].unique()), groups)
        for name, effort in efforts.items():
            summaries[name]["effort"] = effort_record(effort)
        for name, reason in grader_reasons(root, checkpoints).items():
            summaries[name]["grader_reason"] = reason
            if reason and reason["voids"]:
                print(f"score: VOID {name}: {reason['says']}: a broken grader, not a score "
                      "(the report voids a verdict on it)")
        gaps = {name: gap_counts(table) for name, table in rollouts.items()}
        for name in checkpoints:
            gap = summarize_gap(gaps[name], groups=groups)
            summaries[name]["public_hidden"] = None if gap is None else gap.to_json()
        alarms = public_hidden_alarms(gaps, params.get("base"),
                                      section(params, "alarm", AlarmConfig), groups)
        scores = {
            "split": "val",
            "val_digest": manifest["digests"]["val"],
            "harness": harness.fingerprint(),
            "base": params.get("base"),
            "checkpoints": summaries,
            "canaries": canaries,
            "alarms": alarms,
        }
        for name, alarm in alarms.items():
            if alarm["fired"]:
                print(f"score: ALARM {name}: {alarm['reason']}")
        curves = {name: {int(k): v for k, v in s["pass_at_k"].items()}
                  for name, s in summaries.items()}
        with staged_outputs() as outputs:
            outputs.write_json(root / SCORES, scores)
            counts.to_parquet(outputs.path(root / PER_TASK), index=False)
            for name, row in dvc_metrics(summaries).items():
                outputs.write_json(root / val_metrics_file(name), row)
            outputs.write_bytes(root / PASSK_CSV, passk_csv(curves).encode())
            outputs.write_bytes(root / PASSK_PNG, checkpoints_pass_at_k_figure(
                curves, title=f"val pass@k, {summaries[checkpoints[0]]['n_tasks']} tasks, "
                              f"n = {harness.n}: read at k ≤ n/2",
                highlight=params.get("base")))
        remove_other_metrics(root, checkpoints)

        for name, summary in summaries.items():
            mlflow_run.log_metrics(flat_metrics(summary, prefix=f"{name}."))
        # The clocks, kept out of the scores' files (stages/val_effort.py), are logged here.
        mlflow_run.log_metrics({f"{name}.{row.measure}": row.candidate
                                for name, effort in efforts.items() for row in effort.rows
                                if row.measure in CLOCKS})
        for path in (SCORES, PER_TASK, PASSK_CSV, PASSK_PNG):
            mlflow_run.log_artifact(root / path, "scores")
        mlflow_run.log_artifact(root / VAL_METRICS, "scores/metrics")
        log_split_input(mlflow_run, root, manifest, "val", val_tasks)
    return scores


def public_hidden_alarms(gaps: dict[str, pd.DataFrame], base: str | None,
                         config: AlarmConfig, groups: dict[str, str] | None = None,
                         ) -> dict[str, dict[str, Any]]:
    """The alarm of each checkpoint but the base, where both have tasks with public tests;
    `groups` maps task id to group."""
    if base not in gaps:
        return {}
    alarms = {name: gap_alarm(gap, gaps[base], config, groups=groups)
              for name, gap in gaps.items() if name != base}
    return {name: alarm.to_json() for name, alarm in alarms.items() if alarm is not None}


def flat_metrics(summary: dict[str, Any], prefix: str = "") -> dict[str, float]:
    interval = summary["pass_at_1"]
    metrics = {
        "pass_at_1": interval["estimate"], "pass_at_1_low": interval["low"],
        "pass_at_1_high": interval["high"],
        **{f"pass_at_{k}": v for k, v in summary["pass_at_k"].items() if k != "1"},
        **{f"pass_hat_{k}": v for k, v in summary["pass_hat_k"].items() if k != "1"},
        "failure_capable": summary["failure_capable"], "all_fail": summary["all_fail"],
        "error_rate": summary["error_rate"], "truncation_rate": summary["truncation_rate"],
        "budget_rate": summary["budget_rate"],
    }
    for measure, row in (summary.get("effort") or {"measures": {}})["measures"].items():
        metrics[measure] = row["mean"]
        if row["ratio"] is not None:
            metrics[f"{measure}_ratio"] = row["ratio"]
    gap = summary.get("public_hidden")
    if gap is not None:
        metrics |= {"public_pass": gap["public_pass"]["estimate"],
                    "hidden_pass_on_public_tasks": gap["hidden_pass"]["estimate"],
                    "public_not_hidden": gap["gap"]["estimate"]}
    return {prefix + key: float(value) for key, value in metrics.items()}


# `dvc metrics show` draws one row per metrics file and one column per key of all the files
# together: so one file per checkpoint (metrics/val/<name>.json) and short keys. They are
# MLflow's names (flat_metrics) in the field's notation, pass@k and pass^k (every one of k
# episodes passes), each failure rate under its row status (error, truncated, budget), and the
# tasks failed at least once (failure_capable) or every time as any_fail and all_fail. Of the
# effort, only the output tokens against the base's (tokens_x): a column per measure would take
# the table past 200 characters; the scores and MLflow hold every measure.
DVC_KEYS = {"pass_at_1_low": "pass@1_lo", "pass_at_1_high": "pass@1_hi",
            "failure_capable": "any_fail", "hidden_pass_on_public_tasks": "hidden_on_public",
            "tokens_out_ratio": "tokens_x",
            **{failure.rate: failure.status for failure in FAILURES}}
DVC_LEFT_OUT = {key for measure, _words in MEASURES for key in (measure, f"{measure}_ratio")
                if key != "tokens_out_ratio"}
DVC_KEY_PREFIXES = {"pass_at_": "pass@", "pass_hat_": "pass^"}
DVC_COUNTS = {"failure_capable", "all_fail"}  # tasks, not rates


def dvc_key(name: str) -> str:
    if name in DVC_KEYS:
        return DVC_KEYS[name]
    for prefix, short in DVC_KEY_PREFIXES.items():
        if name.startswith(prefix):
            return short + name.removeprefix(prefix)
    return name


def dvc_metrics(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Each checkpoint's row of `dvc metrics show`, by checkpoint."""
    return {name: {dvc_key(k): int(v) if k in DVC_COUNTS else round(v, 6)
                   for k, v in flat_metrics(s).items() if k not in DVC_LEFT_OUT}
            for name, s in summaries.items()}


def remove_other_metrics(root: Path, checkpoints: list[str]) -> None:
    """Rows of checkpoints no longer in params (DVC clears the folder before the stage runs,
    a run outside DVC does not)."""
    keep = {root / val_metrics_file(name) for name in checkpoints}
    for path in (root / VAL_METRICS).glob("*.json"):
        if path not in keep:
            path.unlink()


def passk_csv(curves: dict[str, dict[int, float]]) -> str:
    """Long table, one row per (checkpoint, k): `dvc plots show` draws a line per checkpoint
    (the passk template, .dvc/plots/passk.json), whatever the checkpoints are called."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["checkpoint", "k", "pass_at_k"])
    writer.writerows([name, k, f"{value:.6f}"]
                     for name, curve in curves.items() for k, value in sorted(curve.items()))
    return out.getvalue()
