"""Stage `test`: the only code that opens the test split, once, under heldout.custody.lock.TestLock.

Candidate (the selection's choice) and base run on the test split under the same harness with
the same seeds. Every attempt is a ledger line and an MLflow run tagged heldout.test_access.
The episodes themselves (completions, trajectories and error texts included) leave this stage
sealed for the test key; the rollout files hold outcomes only, no text derived from the hidden
tests (heldout.episodes.rows.outcome_table), and no wall-clock: each episode's timings go to a file
of their own (stages.access_record.TIMINGS, not a DVC output) and to MLflow, so the same
results are the same bytes and dvc.lock does not change with the clock. Outputs already holding
this access's closed results are not an access: the stage ends without opening the split
(stages.access_record.recorded_results)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.canonical import content_digest
from heldout.custody.access_params import TestConfig
from heldout.custody.history import accesses, models_evaluated
from heldout.custody.identity import ParamsReads
from heldout.custody.keys import CustodyConfig, opening_key, require_team_key
from heldout.custody.ledger import LedgerStore, read_ledger
from heldout.custody.lock import TestLock, refuse
from heldout.custody.restage import ledger_staged_if_written
from heldout.custody.seal import seal
from heldout.custody.spend import spend_refusal, spent_reason
from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutJob, roll_outs
from heldout.episodes.rows import TIMING_COLUMNS, outcome_table, rollout_table
from heldout.files import json_bytes, staged_outputs
from heldout.report.closing import closing_verdict
from heldout.report.effort import CLOCKS, effort_section
from heldout.report.inputs import read_rollouts
from heldout.report.sections import PerArm
from heldout.statistics.counts import pool_runs
from heldout.statistics.timing import interleaved, span
from heldout.tasks.families import access_families
from stages.access_inputs import access_inputs
from stages.access_record import (
    ARMS,
    TIMINGS,
    file_digests,
    parquet_bytes,
    read_reruns,
    recorded_results,
    timings_table,
    without_timings,
)
from stages.catalog import (
    ACCESS,
    LEDGER,
    RERUNS,
    SEALED_TEST_EPISODES,
    test_rollout_file,
)
from stages.common import (
    git_commit,
    log_split_input,
    project_root,
    protocol_tags,
    read_params,
    section,
    sweep_experiment,
    tracked_stage,
    val_scores_digest,
)
from stages.progress import EpisodeProgress, speed_metrics
from stages.test_oracle import oracle_passes
from stages.test_recipes import evaluate_recipes
from stages.val_plan import spend_plan


def runs_interleaved(base: list[pd.DataFrame], candidate: list[pd.DataFrame]) -> bool | None:
    """Whether the arms' runs interleaved in time, or None where an episode (one resumed from
    a cache older than its clock) does not say when it started."""
    spans = [span(pd.concat([table["started_at"] for table in runs])) for runs in (base,
                                                                                 candidate)]
    return None if None in spans else interleaved(*spans)


def not_in_a_sweep(experiment: str) -> str:
    """The line a sweep's test stage prints instead of opening the test split."""
    return (f"test: not run in experiment {experiment}: a sweep (`dvc exp run`) ends at "
            "`select` and the test split stays closed (nothing opened, nothing recorded). To "
            f"run the test in an experiment, name it: dvc exp run -n {experiment} -S "
            f"test.experiment={experiment}")


def check_selection(root: Path, selection: dict, manifest: dict, harness: Harness) -> str | None:
    """Why this selection must not open the test split, or None."""
    if selection["val_scores_digest"] != val_scores_digest(root):
        return ("the selection was computed from other val scores than the current ones: "
                "re-run `select` (dvc repro) so the choice and the scores agree")
    if selection["test_version"] != manifest["test_version"]:
        return (f"the selection was made for test set {selection['test_version']}, the split "
                f"now holds {manifest['test_version']}")
    if selection["harness"] != harness.fingerprint():
        return (f"the selection was made under harness {selection['harness'][:12]}, the "
                f"params now pin {harness.fingerprint()[:12]}")
    return None


def result_digest(tables: dict[str, Any]) -> str:
    """The outcome of the access, independent of wall-clock columns, so a resumed access that
    reaches the same results closes with the same digest."""
    return content_digest({arm: table.drop(columns=list(TIMING_COLUMNS)).to_dict("records")
                           for arm, table in tables.items()})


def episodes_parquet(tables: dict[str, Any]) -> bytes:
    """Both arms' whole episodes but their timings, as one Parquet file's bytes (to be sealed:
    sealing is deterministic, so the same episodes seal to the same bytes)."""
    return parquet_bytes(without_timings(pd.concat(tables.values(), ignore_index=True)))


def run(root: Path | None = None, execute: ChunkExecutor | None = None) -> dict[str, Any]:
    root = project_root(root)
    # Every params value this stage reads is recorded and goes into the access's identity
    # (heldout.custody.identity); nothing reads params.yaml here but through it.
    params = ParamsReads(read_params(root))
    experiment = sweep_experiment(section(params, "test", TestConfig).experiment)
    if experiment:
        # Before the key, the ledger or an MLflow run: a sweep attempts no access. The outputs
        # stay the last access's, so the experiment's dvc.lock names those.
        print(not_in_a_sweep(experiment))
        return {"not_run": experiment}
    # Whatever the access writes to the ledger is staged for the commit that anchors it.
    with ledger_staged_if_written(root, say=lambda line: print(f"test: {line}")):
        return open_access(root, params, execute)


def open_access(root: Path, params: ParamsReads, execute: ChunkExecutor | None
                ) -> dict[str, Any]:
    """The access itself: the key, the lock, both arms' runs under paired seeds, the close."""
    test_key = opening_key(section(params, "custody", CustodyConfig))
    require_team_key(LedgerStore.open(root), test_key)  # a key the store does not know: refused
    inputs = access_inputs(root, params)
    harness, config, test_config = inputs.harness, inputs.rollouts, inputs.test
    reaccess, reruns_config = test_config.reaccess, inputs.reruns
    manifest, selection, names, settings = (inputs.manifest, inputs.selection, inputs.names,
                                            inputs.settings)
    excluded, identity, key = inputs.excluded, inputs.identity, inputs.key
    # Reading results is not an access: outputs already holding this access's closed results
    # (pulled from a DVC remote, or left by the last run) end the stage here, before any MLflow
    # run or ledger line.
    recorded = recorded_results(root, key.access_id, read_ledger(root / LEDGER), test_key)
    if recorded is not None:
        print(f"test: the outputs hold access {key.access_id[:12]}'s results, closed in the "
              "ledger; reading them is not an access: nothing opened, nothing recorded")
        return recorded

    with tracked_stage(root, params, "test", "test") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest) | {
            "test_access": "true", "access_id": key.access_id, "harness": key.harness,
            "candidate": key.candidate, "base": key.base})
        commit = git_commit(root)
        why_not = check_selection(root, selection, manifest, harness)
        plan = None if why_not else spend_plan(root, inputs)
        why_not = why_not or spend_refusal(plan, names["candidate"], test_config.spend)
        if why_not:
            refuse(root, key, why_not, mlflow_run_id=mlflow_run.run_id, git_commit=commit)
        lock = TestLock(root, key, manifest, test_key=test_key, identity=identity,
                        excluded=excluded, selection_digest=selection["val_scores_digest"],
                        git_commit=commit,
                        reason=reaccess.reason, reason_for=reaccess.access,
                        spend=spent_reason(plan, names["candidate"], test_config.spend),
                        mlflow_run_id=mlflow_run.run_id,
                        mlflow_experiment_id=mlflow_run.experiment_id)
        with ExitStack() as held:
            try:
                held.enter_context(lock)
            except BaseException:
                if not lock.recorded:
                    # Stopped before a ledger line named this run (a wrong key, a missing or
                    # damaged split): it must not stand in MLflow as an access nobody recorded.
                    mlflow_run.set_tags({"test_access": "false",
                                         "test_access_stopped": "before the lock recorded it"})
                raise
            mlflow_run.set_tags({"test_outcome": lock.outcome})
            tasks = lock.read_tasks()
            log_split_input(mlflow_run, root, manifest, "test", tasks)
            # The drift's reruns belong to this access: the same frozen set, new seeds, run r
            # of both arms under the same ones and under way at once (a slow episode of one
            # holds up the other's none), run after run, so that each arm's episodes span the
            # access and a drifting server moves both alike.
            runs: dict[str, list[pd.DataFrame]] = {arm: [] for arm in ARMS}
            episodes_s = 0.0
            speed_metrics()  # what came before this access is not its own
            for rerun in range(max(1, reruns_config.runs)):
                progress = EpisodeProgress(
                    f"test:{names['candidate']} against {names['base']}, run {rerun + 1} of "
                    f"{max(1, reruns_config.runs)}")
                jobs = [RolloutJob(f"test:{names[arm]}" + (f":rerun{rerun}" if rerun else ""),
                                   settings[arm], reruns_config.harness(harness), rerun)
                        for arm in ARMS]
                rows = roll_outs(root, jobs, tasks, config, progress, execute,
                                 sealing_key=test_key.derive("episodes"))
                for arm, its_rows in zip(ARMS, rows, strict=True):
                    runs[arm].append(rollout_table(names[arm], its_rows))
                episodes_s += progress.elapsed()
            every_run = {f"{arm}:rerun{number}" if number else arm: table
                         for arm in ARMS for number, table in enumerate(runs[arm])}
            shown_passable = oracle_passes(root, tasks, harness, config, execute,
                                           test_key.derive("episodes"))
            recipes, seed_tables = (evaluate_recipes(
                root, tasks, inputs.recipes, inputs.recipe_settings, harness, config,
                execute, test_key.derive("episodes")) if inputs.recipes.root else (None, {}))
            speed = speed_metrics()
            digest = result_digest(every_run | seed_tables)
            entries = read_ledger(root / LEDGER)
            opened = accesses(entries, key.test_version, key.content_version)
            access = {
                **key.__dict__, "access_id": key.access_id, "resumed": lock.resumed,
                "reason": lock.reason, "result_digest": digest,
                "mlflow_run_id": mlflow_run.run_id,
                "accesses_of_this_test_version": len(opened),
                "models_evaluated_on_it": models_evaluated(entries, key.test_version,
                                                           key.content_version),
                "predecessor": lock.context.get("predecessor"),
                "tasks_seen_before": lock.seen_before,
                "tasks": len(tasks),
                # The report breaks results down by group without opening the test split.
                "groups": {t.id: t.group for t in tasks},
                # And by family, when the split held families out (the report's by_family).
                **access_families(manifest, tasks),
                # What splits the report's both-fail ties: tasks shown passable, and by what.
                "shown_passable": shown_passable,
                # What the report's by_date splits by, as this access ran: each test task's
                # release date and each arm's data cutoff (its digest is in the closed line,
                # so no later edit of a task file or params moves that split).
                "dates": {"released": {t.id: t.released for t in tasks if t.released},
                          "data_cutoff": {arm: settings[arm].get("data_cutoff")
                                          for arm in ARMS}},
                # Each recipe seed's passes per task (stages/test_recipes.py), when params
                # names recipes: the report's recipe verdict, drawn from this access.
                **({"recipes": recipes} if recipes else {}),
                "identity": identity,
            }
            pooled_base, pooled_candidate, measured = pool_runs(runs["base"], runs["candidate"])
            tables = {"base": pooled_base, "candidate": pooled_candidate}
            rerun_record = {
                "runs": len(runs["base"]) if measured else 0,
                "checkpoints": names,
                "pass_at_1": {"base": list(measured.base), "candidate": list(measured.candidate)}
                if measured else None,
                "samples_per_run": measured.samples_per_run if measured else None,
                "episodes_per_run": reruns_config.harness(harness).n,
                # From the episodes' clocks, which the rollout files leave out.
                "interleaved": runs_interleaved(runs["base"], runs["candidate"]),
            }
            results = {RERUNS: json_bytes(rerun_record),
                       SEALED_TEST_EPISODES: seal(episodes_parquet(tables | seed_tables),
                                                  test_key.public),
                       **{test_rollout_file(arm): parquet_bytes(without_timings(
                           outcome_table(table))) for arm, table in tables.items()}}
            access["outputs"] = file_digests(results)
            with staged_outputs() as outputs:
                for path, data in results.items():
                    outputs.write_bytes(root / path, data)
                outputs.write_bytes(root / TIMINGS, parquet_bytes(timings_table(every_run)))
                outputs.write_json(root / ACCESS, access)
            # Decided from the files just written, as the report will read them, and fixed
            # with the access: a later report re-draws it, never re-decides it silently.
            verdict = closing_verdict(
                *(read_rollouts(root / test_rollout_file(arm)) for arm in ("base", "candidate")),
                groups=access["groups"], reruns=read_reruns(root))
            verdict["dates_digest"] = content_digest(access["dates"])
            if "families" in access:  # bound to the access as the groups are
                verdict["families_digest"] = content_digest(access["families"])
            lock.close(digest, access["outputs"], verdict)
        mlflow_run.log_metrics({f"{arm}_episode_pass_rate": float(t["passed"].mean())
                                for arm, t in tables.items()}
                               | {"accesses_of_this_test_version": len(opened),
                                  "tasks_seen_before": lock.seen_before,
                                  "episodes_s": episodes_s} | speed)
        # The clocks the result files leave out (the same results are the same bytes), as the
        # report's effort gives every other measure: each arm's mean and their difference.
        mlflow_run.log_metrics({f"effort.{name}": value for name, value in effort_section(
            PerArm(tables["base"], tables["candidate"]), sorted(access["groups"]),
            access["groups"]).metrics().items() if any(clock in name for clock in CLOCKS)})
        if rerun_record["pass_at_1"]:
            mlflow_run.log_metrics({f"{arm}_run_{number}_pass_at_1": score
                                    for arm, scores in rerun_record["pass_at_1"].items()
                                    for number, score in enumerate(scores)})
        for path in (*map(test_rollout_file, ARMS), ACCESS, RERUNS, TIMINGS):
            mlflow_run.log_artifact(root / path, "test")
    return access
