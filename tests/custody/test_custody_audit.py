"""The ledger under attack (issue 14): every tamper is refused or found by `heldout audit`, with
the message a reviewer reads. Three witnesses: the MACs (no key, no line), MLflow (deleted runs
included) and git (a committed line never changes, even for the key's holder)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from heldout.canonical import canonical_json
from heldout.custody.anchor import (
    CommittedVersion,
    anchor_ledger,
    check_anchor,
    stage_ledger,
)
from heldout.custody.audit import abort_access, audit_project
from heldout.custody.guard import LEDGER, SEALED_TEST, stamp
from heldout.custody.keys import KEY_ENV, TestKey, TestKeyError, load_keys
from heldout.custody.ledger import (
    ChainBreak,
    LedgerError,
    append,
    line_hash,
    line_mac,
    read_ledger,
    verify_chain,
)
from heldout.custody.lock import AccessKey
from stages import test as test_stage
from stages.tracking import TrackingConfig, runs_touching_test_split, stage_run
from tests.ledger_tools import keep_store_lines, replace_store_lines
from tests.pipeline.test_cli import heldout

OTHER_KEY = TestKey(bytes.fromhex("22" * 32))
ACCESS = AccessKey("t-0123456789ab", "late", "base", "f" * 64, "a" * 64, "b" * 64,
                   "c-0123456789ab", "i" * 64)
NOT_GIT = "{} is not a git repository, so the ledger has no anchor: keep the project in git " \
          "and commit the ledger after each access"
NO_MAC = "the line has no MAC, and only a refused attempt may be written without the test " \
         "key: this 'opened' line was written or rewritten without it"
NOT_VERIFIED = "the line's MAC does not verify under test key {}: it was written or rewritten " \
               "without the test key"


@pytest.fixture
def project(project: Path, monkeypatch) -> Path:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    return project


def key() -> TestKey:
    """The project's key: the one conftest sets for every test."""
    return load_keys().current


def record_access(project: Path, *, close: bool = True, access: AccessKey = ACCESS,
                  tags: dict | None = None) -> str:
    """What the test stage leaves of one access: its tagged MLflow run with the test split as
    input, and its ledger lines. Returns the run id."""
    fields = {"test_version": access.test_version, "candidate": access.candidate,
              "base": access.base, "harness": access.harness, "access_id": access.access_id}
    with stage_run(project, TrackingConfig(), "test",
                   {"stage": "test", "test_access": "true", "test_outcome": "opened",
                    **fields, **(tags or {})}) as run:
        run.log_dataset(pd.DataFrame({"id": ["a"]}), name="test-0123", digest="0" * 32,
                        source=project / SEALED_TEST, context="test")
    line = {**fields, **stamp(), "selection_digest": "s" * 64, "git_commit": "c" * 40,
            "mlflow_run_id": run.run_id, "reason": "", "result_digest": None}
    append(project / LEDGER, {**line, "outcome": "opened"})
    if close:
        append(project / LEDGER, {**line, "outcome": "closed", "result_digest": "r" * 64})
    else:
        mlflow.MlflowClient().set_terminated(run.run_id, "FAILED")  # the stage was killed
    return run.run_id


def audit_of(project: Path):
    return audit_project(project, runs_touching_test_split(project))


def rewrite(project: Path, mac=lambda entry: entry.get("mac")) -> None:
    """Make every line's candidate "base" and recompute the chain (seq, prev_hash, SHA-256
    hash), as anyone with the files can, in the ledger store and its export; `mac` says what
    becomes of each line's MAC."""
    path, previous, lines = project / LEDGER, "0" * 64, []
    for entry in read_ledger(path):
        entry["candidate"] = "base"
        entry["prev_hash"] = previous
        entry["hash"] = previous = line_hash(entry)
        entry["mac"] = mac(entry)
        lines.append(canonical_json(entry))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    replace_store_lines(project, lines)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=Auditor", "-c", "user.email=a@example.org",
                           "-c", "commit.gpgsign=false", *args], cwd=root, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def commit_ledger(project: Path, message: str = "test access") -> str:
    git(project, "add", str(LEDGER))
    git(project, "commit", "-q", "-m", message)
    return git(project, "rev-parse", "HEAD")


def test_a_recorded_access_audits_clean_and_every_line_carries_its_mac(project: Path):
    record_access(project)
    assert all((e["key_id"], e["mac"]) == (key().key_id, line_mac(key(), e["hash"]))
               for e in read_ledger(project / LEDGER))
    result = audit_of(project)
    assert result.ok, result.problems
    assert result.key_status.startswith(f"test key(s) {key().key_id} (from {KEY_ENV}); 2 line(s)")


def test_every_line_edited_and_rechained_with_sha256_fails_its_mac(project: Path):
    record_access(project)
    rewrite(project)
    result = audit_of(project)
    assert result.chain_break == ChainBreak(1, NOT_VERIFIED.format(key().key_id))
    rewrite(project, mac=lambda entry: None)  # or drop the MACs
    assert audit_of(project).chain_break == ChainBreak(1, NO_MAC)


def test_a_forged_opened_line_is_refused_without_the_key_and_found_if_written(project: Path,
                                                                             monkeypatch):
    record_access(project)
    entries = read_ledger(project / LEDGER)
    forged = {**entries[0], "candidate": "mine", "seq": 3, "prev_hash": entries[-1]["hash"]}
    forged["hash"] = line_hash(forged)
    for mac, reason in ((None, NO_MAC), ("0" * 64, NOT_VERIFIED.format(key().key_id))):
        lines = (project / LEDGER).read_text().splitlines()[:2]
        (project / LEDGER).write_text("\n".join([*lines, canonical_json({**forged, "mac": mac})])
                                      + "\n")
        assert audit_of(project).chain_break == ChainBreak(3, reason)

    with pytest.raises(LedgerError, match="outcome 'peeked' is not one of"):
        append(project / LEDGER, {"outcome": "peeked"}, key())
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(TestKeyError, match="a ledger line with outcome 'opened' is MAC'd under "
                                           "the test key, and there is none here: no test key"):
        append(project / LEDGER, {"outcome": "opened"})
    refused = append(project / LEDGER, {"outcome": "refused", "reason": "no key here"})
    assert (refused["key_id"], refused["mac"]) == (None, None)


def test_a_line_under_a_key_not_in_the_ring_says_which_key_to_add(project: Path, monkeypatch):
    append(project / LEDGER, {"outcome": "refused", "reason": "r"}, OTHER_KEY)
    result = audit_of(project)
    assert result.chain_break == ChainBreak(
        1, f"written under test key {OTHER_KEY.key_id}, which is not among the keys here: add "
           "it to HELDOUT_TEST_KEY")
    monkeypatch.setenv(KEY_ENV, f"{key().secret.hex()},{OTHER_KEY.secret.hex()}")  # rotated
    assert audit_of(project).ok


def test_without_any_key_the_macs_cannot_be_checked_and_the_audit_fails(project: Path,
                                                                        monkeypatch, tmp_path):
    record_access(project)
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    assert verify_chain(project / LEDGER, None) is None  # the chain alone still holds
    result = audit_of(project)
    assert result.chain_break is None
    assert result.problems == [
        "the ledger's MACs cannot be checked without the test key: no test key: set "
        f"HELDOUT_TEST_KEY to the key (64 hex digits) or to the path of a file holding it, from "
        f"your team's secret store; or put your own key in {tmp_path}/no-config/heldout/test-key "
        "(docs/stages.md: 'The test key')"]
    assert result.key_status.startswith("test key: none here; 2 line(s) MAC'd")


@pytest.mark.parametrize("state", ["empty", "missing"])
def test_an_emptied_or_removed_ledger_and_its_deleted_run_fail_the_audit(project: Path,
                                                                          state: str):
    run_id = record_access(project)
    if state == "empty":
        (project / LEDGER).write_text("")
    else:
        (project / LEDGER).unlink()
    keep_store_lines(project, 0)  # the lines live in the store: erasing them is erasing it too
    mlflow.MlflowClient().delete_run(run_id)
    (run,) = runs_touching_test_split(project)
    assert (run.run_id, run.lifecycle_stage) == (run_id, "deleted")
    result = audit_of(project)
    assert not result.ok and result.chain_break is None
    assert result.problems == [
        f"{LEDGER} is {state}, and MLflow has 1 run(s) that touched the test split (deleted "
        f"ones included): the ledger was removed or emptied; restore it (git checkout -- "
        f"{LEDGER}, if it was committed)",
        f"MLflow run {run_id} was deleted: a run that touched the test split stays in the "
        f"record; restore it: mlflow runs restore --run-id {run_id}",
        f"MLflow run {run_id} touched the test split (tagged heldout.test_access) but no ledger "
        "line names it"]


def test_a_line_whose_candidate_differs_from_its_run_is_found_even_with_the_key(project: Path):
    run_id = record_access(project)
    rewrite(project, mac=lambda entry: line_mac(key(), entry["hash"]))
    result = audit_of(project)
    assert result.chain_break is None  # the key's holder re-MAC'd every line
    assert result.problems == [
        f"ledger line {seq} says candidate 'base', and its MLflow run {run_id} is tagged "
        "heldout.candidate = 'late'" for seq in (1, 2)]


def test_the_outcome_the_lock_decided_must_match_the_runs_tag(project: Path):
    run_id = record_access(project, tags={"test_outcome": "resumed"})
    assert audit_of(project).problems == [
        f"ledger line 1 says MLflow run {run_id} opened its access, and the run is tagged "
        "heldout.test_outcome = 'resumed'"]


def test_a_run_the_guard_refused_needs_its_ledger_line_and_a_failed_status(project: Path):
    with stage_run(project, TrackingConfig(), "select",
                   {"stage": "select", "test_access_refused": "true"}) as run:
        pass
    assert audit_of(project).problems[-1] == (
        f"MLflow run {run.run_id} touched the test split (tagged heldout.test_access_refused) "
        "but no ledger line names it")
    append(project / LEDGER, {"outcome": "refused", "mlflow_run_id": run.run_id, "reason": "r"})
    assert audit_of(project).problems == [
        f"MLflow run {run.run_id} was refused (ledger line 1) and its status is FINISHED, not "
        "FAILED: a refused attempt ends its run"]
    mlflow.MlflowClient().set_terminated(run.run_id, "FAILED")
    assert audit_of(project).ok


def test_an_access_never_closed_is_a_finding_until_it_is_aborted(project: Path):
    run_id = record_access(project, close=False)
    finding = (f"access {ACCESS.access_id} (candidate late vs base on t-0123456789ab, opened at "
               f"ledger line 1, MLflow run {run_id}) was never closed or aborted: resume it "
               "(`dvc repro`: the same selection, params and harness resume the same access) or "
               f"close it: heldout abort {ACCESS.access_id} --reason \"…\"")
    assert audit_of(project).problems == [finding]
    with pytest.raises(LedgerError, match="an abort needs a reason"):
        abort_access(project / LEDGER, ACCESS.access_id, "  ", key())
    with pytest.raises(LedgerError, match=f"access nope is not open \\(open accesses: "
                                          f"{ACCESS.access_id}\\)"):
        abort_access(project / LEDGER, "nope", "killed", key())
    line = abort_access(project / LEDGER, ACCESS.access_id, "the machine died", key())
    assert (line["outcome"], line["mlflow_run_id"], line["candidate"]) == ("aborted", run_id,
                                                                           "late")
    result = audit_of(project)
    assert result.ok, result.problems
    assert [e["outcome"] for e in result.accesses] == ["opened", "aborted"]
    with pytest.raises(LedgerError, match="is not open \\(open accesses: none\\)"):
        abort_access(project / LEDGER, ACCESS.access_id, "twice", key())


def test_heldout_audit_finds_the_killed_access_and_heldout_abort_closes_it(
        selected_copy: Path, monkeypatch):
    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the stage dies after the lock opened the access

    with monkeypatch.context() as patch:
        patch.setattr(test_stage, "roll_outs", killed)
        with pytest.raises(KeyboardInterrupt):
            test_stage.run(selected_copy)
    (opened,) = read_ledger(selected_copy / LEDGER)
    access_id = opened["access_id"]
    done = heldout("audit", cwd=selected_copy)
    assert done.returncode == 1
    assert "was never closed or aborted: resume it" in done.stderr
    assert f"heldout abort {access_id} --reason" in done.stderr
    assert "is not a git repository, so the ledger has no anchor" in done.stdout

    refused = heldout("abort", "0123abcd", "--reason", "killed", cwd=selected_copy)
    assert refused.returncode == 2
    assert f"access 0123abcd is not open (open accesses: {access_id})" in refused.stderr
    assert heldout("abort", access_id, "--reason", " ", cwd=selected_copy).returncode == 2

    done = heldout("abort", access_id, "--reason", "the runner was killed", cwd=selected_copy)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"aborted access {access_id}: ledger line 2 of {LEDGER}, "
                                  f"candidate {opened['candidate']} vs {opened['base']}")
    assert "reason: the runner was killed" in done.stdout
    done = heldout("audit", cwd=selected_copy)
    assert done.returncode == 0, done.stderr
    assert "aborted" in done.stdout and "audit OK: 2 ledger lines" in done.stdout


@pytest.fixture
def repo(project: Path) -> Path:
    git(project, "init", "-q", "-b", "main")
    return project


def test_a_committed_line_rewritten_by_the_keys_holder_names_the_commit(repo: Path):
    record_access(repo)
    first = commit_ledger(repo)
    rewrite(repo, mac=lambda entry: line_mac(key(), entry["hash"]))
    result = audit_of(repo)
    assert result.chain_break is None  # the MACs verify: only git can tell
    assert [p for p in result.problems if "committed" in p] == [
        f"ledger line 1 was committed in {first[:7]} and has been changed since: a committed "
        f"line never changes; see git diff {first[:7]} -- {LEDGER}"]

    rewritten = commit_ledger(repo, "rewrite")  # committing it does not move the anchor
    lines = (repo / LEDGER).read_text().splitlines()
    (repo / LEDGER).write_text(lines[0] + "\n")
    assert anchor_ledger(repo).problems == [
        f"ledger line 1 was committed in {first[:7]} and has been changed since: a committed "
        f"line never changes; see git diff {first[:7]} -- {LEDGER}",
        f"ledger line 2 was committed in {rewritten[:7]} and is gone: a committed line never "
        f"changes; see git diff {rewritten[:7]} -- {LEDGER}"]


def test_lines_not_yet_committed_are_listed_with_the_command_not_failed(repo: Path):
    record_access(repo)
    commit = commit_ledger(repo)
    record_access(repo, access=AccessKey("t-0123456789ab", "early", "base", "f" * 64,
                                                "e" * 64, "b" * 64, "c-0123456789ab", "i" * 64))
    result = audit_of(repo)
    assert result.ok, result.problems
    assert result.notes == [
        'ledger lines 3-4 are not committed yet, so not anchored: git add '
        'ledger/test_access.jsonl && git commit -m "test access"']
    assert result.anchor.summary() == (f"git anchor: 2 of 4 ledger lines committed (latest in "
                                       f"{commit[:7]}); every committed line unchanged")


def test_lines_a_merge_dropped_still_count(repo: Path):
    """A branch's access, merged with `-s ours`, is still a committed version of the ledger."""
    append(repo / LEDGER, {"outcome": "refused", "reason": "first"})
    commit_ledger(repo)
    git(repo, "checkout", "-q", "-b", "elsewhere")
    append(repo / LEDGER, {"outcome": "refused", "reason": "on a branch"})
    branch = commit_ledger(repo)
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "-s", "ours", "-m", "merge", "elsewhere")
    assert anchor_ledger(repo).problems == [
        f"ledger line 2 was committed in {branch[:7]} and is gone: a committed line never "
        f"changes; see git diff {branch[:7]} -- {LEDGER}"]


def test_the_anchor_check_is_a_function_of_the_committed_versions():
    newest, oldest = CommittedVersion("b" * 40, "1\n2x\n"), CommittedVersion("a" * 40, "1\n2\n")
    anchor = check_anchor("1\n2x\n3\n", [newest, oldest])
    assert anchor.problems == [
        f"ledger line 2 was committed in aaaaaaa and has been changed since: a committed line "
        f"never changes; see git diff aaaaaaa -- {LEDGER}"]
    assert (anchor.anchored, anchor.unanchored) == (2, [3])
    later = CommittedVersion("b" * 40, "1\n2\n3\n")
    assert check_anchor("1\n", [later, oldest]).problems == [
        f"ledger line 2 was committed in aaaaaaa (and 1 later commit(s)) and is gone: a "
        f"committed line never changes; see git diff aaaaaaa -- {LEDGER}"]
    assert check_anchor("", []).notes == []


def test_outside_git_the_anchor_is_a_note_and_nothing_is_staged(project: Path):
    record_access(project)
    result = audit_of(project)
    assert result.ok and result.notes == [NOT_GIT.format(project)]
    assert stage_ledger(project) == f"ledger not staged: {NOT_GIT.format(project)}"


def test_the_test_stage_stages_the_ledger_and_a_commit_anchors_it(selected_copy: Path):
    git(selected_copy, "init", "-q", "-b", "main")
    test_stage.run(selected_copy)
    assert git(selected_copy, "diff", "--cached", "--name-only") == str(LEDGER)
    assert audit_of(selected_copy).notes == [
        'ledger lines 1-2 are not committed yet, so not anchored: git add '
        'ledger/test_access.jsonl && git commit -m "test access"']
    git(selected_copy, "commit", "-q", "-m", "test access")
    commit = git(selected_copy, "rev-parse", "HEAD")
    result = audit_of(selected_copy)
    assert result.ok and result.notes == [], result.problems
    assert result.anchor.summary() == (f"git anchor: 2 of 2 ledger lines committed (latest in "
                                       f"{commit[:7]}); every committed line unchanged")


def test_stage_ledger_adds_the_ledger_and_never_commits(repo: Path, monkeypatch):
    append(repo / LEDGER, {"outcome": "refused", "reason": "r"})
    assert stage_ledger(repo) == (f"staged {LEDGER}; a commit anchors it: git commit -m "
                                  '"test access"')
    assert git(repo, "diff", "--cached", "--name-only") == str(LEDGER)
    assert git(repo, "rev-list", "--all") == ""  # staged, not committed

    (repo / ".gitignore").write_text("ledger/\n")
    git(repo, "rm", "-q", "--cached", str(LEDGER))
    assert stage_ledger(repo) == (f"ledger not staged: {LEDGER} is ignored by git, so it can "
                                  "never be anchored: remove it from .gitignore")
    monkeypatch.setenv("PATH", str(repo / "no-bin"))
    assert stage_ledger(repo) == "ledger not staged: git is not installed, so the ledger has no " \
                                 "anchor"
    assert anchor_ledger(repo).notes == ["git is not installed, so the ledger has no anchor"]

