"""The test lock: the only way to open the test split, and the record of every attempt.

An access is its identity: the digest of everything the test stage computes from
(heldout.custody.identity: every params value it read, the test set's versions, the tasks it
leaves out, the arms), with the arms' names and settings digests beside it for people. What
is allowed:

- **open**: the first access to a set of tasks no earlier access opened;
- **resume**: the same identity again, while its access has not closed (a crash), counting
  no new access; once it has closed, its numbers are fixed and the same identity is refused
  (the outputs that hold them are restored with `dvc checkout`/`dvc pull`, not recomputed);
- **another access**: any other identity that would open a task an earlier access opened
  (heldout.custody.history: by id within the task source, or by evaluated content in any),
  whatever else changed: refused unless a reason names it, and the reason is recorded and
  spent (the next needs a new one). The refusal says which inputs differ from the last access
  to those tasks and how many of the tasks were seen.

Every attempt, refused ones included, is a line in the ledger (heldout.custody.ledger). Outside
a TestLock, the guard (heldout.custody.guard) refuses any open of the test split's files and
records the attempt.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from heldout.canonical import content_digest, sha256_hex
from heldout.custody.guard import (
    LEDGER,
    SEALED_TEST,
    TestSetAccessError,
    opening,
    record_refusal,
    stamp,
)
from heldout.custody.history import (
    TASK_DIGEST_CHARS,
    TestSet,
    accesses,
    changed_inputs,
    predecessor,
    seen_tasks,
)
from heldout.custody.keys import TestKey, TestKeyError
from heldout.custody.ledger import AccessRefused, LedgerStore, append, read_ledger
from heldout.custody.seal import SealBrokenError, WrongKeyError, unseal
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes
from heldout.tasks.split import evaluated_digest


@dataclass(frozen=True)
class AccessKey:
    """Who and what an access is, for people (names, settings digests, versions), and
    `inputs`, the digest of its whole identity (heldout.custody.identity), for the rule."""

    test_version: str
    candidate: str
    base: str
    harness: str
    candidate_settings: str
    base_settings: str
    content_version: str
    inputs: str

    @property
    def access_id(self) -> str:
        return content_digest(asdict(self))[:16]


class TestLock:
    """`with TestLock(...) as lock: tasks = lock.read_tasks(); ...; lock.close(...)`."""

    __test__ = False

    def __init__(self, root: Path, key: AccessKey, manifest: dict[str, Any], *,
                 test_key: TestKey, identity: dict[str, Any], excluded: frozenset[str],
                 selection_digest: str, git_commit: str, reason: str = "",
                 reason_for: str = "", spend: str = "", mlflow_run_id: str | None = None,
                 mlflow_experiment_id: str | None = None):
        self.root, self.key, self.manifest, self.test_key = root, key, manifest, test_key
        self.identity, self.excluded = identity, excluded
        self.ledger = root / LEDGER
        self.reason, self.reason_for = reason.strip(), reason_for.strip()
        # spend: why the split was opened though the val plan said it would not decide
        # (heldout.custody.spend), "" when the plan held.
        self.context = {"selection_digest": selection_digest, "git_commit": git_commit,
                        "spend": spend,
                        "mlflow_run_id": mlflow_run_id,
                        "mlflow_experiment_id": mlflow_experiment_id}
        self.outcome = ""
        self.recorded = False  # whether a ledger line names this attempt yet
        self.seen_before = 0  # how many of its tasks earlier accesses opened
        self._tasks: list[Task] = []
        self._tests: TestSet | None = None
        self._open = ExitStack()  # holds the permission to open while the lock is open

    @property
    def resumed(self) -> bool:
        return self.outcome == "resumed"

    def _entry(self, outcome: str, **extra: Any) -> dict[str, Any]:
        return {**asdict(self.key), **stamp(), **self.context, "outcome": outcome,
                "access_id": self.key.access_id, "identity": self.identity,
                "reason": self.reason, "result_digest": None, **extra}

    def _refuse(self, why: str) -> None:
        append(self.ledger, self._entry("refused", reason=why), key=self.test_key)
        self.recorded = True
        raise TestSetAccessError(f"refused: {why}. Every look at a test set spends it.",
                                 recorded=True)

    def __enter__(self) -> TestLock:
        entries = read_ledger(self.ledger)
        mine = [e for e in entries if e.get("access_id") == self.key.access_id]
        closed = next((e for e in mine if e["outcome"] == "closed"), None)
        if closed is not None:
            self.reason = ""
            self._refuse(f"access {self.key.access_id} closed at ledger line {closed['seq']} "
                         f"({closed['time']}, result {str(closed.get('result_digest'))[:12]}): "
                         "its numbers are fixed and no run computes them again. Its outputs "
                         "are not in place: restore them (`dvc checkout data/test` or `dvc "
                         "pull data/test`) and the stage opens nothing")
        # Unsealed before any line is written: a missing, damaged or foreign file is a clean
        # error that leaves the ledger as it was, with no access to close.
        with opening(self.key.access_id):
            self._tasks = [task for task in self._unseal() if task.id not in self.excluded]
        self._tests = TestSet(
            self.key.test_version, self.key.content_version, str(self.manifest["source"]),
            tuple(task.id for task in self._tasks),
            tuple(evaluated_digest(task)[:TASK_DIGEST_CHARS] for task in self._tasks))
        if any(e["outcome"] == "opened" for e in mine):
            outcome = "resumed"
            self.reason = ""  # a resume needs no reason and spends none
            append(self.ledger, self._entry(outcome), key=self.test_key)
        else:
            why = self._why_refused(entries)
            if why:
                self._refuse(why)
            outcome = "opened"
            self.seen_before = len(seen_tasks(entries, self._tests)[1])
            if not self.seen_before:
                self.reason = ""  # the first look at these tasks needs no reason
            if not accesses(entries, self.key.test_version, self.key.content_version):
                self.context["predecessor"] = predecessor(entries, self.key.test_version,
                                                          self.key.content_version)
            self._open_in_store()
        self.outcome, self.recorded = outcome, True
        self._open.enter_context(opening(self.key.access_id))
        return self

    def _open_in_store(self) -> None:
        """Write the `opened` line with the refusal rule decided again on the store's entries,
        inside its transaction: another machine's first open a moment earlier (of this access
        or another one of these tasks) makes this one a `refused` line, never a second
        access without a reason."""
        assert self._tests is not None
        fields = self._entry("opened", seen_before=self.seen_before, **self._tests.record())
        try:
            LedgerStore.for_export(self.ledger).open_access(fields, self.test_key,
                                                            check=self._why_refused)
        except AccessRefused as refused:
            self.recorded = True
            raise TestSetAccessError(f"{refused}. Every look at a test set spends it.",
                                     recorded=True) from None

    def _why_refused(self, entries: list[dict[str, Any]]) -> str | None:
        assert self._tests is not None
        return why_refused(entries, self._tests, self.key, self.identity, self.reason,
                           self.reason_for)

    def _unseal(self) -> list[Task]:
        path = self.root / SEALED_TEST
        try:
            plain = unseal(path.read_bytes(), self.test_key)
        except FileNotFoundError:
            raise TestSetAccessError(
                f"{path} is missing: restore it (`dvc checkout {SEALED_TEST}`) or re-run the "
                "split stage (`dvc repro split`); nothing was recorded") from None
        except WrongKeyError as error:
            raise TestKeyError(f"{path}: {error}; set HELDOUT_TEST_KEY to the key it was "
                               "sealed for; nothing was recorded") from None
        except SealBrokenError as error:
            raise TestSetAccessError(f"{path}: {error}; re-run the split stage (`dvc repro "
                                     "split`) or restore the file; nothing was recorded") from None
        if sha256_hex(plain) != self.manifest["digests"]["test"]:
            raise TestSetAccessError(f"{SEALED_TEST} does not match the manifest's test digest; "
                                     "nothing was recorded")
        return load_jsonl_bytes(plain, str(SEALED_TEST))

    def read_tasks(self) -> list[Task]:
        """The test tasks this access evaluates: the split, checked against the manifest's
        digest when the lock opened, less the excluded ones."""
        return list(self._tasks)

    def close(self, result_digest: str, outputs: dict[str, str],
              verdict: dict[str, Any]) -> None:
        """The access's last line: its result digest, the digest of every output file that
        holds it and the verdict they gave, fixed from now on (the report checks them)."""
        append(self.ledger, self._entry("closed", result_digest=result_digest,
                                        outputs=outputs, verdict=verdict),
               key=self.test_key)

    def __exit__(self, *exc: object) -> None:
        self._open.close()


def why_refused(entries: list[dict[str, Any]], tests: TestSet, key: AccessKey,
                identity: dict[str, Any], reason: str, reason_for: str) -> str | None:
    """Why this identity may not open these tasks: earlier accesses opened some of them and the
    reason is missing, names another access, or was already spent on one (None: it may)."""
    sharing, seen = seen_tasks(entries, tests)
    if not sharing:
        return None
    last = sharing[-1]
    this = (f"candidate {key.candidate} (settings {key.candidate_settings[:12]}) "
            f"vs {key.base} (settings {key.base_settings[:12]}), harness "
            f"{key.harness[:12]}, access id {key.access_id}")
    if not reason:
        changes = changed_inputs(last.get("identity"), identity)
        shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more"
                                          if len(changes) > 6 else "")
        return (f"{len(seen)} of the {len(tests.task_ids)} test tasks this access "
                f"would open were already opened by {len(sharing)} earlier access(es) "
                f"(last: ledger line {last['seq']}, {last['time']}, by {last['user']}, "
                f"test set {last.get('content_version') or last['test_version']}, candidate "
                f"{last['candidate']} (settings "
                f"{(last.get('candidate_settings') or '?')[:12]}) vs {last['base']} "
                f"(settings {(last.get('base_settings') or '?')[:12]})). This access "
                f"({this}) differs from it in: {shown}. It would be access number "
                f"{len(sharing) + 1} to those tasks: a closed access's numbers are fixed, "
                "and another look is a new access. If you must, set "
                "params.test.reaccess.reason to why and params.test.reaccess.access to "
                f"{key.candidate}: it will be recorded, counted and spent")
    if reason_for not in (key.candidate, key.access_id):
        return (f"params.test.reaccess names access {reason_for or '(none)'!r}, and "
                f"this access is {this}: a reason justifies only the access it names")
    spent = next((e for e in entries if e["outcome"] == "opened"
                  and (e.get("reason") or "").strip() == reason), None)
    if spent is not None:
        return (f"the reason {reason!r} was spent by ledger line {spent['seq']} "
                f"({spent['time']}, candidate {spent['candidate']}): a new access needs a "
                "new reason")
    return None


def refuse(root: Path, key: AccessKey, why: str, **context: Any) -> None:
    """Record a refused attempt for `key` and raise: for checks made before the lock opens."""
    record_refusal(root / LEDGER, why, {**asdict(key), "access_id": key.access_id, **context})
