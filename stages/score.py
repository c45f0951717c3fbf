"""Stage `score`: every checkpoint's val rollouts → per-task counts and every estimator, after
the harness canaries have shown the sandbox can tell right from wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig, roll_out
from heldout.episodes.rows import rollout_table
from heldout.errors import StageError
from heldout.files import staged_outputs
from heldout.report.figures import checkpoints_pass_at_k_figure
from heldout.statistics.counts import (
    CanaryError,
    canary_failures,
    check_comparable,
    combine_counts,
    default_ks,
    describe_canary_failures,
    per_task_counts,
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

CANARIES = {"oracle": {"agent": "oracle"}, "blind": {"agent": "blind"}}
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
    root: Path, params: dict[str, Any], harness: Harness
) -> tuple[dict[str, Any], float]:
    """Oracle and blind, one episode per val task, through the same harness and sandbox: what
    they showed, and the seconds their episodes took (for MLflow only: a wall-clock number in
    val.json would change the scores' digest, and so the selection's, on every run)."""
    config = section(params, "rollouts", RolloutsConfig)
    tasks = eval_view(root, "val", load_tasks(root / split_file("val")))
    single = harness.model_copy(update={"n": 1})
    counts, episodes_s = {}, 0.0
    for name, settings in CANARIES.items():
        progress = EpisodeProgress(f"canary:{name}")
        rows = roll_out(root, f"canary:{name}", settings, tasks, single, config, progress)
        counts[name] = per_task_counts(rollout_table(name, rows))
        episodes_s += progress.elapsed()
    failures = canary_failures(counts["oracle"], counts["blind"])
    return {
        "oracle_pass_rate": float(counts["oracle"]["c"].sum() / counts["oracle"]["n"].sum()),
        "blind_pass_rate": float(counts["blind"]["c"].sum() / counts["blind"]["n"].sum()),
        **failures,
    }, episodes_s


def run(root: Path | None = None) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    harness = section(params, "harness", Harness)
    checkpoints = list(params.get("checkpoints") or {})
    manifest = read_manifest(root)
    with tracked_stage(root, params, "score", "score") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest) | {"harness": harness.fingerprint()})
        canaries, canary_episodes_s = run_canaries(root, params, harness)
        mlflow_run.log_metrics({"canary_oracle_pass_rate": canaries["oracle_pass_rate"],
                                "canary_blind_pass_rate": canaries["blind_pass_rate"],
                                "canary_episodes_s": canary_episodes_s})
        if canaries["oracle_failed"] or canaries["blind_passed"]:
            raise CanaryError(describe_canary_failures(canaries))

        rollouts = read_rollouts(root, checkpoints)
        check_comparable(rollouts, harness.fingerprint())
        # Counted file by file: concatenated, categoricals of different files turn into
        # Python strings, one per episode.
        counts = combine_counts(per_task_counts(table) for table in rollouts.values())
        ks = default_ks(harness.n)
        summaries = {
            name: summarize_checkpoint(counts[counts["checkpoint"] == name], ks)
            for name in checkpoints
        }
        gaps = {name: gap_counts(table) for name, table in rollouts.items()}
        for name in checkpoints:
            gap = summarize_gap(gaps[name])
            summaries[name]["public_hidden"] = None if gap is None else gap.to_json()
        alarms = public_hidden_alarms(gaps, params.get("base"), section(params, "alarm",
                                                                         AlarmConfig))
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
            outputs.write_json(root / VAL_METRICS, dvc_metrics(summaries))
            outputs.write_bytes(root / PASSK_CSV, passk_csv(curves).encode())
            outputs.write_bytes(root / PASSK_PNG, checkpoints_pass_at_k_figure(
                curves, title=f"val pass@k, {summaries[checkpoints[0]]['n_tasks']} tasks",
                highlight=params.get("base")))

        for name, summary in summaries.items():
            mlflow_run.log_metrics(flat_metrics(summary, prefix=f"{name}."))
        for path in (SCORES, PER_TASK, VAL_METRICS, PASSK_CSV, PASSK_PNG):
            mlflow_run.log_artifact(root / path, "scores")
        log_split_input(mlflow_run, root, manifest, "val", load_tasks(root / split_file("val")))
    return scores


def public_hidden_alarms(gaps: dict[str, pd.DataFrame], base: str | None,
                         config: AlarmConfig) -> dict[str, dict[str, Any]]:
    """The alarm of each checkpoint but the base, where both have tasks with public tests."""
    if base not in gaps:
        return {}
    alarms = {name: gap_alarm(gap, gaps[base], config)
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
    gap = summary.get("public_hidden")
    if gap is not None:
        metrics |= {"public_pass": gap["public_pass"]["estimate"],
                    "hidden_pass_on_public_tasks": gap["hidden_pass"]["estimate"],
                    "public_not_hidden": gap["gap"]["estimate"]}
    return {prefix + key: float(value) for key, value in metrics.items()}


def dvc_metrics(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {name: {k: round(v, 6) for k, v in flat_metrics(s).items()}
            for name, s in summaries.items()}


def passk_csv(curves: dict[str, dict[int, float]]) -> str:
    """Wide table, one column per checkpoint: what `dvc plots show/diff` draws."""
    ks = sorted({k for curve in curves.values() for k in curve})
    lines = [",".join(["k", *curves])]
    lines += [",".join([str(k), *(f"{curves[n].get(k, float('nan')):.6f}" for n in curves)])
              for k in ks]
    return "\n".join(lines) + "\n"

