"""The test lock under attack: every attempt ends refused or detected, never unaudited."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.json
import pytest
import yaml

from heldout.custody.audit import audit_project
from heldout.custody.guard import LEDGER, SEALED_TEST, TestSetAccessError, sealing
from heldout.custody.keys import load_keys
from heldout.custody.ledger import append, read_ledger, verify_chain
from stages import catalog, select
from stages import test as test_stage
from stages.tracking import runs_touching_test_split
from tests.ledger_tools import keep_store_lines


def set_params(project: Path, section: str, **values) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params[section].update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def project(selected_copy: Path) -> Path:
    return selected_copy


def ledger(project: Path) -> list[dict]:
    return read_ledger(project / LEDGER)


def audit_of(project: Path):
    return audit_project(project, runs_touching_test_split(project))


def test_one_access_opens_and_closes_and_the_audit_passes(project: Path):
    access = test_stage.run(project)
    assert (access["candidate"], access["base"]) == ("late", "base")
    assert access["accesses_of_this_test_version"] == 1 and not access["resumed"]
    assert [e["outcome"] for e in ledger(project)] == ["opened", "closed"]
    for arm in ("candidate", "base"):
        table = pd.read_parquet(project / catalog.test_rollout_file(arm))
        assert table["task_id"].nunique() == access["tasks"]
    result = audit_of(project)
    assert result.ok, result.problems
    assert result.models_per_test_version == {access["test_version"]: 2}


def crash_before_closing(project: Path, monkeypatch) -> dict:
    """Run the test stage to the moment before its access closes, and die there: its outputs
    written, its ledger line `opened`. Returns what access.json holds."""
    def crash(*args, **kwargs):
        raise RuntimeError("the stage died before the access closed")

    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="died"):
        patch.setattr(test_stage, "closing_verdict", crash)
        test_stage.run(project)
    assert [e["outcome"] for e in ledger(project)][-1] == "opened"
    return json.loads((project / catalog.ACCESS).read_text())


def test_an_access_that_never_closed_resumes_and_a_closed_one_never_runs_again(
        project: Path, monkeypatch):
    crash_before_closing(project, monkeypatch)
    first = test_stage.run(project)  # the same identity, never closed: resumed
    assert first["resumed"] and first["accesses_of_this_test_version"] == 1
    assert [e["outcome"] for e in ledger(project)] == ["opened", "resumed", "closed"]

    # Closed: with its outputs in place a run is not an access (test_pull.py); without them it
    # is refused, not recomputed, and restoring them is all it takes.
    kept = (project / catalog.ACCESS).read_bytes()
    (project / catalog.ACCESS).unlink()
    with pytest.raises(TestSetAccessError, match=r"closed at ledger line 3 .* numbers are fixed"):
        test_stage.run(project)
    assert [e["outcome"] for e in ledger(project)] == ["opened", "resumed", "closed", "refused"]
    (project / catalog.ACCESS).write_bytes(kept)  # what `dvc checkout` does
    assert test_stage.run(project)["result_digest"] == first["result_digest"]
    assert len(ledger(project)) == 4, "reading the restored results is no access"
    result = audit_of(project)
    assert result.ok, result.problems


def test_another_candidate_is_refused_without_a_reason_and_counted_with_one(project: Path):
    test_stage.run(project)
    set_params(project, "select", rule="last", final="base")
    select.run(project)
    with pytest.raises(TestSetAccessError, match=r"already opened .* access number 2"):
        test_stage.run(project)
    assert ledger(project)[-1]["outcome"] == "refused"
    assert not (project / catalog.ACCESS).exists() or json.loads(
        (project / catalog.ACCESS).read_text())["candidate"] == "late"

    set_params(project, "test", reaccess={"access": "base",
                                          "reason": "base-vs-base sanity check, approved by QA"})
    access = test_stage.run(project)
    assert access["accesses_of_this_test_version"] == 2
    assert ledger(project)[-2]["reason"].startswith("base-vs-base")
    assert audit_of(project).ok


def test_a_first_open_that_another_machine_beat_is_refused_in_the_stores_transaction(
    project: Path, monkeypatch
):
    # This machine read the ledger before another machine's first open of the same test set
    # (another access key) was written: the rule is decided again inside the store's
    # transaction, so it is a refused line, not a second access without a reason.
    test_stage.run(project)
    set_params(project, "select", rule="last", final="base")
    select.run(project)
    from heldout.custody import lock

    monkeypatch.setattr(lock, "read_ledger", lambda path: [])  # the view before the other's
    with pytest.raises(TestSetAccessError, match=r"already opened .* access number 2") as raised:
        test_stage.run(project)
    assert raised.value.recorded
    lines = ledger(project)
    assert [e["outcome"] for e in lines] == ["opened", "closed", "refused"]
    assert lines[-1]["candidate"] == "base"
    assert audit_of(project).ok


def test_reading_the_test_split_outside_the_lock_is_refused_or_useless(project: Path,
                                                                        monkeypatch):
    path = project / SEALED_TEST

    def peeking_selection(*args, **kwargs):
        return pd.read_json(path, lines=True)

    monkeypatch.setattr(select, "select_checkpoint", peeking_selection)
    with pytest.raises(TestSetAccessError, match="outside the test lock"):
        select.run(project)
    for reader in (path.read_bytes, lambda: np.loadtxt(path, dtype=str),
                   lambda: pd.read_json(path, lines=True)):
        with pytest.raises(TestSetAccessError):
            reader()
    refused = [e for e in ledger(project) if e["outcome"] == "refused"]
    assert len(refused) == 4

    # pyarrow opens files from C, below the audit hook: the seal is what stops it.
    with pytest.raises(pyarrow.ArrowInvalid):
        pyarrow.json.read_json(path)


def test_a_changed_test_split_is_refused(project: Path):
    sealed = bytearray((project / SEALED_TEST).read_bytes())
    sealed[-5] ^= 0xFF
    with sealing():
        (project / SEALED_TEST).write_bytes(bytes(sealed))
    with pytest.raises(TestSetAccessError, match="changed since they were sealed"):
        test_stage.run(project)


def test_a_selection_from_other_val_scores_is_refused_before_any_test_read(project: Path):
    scores_path = project / catalog.SCORES
    scores = json.loads(scores_path.read_text())
    scores["checkpoints"]["base"]["pass_at_1"]["estimate"] = 0.99
    scores_path.write_text(json.dumps(scores))
    with pytest.raises(TestSetAccessError, match="other val scores"):
        test_stage.run(project)
    (entry,) = ledger(project)
    assert entry["outcome"] == "refused" and entry["candidate"] == "late"
    assert audit_of(project).ok, "a refused attempt is recorded in both witnesses"


def test_an_edited_ledger_line_breaks_the_chain_there(project: Path):
    test_stage.run(project)
    path = project / LEDGER
    lines = path.read_text().splitlines()
    edited = json.loads(lines[0])
    edited["candidate"] = "base"
    lines[0] = json.dumps(edited)
    path.write_text("\n".join(lines) + "\n")
    result = audit_of(project)
    assert not result.ok and result.chain_break.line == 1
    assert "edited" in result.chain_break.reason


def test_a_deleted_last_line_is_caught_by_the_mlflow_cross_check(project: Path):
    test_stage.run(project)
    path = project / LEDGER
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    keep_store_lines(project, len(lines) - 1)  # and from the store, where the lines live
    result = audit_of(project)
    assert result.chain_break is None
    assert any("ledger lines are missing" in problem for problem in result.problems)


def _append_many(path: str, writer: int) -> None:
    for i in range(40):
        append(Path(path), {"outcome": "refused", "writer": writer, "i": i})


def test_concurrent_appends_never_interleave_or_fork_the_chain(tmp_path: Path):
    path = tmp_path / "ledger.jsonl"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(path), w)) for w in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    entries = read_ledger(path)
    assert len(entries) == 120 and [e["seq"] for e in entries] == list(range(1, 121))
    assert verify_chain(path, load_keys()) is None
