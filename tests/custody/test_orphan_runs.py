"""Nothing half-recorded (issue 23, item 6): no MLflow run stands as a test access unless a
ledger line names it, and an orphan run left before that was so can be resolved by a person,
with a reason the ledger keeps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from heldout.custody.guard import LEDGER, SEALED_TEST, TestSetAccessError, sealing
from heldout.custody.keys import KEY_ENV, TestKeyError
from heldout.custody.ledger import read_ledger
from stages import test as test_stage
from stages.tracking import TrackingConfig, runs_touching_test_split, stage_run
from tests.custody.test_custody_audit import audit_of, record_access


@pytest.fixture
def project(selected_copy: Path) -> Path:
    return selected_copy


def test_a_wrong_key_leaves_no_test_access_run_and_the_audit_passes(project: Path,
                                                                     monkeypatch):
    right = os.environ[KEY_ENV]
    monkeypatch.setenv(KEY_ENV, "22" * 32)
    with pytest.raises(TestKeyError):
        test_stage.run(project)
    monkeypatch.setenv(KEY_ENV, right)
    assert read_ledger(project / LEDGER) == []
    assert runs_touching_test_split(project) == []
    stopped = mlflow.search_runs(search_all_experiments=True,
                                 filter_string="tags.`heldout.test_access` = 'false'")
    assert len(stopped) == 1 and stopped["status"][0] == "FAILED"
    result = audit_of(project)
    assert result.ok, result.problems


def test_a_missing_split_file_leaves_no_test_access_run(project: Path):
    with sealing():
        kept = (project / SEALED_TEST).read_bytes()
        (project / SEALED_TEST).unlink()
    with pytest.raises(TestSetAccessError, match="is missing"):
        test_stage.run(project)
    with sealing():
        (project / SEALED_TEST).write_bytes(kept)
    assert runs_touching_test_split(project) == []
    assert audit_of(project).ok
    assert test_stage.run(project)["accesses_of_this_test_version"] == 1  # the first access


def orphan(project: Path, *, deleted: bool = False) -> str:
    """A run tagged as a test access that no ledger line names, as older code left them."""
    with stage_run(project, TrackingConfig(), "test", {"stage": "test", "test_access": "true"}) \
            as run:
        run.log_dataset(pd.DataFrame({"id": ["a"]}), name="test-0123", digest="0" * 32,
                        source=project / SEALED_TEST, context="test")
    mlflow.MlflowClient().set_terminated(run.run_id, "FAILED")
    if deleted:
        mlflow.MlflowClient().delete_run(run.run_id)
    return run.run_id


def heldout(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=project,
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)


@pytest.mark.parametrize("deleted", [False, True])
def test_an_orphan_run_is_resolved_with_a_reason_and_the_audit_passes_again(project: Path,
                                                                            deleted: bool):
    run_id = orphan(project, deleted=deleted)
    assert any("no ledger line names it" in p for p in audit_of(project).problems)
    assert heldout(project, "audit").returncode == 1
    empty = heldout(project, "audit", "--resolve", run_id)
    assert empty.returncode == 2 and "a resolution needs a reason" in empty.stderr
    done = heldout(project, "audit", "--resolve", run_id, "--reason",
                   "left by a wrong-key attempt before custody recorded every attempt")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resolved MLflow run {run_id}" in done.stdout and "audit OK" in done.stdout
    (line,) = read_ledger(project / LEDGER)
    assert (line["outcome"], line["mlflow_run_id"]) == ("resolved", run_id)
    assert line["reason"].startswith("left by a wrong-key attempt") and line["mac"]
    again = heldout(project, "audit", "--resolve", run_id, "--reason", "twice")
    assert again.returncode == 2 and "is no orphan" in again.stderr


def test_a_run_the_ledger_names_cannot_be_resolved_away(project: Path):
    run_id = record_access(project, close=False)  # an access left open: a real finding
    done = heldout(project, "audit", "--resolve", run_id, "--reason", "make it go away")
    assert done.returncode == 2 and "is no orphan" in done.stderr
    assert any("was never closed" in p for p in audit_of(project).problems)


def test_only_a_run_that_touched_the_test_split_can_be_resolved(project: Path):
    with stage_run(project, TrackingConfig(), "select", {"stage": "select"}) as run:
        pass
    done = heldout(project, "audit", "--resolve", run.run_id, "--reason", "why not")
    assert done.returncode == 2 and "did not touch the test split" in done.stderr
