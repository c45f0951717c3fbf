"""Stage `split`: tasks → data/split/{train,val,test}.jsonl, manifest.json, fingerprints/."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from heldout.canonical import canonical_json
from heldout.contamination.fingerprints import split_fingerprints
from heldout.custody.guard import sealing
from heldout.custody.keys import CustodyConfig, opening_key, require_team_key, team_sealing_key
from heldout.custody.ledger import LedgerStore
from heldout.custody.seal import seal
from heldout.custody.store import open_line_store
from heldout.custody.task_source import is_sealed_source, load_sealed_tasks
from heldout.files import staged_outputs
from heldout.tasks.record import tasks_digest
from heldout.tasks.sources import TasksConfig, load_tasks
from heldout.tasks.split import (
    EVAL_SPLITS,
    SPLITS,
    SplitConfig,
    assign,
    build_manifest,
    split_records,
    val_support_problem,
)
from stages.catalog import FINGERPRINT_DIR, MANIFEST, SEALED_TEST, fingerprint_file, split_file
from stages.common import (
    log_split_input,
    project_root,
    protocol_tags,
    read_params,
    section,
    tracked_stage,
)


def run(root: Path | None = None) -> dict[str, Any]:
    """Split the configured tasks and write the split files; returns the manifest."""
    root = project_root(root)
    params = read_params(root)
    tasks_config = section(params, "tasks", TasksConfig)
    config = section(params, "split", SplitConfig)
    custody = section(params, "custody", CustodyConfig)
    # Once a team key is named (params or the ledger store), the split is sealed for no other.
    store = open_line_store(root, custody.ledger_url)
    public_key, note = team_sealing_key(store, custody)
    if note:
        print(f"heldout: {note}", file=sys.stderr)
    # A sealed source (heldout tasks seal) is unsealed in memory, with the team's key only.
    opener = (require_team_key(LedgerStore(store), opening_key(custody))
              if is_sealed_source(tasks_config.source) else None)
    with tracked_stage(root, params, "split", "split") as mlflow_run:
        tasks = (load_sealed_tasks(root / tasks_config.source, opener) if opener else
                 load_tasks(tasks_config.resolve(root)))
        splits = assign(tasks, config.salt, config.fractions, config.hold_out)
        manifest = build_manifest(tasks_config.source, tasks_digest(tasks), config, splits)
        with staged_outputs() as outputs:
            for name in ("train", "val"):
                outputs.write_bytes(root / split_file(name), split_records(splits[name]))
            with sealing():
                outputs.write_bytes(root / SEALED_TEST,
                                    seal(split_records(splits["test"]), public_key))
            for name in EVAL_SPLITS:
                fingerprints = split_fingerprints(
                    name, manifest["digests"][name], splits[name], config.ngram
                )
                # Compact: tens of thousands of hashes, read by programs, not people.
                outputs.write_bytes(root / fingerprint_file(name),
                                    canonical_json(fingerprints).encode())
            outputs.write_json(root / MANIFEST, manifest)

        thin_val = val_support_problem(splits["val"])
        if thin_val:
            print(f"split: WARNING {thin_val}")
        mlflow_run.set_tags(protocol_tags(manifest) | {"tasks_digest": manifest["source_digest"]})
        mlflow_run.log_params(
            {"tasks.source": tasks_config.source, "split.salt": config.salt}
            | {f"split.fractions.{name}": config.fractions[name] for name in SPLITS}
            | ({"split.kind": manifest["split_kind"]} if config.hold_out else {})
        )
        mlflow_run.log_metrics(
            {f"tasks_{name}": count for name, count in manifest["counts"].items()}
            | {f"groups_{name}": count for name, count in manifest["groups"].items()}
        )
        # The test split's content stays out of MLflow: only the test stage may open it, and
        # it logs the test input under the lock. Its digest is in the manifest and the tags.
        for name in ("train", "val"):
            log_split_input(mlflow_run, root, manifest, name, splits[name])
            mlflow_run.log_artifact(root / split_file(name), "split")
        mlflow_run.log_artifact(root / MANIFEST, "split")
        mlflow_run.log_artifact(root / FINGERPRINT_DIR, "split/fingerprints")
    return manifest

