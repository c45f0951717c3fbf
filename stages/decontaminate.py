"""Stage `decontaminate`: the train split and the training corpora, against the val and test
fingerprints → data/decontam/{train.jsonl, report.json, excluded.json}.

It reads the test split's fingerprints, never the test split."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from heldout.contamination.channels import channel_rows
from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.index import METHODS, EvalIndex
from heldout.contamination.report import (
    ContaminationError,
    build_report,
    describe_leaks,
    report_table,
)
from heldout.contamination.scan import scan_source
from heldout.contamination.sources import (
    TRAIN_SPLIT_SOURCE,
    TrainingCorpus,
    corpus_items,
    task_items,
)
from heldout.errors import InputFileError, Problem, StageError
from heldout.files import json_bytes, staged_outputs
from heldout.tasks.sources import load_tasks
from heldout.tasks.split import EVAL_SPLITS, split_digest, split_records
from stages.catalog import DECONTAM_REPORT, DECONTAM_TRAIN, EXCLUDED, fingerprint_file, split_file
from stages.common import (
    log_split_input,
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    tracked_stage,
)
from stages.tracking import StageRun


def read_fingerprints(root: Path, name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    path = root / fingerprint_file(name)
    if not path.is_file():
        raise StageError(f"{path}: missing; run the split stage first (dvc repro)")
    fingerprints = json.loads(path.read_text(encoding="utf-8"))
    if fingerprints["digest"] != manifest["digests"][name]:
        raise StageError(f"{path}: made for another {name} split than the manifest names; "
                         "re-run the split stage (dvc repro)")
    return fingerprints


def corpus_path(root: Path, corpus: TrainingCorpus) -> Path:
    path = root / corpus.path
    if not path.is_file():
        raise InputFileError(path, [Problem(None, None, "no such file")], hint=(
            "params.yaml decontaminate.training_corpora lists JSONL files relative to the "
            "project folder"))
    return path


def run(root: Path | None = None) -> dict[str, Any]:
    """Remove training items that overlap an eval item, report every match with its evidence,
    and flag, drop or fail on eval items that a training corpus leaked (by policy)."""
    root = project_root(root)
    params = read_params(root)
    config = section(params, "decontaminate", DecontaminateConfig)
    manifest = read_manifest(root)
    with tracked_stage(root, params, "decontaminate", "decontaminate") as mlflow_run:
        mlflow_run.set_tags(protocol_tags(manifest))
        mlflow_run.log_params(
            {f"decontaminate.{k}": v for k, v in config.model_dump().items()
             if k not in ("training_corpora", "workers")}
            | {"decontaminate.training_corpora": ",".join(c.path for c in config.training_corpora)}
        )
        corpora = [(corpus, corpus_path(root, corpus)) for corpus in config.training_corpora]
        fingerprints = {name: read_fingerprints(root, name, manifest) for name in EVAL_SPLITS}
        index = EvalIndex(fingerprints.values(), config)
        train = load_tasks(root / split_file("train"))
        val = load_tasks(root / split_file("val"))
        scans = [scan_source(index, TRAIN_SPLIT_SOURCE, task_items(train), config.workers)]
        scans += [scan_source(index, corpus.path, corpus_items(path, corpus), config.workers)
                  for corpus, path in corpora]
        report = build_report(
            config, scans, {name: f["digest"] for name, f in fingerprints.items()},
            {task.id: task for task in val},
        )
        # Each leakage channel checked, with what it compared, its threshold and its counts;
        # and those checked elsewhere (the report's by_date, the recall probe), named.
        report["channels"] = channel_rows(config, index.n, report["matches"])
        removed = set(report["removed_train_ids"])
        kept = [task for task in train if task.id not in removed]
        report["train_digest"] = split_digest(kept)
        print(report_table(report), file=sys.stderr, flush=True)
        mlflow_run.log_metrics(metrics(report))
        if config.policy == "fail" and any(report["flagged_eval_ids"].values()):
            # No outputs on failure, but the reviewer of the failed run still gets the evidence.
            log_report(mlflow_run, report)
            raise ContaminationError(describe_leaks(report))

        with staged_outputs() as outputs:
            outputs.write_bytes(root / DECONTAM_TRAIN, split_records(kept))
            outputs.write_json(root / DECONTAM_REPORT, report)
            outputs.write_json(root / EXCLUDED, {"policy": config.policy,
                                                 **report["excluded_eval_ids"]})
        for path in (DECONTAM_REPORT, EXCLUDED):
            mlflow_run.log_artifact(root / path, "decontam")
        log_split_input(mlflow_run, root, manifest, "train", train)
        log_split_input(mlflow_run, root, manifest, "val", val)
    return report


def metrics(report: dict[str, Any]) -> dict[str, float]:
    per_method = {f"matches_{method}_{split}": report["counts"][method][split]
                  for method in METHODS for split in EVAL_SPLITS}
    per_split = {f"{what}_{split}": len(report[f"{what}_eval_ids"][split])
                 for what in ("flagged", "excluded") for split in EVAL_SPLITS}
    sources = report["sources"]
    return per_method | per_split | {
        "removed_train": len(report["removed_train_ids"]),
        "training_items": sum(s["items"] for s in sources),
        "code_unparsable": sum(s["code_unparsable"] for s in sources),
    }


def log_report(mlflow_run: StageRun, report: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / DECONTAM_REPORT.name
        path.write_bytes(json_bytes(report))
        mlflow_run.log_artifact(path, "decontam")
