"""Stage `report`: the single test access → reports/report.{md,html,json}, figures and
metrics/test.json: candidate against base, paired, with the protocol card."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from heldout.canonical import content_digest, sha256_hex
from heldout.contamination.report import leak_methods
from heldout.custody.access_params import TestConfig
from heldout.custody.history import accesses, models_evaluated
from heldout.custody.ledger import read_ledger
from heldout.environment import in_experiment_copy
from heldout.episodes.harness import Harness
from heldout.errors import StageError
from heldout.files import staged_outputs
from heldout.report import (
    Decontamination,
    build_report,
    headline_markdown,
    read_rollouts,
    stage_report,
)
from heldout.report.by_date import ReleaseDates, recorded_dates
from heldout.report.closing import redrawn, verdict_record
from heldout.report.dvc_view import test_metrics
from heldout.report.families import recorded_families
from heldout.report.recipe import (
    recipe_from_access,
    recipe_metrics,
    recipe_note,
    write_recipe_report,
)
from heldout.report.slices import Passable
from heldout.report.sweep import sweep_report_files
from heldout.statistics.judge_trust import JudgeConfig
from heldout.tasks.families import group_words, split_kind
from stages.access_record import read_reruns
from stages.catalog import (
    ACCESS,
    DECONTAM_REPORT,
    LEDGER,
    RECIPE_REPORT,
    REPORTS,
    RERUNS,
    SCORES,
    SELECTION,
    TEST_METRICS,
    test_rollout_file,
)
from stages.common import (
    EXPERIMENT_ENV,
    git_commit,
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    sweep_experiment,
    tracked_stage,
)
from stages.report_judge import judge_trust_inputs, judged_record
from stages.reruns import RerunsConfig
from stages.val_grader import grader_gates


def protocol_card(root: Path, manifest: dict, harness: Harness, access: dict) -> dict[str, Any]:
    """Everything a reader needs to know how the numbers were made and how spent the test
    set is."""
    entries = read_ledger(root / LEDGER)
    test_set = (manifest["test_version"], manifest.get("test_content_version"))
    opened = accesses(entries, *test_set)
    return {
        "tasks": {"source": manifest["source"], "digest": manifest["source_digest"],
                  "count": sum(manifest["counts"].values())},
        "split": {"salt": manifest["salt"], "fractions": manifest["fractions"],
                  "test_version": manifest["test_version"], "digests": manifest["digests"],
                  "kind": split_kind(manifest), "group": group_words(manifest),
                  **({"families": manifest["families"]} if "families" in manifest else {})},
        "harness": {"fingerprint": harness.fingerprint(), **harness.model_dump(mode="json"),
                    "sandbox": harness.sandbox.in_effect()},
        "selection": json.loads((root / SELECTION).read_text(encoding="utf-8")),
        "test_access": {
            "test_version": manifest["test_version"],
            "opened": len(opened),
            "models_evaluated": models_evaluated(entries, *test_set),
            "ledger": str(LEDGER),
            "this_access": access["access_id"],
            "tasks_seen_before": access.get("tasks_seen_before", 0),
            **_test_runs(root, harness),
        },
    }


def _test_runs(root: Path, harness: Harness) -> dict[str, int]:
    """How the test access ran its episodes: R paired runs of each arm, n per task in each."""
    record = json.loads((root / RERUNS).read_text(encoding="utf-8"))
    return {"runs": max(1, record["runs"]),
            "episodes_per_run": record.get("episodes_per_run") or harness.n}


def oracle_passable(access: dict[str, Any]) -> Passable | None:
    """The test tasks the reference solutions passed inside the access; None for an access
    recorded before they were run (its report says "not known")."""
    if "shown_passable" not in access:
        return None
    return Passable(frozenset(access["shown_passable"]),
                    "the reference solutions (the oracle, run on the test tasks in this access)")


def read_decontamination(root: Path) -> Decontamination:
    """The test items a training corpus holds a copy of, as the decontaminate stage found
    them, and those its policy excluded before the test rollouts."""
    found = json.loads((root / DECONTAM_REPORT).read_text(encoding="utf-8"))
    return Decontamination(policy=found["policy"], flagged=leak_methods(found, "test"),
                           excluded=found["excluded_eval_ids"]["test"],
                           channels=found.get("channels") or ())


def closed_access(root: Path, access: dict[str, Any]) -> dict[str, Any]:
    """The ledger's `closed` line of the access data/test/access.json names, after checking
    that the files the report reads are the ones it recorded; else a StageError: a report is
    drawn from an access's own results or not at all."""
    closed = [e for e in read_ledger(root / LEDGER) if e.get("outcome") == "closed"
              and e.get("access_id") == access.get("access_id")]
    if not closed:
        raise StageError(f"{ACCESS} names access {access.get('access_id')}, which has no "
                         f"`closed` line in the ledger ({LEDGER}): its files are no access's "
                         "results, and no report is drawn from them")
    last = closed[-1]
    recorded = last.get("outputs") or {}  # lines from before outputs were recorded: none
    for name, digest in recorded.items():
        path = root / name
        if not path.is_file() or sha256_hex(path.read_bytes()) != digest:
            raise StageError(f"{name} is not the file access {last['access_id']} closed with "
                             f"(ledger line {last['seq']}): restore it (`dvc checkout "
                             f"{name}`); a report is drawn from the access's own results")
    verdict = last.get("verdict") or {}
    if verdict and verdict.get("groups_digest") != content_digest(access.get("groups") or {}):
        raise StageError(f"{ACCESS}: its task groups are not the ones access "
                         f"{last['access_id']} closed with (ledger line {last['seq']}): "
                         f"restore it (`dvc checkout {ACCESS}`)")
    if "dates_digest" in verdict and verdict["dates_digest"] != content_digest(
            access.get("dates") or {}):
        raise StageError(f"{ACCESS}: its release dates and data cutoffs are not the ones "
                         f"access {last['access_id']} closed with (ledger line {last['seq']}): "
                         f"restore it (`dvc checkout {ACCESS}`)")
    return last


def access_dates(access: dict[str, Any], closed: dict[str, Any]) -> ReleaseDates | None:
    """The release dates and cutoffs the access recorded, for the by_date split; only those its
    closed line holds the digest of (closed_access checked them): dates added to access.json
    later, or by an access that recorded none, split nothing."""
    if "dates_digest" not in (closed.get("verdict") or {}):
        return None
    return recorded_dates(access)


def sweep_report(root: Path, experiment: str) -> dict[str, Any]:
    """The report of a sweep's experiment: its val selection and why there is no verdict. No
    MLflow run: the stages before it logged what it shows."""
    selection = json.loads((root / SELECTION).read_text(encoding="utf-8"))
    metrics = {"verdict": f"none: a sweep ({experiment})"}
    with staged_outputs() as outputs:
        for name, data in sweep_report_files(experiment, selection).items():
            outputs.write_bytes(root / REPORTS / name, data)
        outputs.write_json(root / TEST_METRICS, metrics)
    print(f"report: experiment {experiment} chose {selection['chosen']} on val; no test "
          f"verdict in a sweep; {where_to_read(root, experiment, ' (and report.md)')}")
    return metrics


def where_to_read(root: Path, experiment: str | None, also: str = "") -> str:
    """Where the report can be read once the stage is over. In the copy DVC runs a `--temp` or
    queued experiment in, not there: DVC deletes the copy when the experiment ends, and the
    report lives on only in the saved experiment (its outputs are in DVC's cache)."""
    if not in_experiment_copy(root):
        return f"{root / REPORTS / 'report.html'}{also}"
    name = experiment or "NAME"
    return (f"the report is saved with experiment {name}, not in this temporary copy: "
            f"`dvc exp apply {name}` puts it in the workspace at {REPORTS / 'report.html'}; "
            "`heldout sweeps` lists the experiments")


def run(root: Path | None = None) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    experiment = sweep_experiment(section(params, "test", TestConfig).experiment)
    if experiment:
        return sweep_report(root, experiment)
    harness = section(params, "harness", Harness)
    manifest = read_manifest(root)
    access = json.loads((root / ACCESS).read_text(encoding="utf-8"))
    closed = closed_access(root, access)
    with tracked_stage(root, params, "report", "report") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest) | {
            "harness": harness.fingerprint(), "candidate": access["candidate"],
            "base": access["base"]})
        judge, judge_card = judge_trust_inputs(root, section(params, "judge", JudgeConfig),
                                               harness.fingerprint())
        judge += grader_gates(json.loads((root / SCORES).read_text(encoding="utf-8")),
                              [access["base"], access["candidate"]])
        report = build_report(
            read_rollouts(root / test_rollout_file("base")),
            read_rollouts(root / test_rollout_file("candidate")),
            groups=access["groups"],
            # The harness the test access ran under: the pinned one at the runs' own episodes
            # per task (params.reruns.episodes), which its rollouts carry.
            protocol=protocol_card(root, manifest,
                                   section(params, "reruns", RerunsConfig).harness(harness),
                                   access) | {"judge_trust": judge_card},
            judge=judge,
            decontamination=read_decontamination(root),
            reruns=read_reruns(root),
            passable=oracle_passable(access),
            dates=access_dates(access, closed),
            families=recorded_families(manifest, access, closed),
        )
        recorded = closed.get("verdict")
        redrawing = recorded and redrawn(
            recorded, judged_record(verdict_record(report.headline.decision, access["groups"]),
                                    judge_card),
            closed_at=f"ledger line {closed['seq']}, commit {closed.get('git_commit')}",
            commit=git_commit(root))
        if redrawing:
            report.headline.warnings.insert(0, redrawing)
            print(f"report: {redrawing}")
        recipe = recipe_from_access(access["recipes"]) if access.get("recipes") else None
        if recipe:
            report.headline.notes.append(recipe_note(recipe))
        with staged_outputs() as outputs:
            written = stage_report(report, root / REPORTS, outputs)
            outputs.write_json(root / TEST_METRICS, test_metrics(report))
        if recipe:
            written += write_recipe_report(recipe, root / RECIPE_REPORT)
            mlflow_run.log_metrics(recipe_metrics(recipe))
        else:  # an earlier access's recipe verdict is not this one's
            shutil.rmtree(root / RECIPE_REPORT, ignore_errors=True)
        print(headline_markdown(report))
        where = where_to_read(root, os.environ.get(EXPERIMENT_ENV), " (and report.md, report.json)")
        print(f"report: {where}")
        mlflow_run.log_metrics({k: v for k, v in report.metrics.items()
                                if isinstance(v, int | float)})
        for path in written:
            mlflow_run.log_artifact(path, {root / REPORTS: "report", root / RECIPE_REPORT:
                                           "report/recipe"}.get(path.parent, "report/figures"))
        mlflow_run.log_artifact(root / TEST_METRICS, "report")
    return report.to_json()
