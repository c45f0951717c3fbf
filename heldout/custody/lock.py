"""The test lock: the only way to open the test split, and the record of every attempt.

An access is one key: the test set (its file's version and its evaluated content's), the
candidate and the base by name *and by the digest of their settings* (the model behind a name,
as the episode cache knows it), and the harness. The first access opens; the same key again
resumes it (a crash, `dvc repro --force`) without counting another access; a different key (a
new model behind an old name included) is refused unless a reason names it, and the reason is
recorded and spent: the next new key needs a new reason, so one justified look cannot become a
habit. Accesses are counted per evaluated content (heldout.tasks.split.evaluated_version), so
an edit to a test task's metadata does not reset the count; a set whose content changed is a
new version, whose first access records its predecessor's count. Every attempt, refused ones
included, is a line in the ledger (heldout.custody.ledger).

Outside a TestLock, the guard (heldout.custody.guard) refuses any open of the test split's files
and records the attempt.
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
from heldout.custody.keys import TestKey, TestKeyError
from heldout.custody.ledger import AccessRefused, LedgerStore, append, read_ledger
from heldout.custody.seal import SealBrokenError, WrongKeyError, unseal
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes


@dataclass(frozen=True)
class AccessKey:
    test_version: str
    candidate: str
    base: str
    harness: str
    candidate_settings: str
    base_settings: str
    content_version: str

    @property
    def access_id(self) -> str:
        return content_digest(asdict(self))[:16]


def same_test_set(entry: dict[str, Any], test_version: str, content_version: str | None) -> bool:
    """Whether a ledger line is about this test set: the same evaluated content, or, for a line
    from before contents were recorded, the very same file (which has the same content)."""
    if entry.get("content_version") and content_version:
        return entry["content_version"] == content_version
    return entry["test_version"] == test_version


def accesses(ledger_entries: list[dict[str, Any]], test_version: str,
             content_version: str | None = None) -> list[dict[str, Any]]:
    """The opened accesses of a test set, in order (resumes and refusals not counted)."""
    return [e for e in ledger_entries if e["outcome"] == "opened"
            and same_test_set(e, test_version, content_version)]


def models_evaluated(ledger_entries: list[dict[str, Any]], test_version: str,
                     content_version: str | None = None) -> int:
    """How many models, candidates and bases alike, have test numbers on a test set: a name
    with two settings digests is two models."""
    opened = accesses(ledger_entries, test_version, content_version)
    return len({(e["candidate"], e.get("candidate_settings")) for e in opened}
               | {(e["base"], e.get("base_settings")) for e in opened})


def predecessor(ledger_entries: list[dict[str, Any]], key: AccessKey) -> dict[str, Any] | None:
    """The test set opened last before this one, and how often it was: what the first access
    of a changed set records, so a new version never hides the count of the old."""
    others = [e for e in ledger_entries if e["outcome"] == "opened"
              and not same_test_set(e, key.test_version, key.content_version)]
    if not others:
        return None
    last = others[-1]
    version = last.get("content_version") or last["test_version"]
    count = sum((e.get("content_version") or e["test_version"]) == version for e in others)
    return {"content_version": version, "test_version": last["test_version"],
            "accesses": count}


class TestLock:
    """`with TestLock(...) as lock: tasks = lock.read_tasks(); ...; lock.close(digest)`."""

    __test__ = False

    def __init__(self, root: Path, key: AccessKey, manifest: dict[str, Any], *,
                 test_key: TestKey, selection_digest: str, git_commit: str, reason: str = "",
                 reason_for: str = "", spend: str = "", mlflow_run_id: str | None = None,
                 mlflow_experiment_id: str | None = None):
        self.root, self.key, self.manifest, self.test_key = root, key, manifest, test_key
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
        self._tasks: list[Task] = []
        self._open = ExitStack()  # holds the permission to open while the lock is open

    @property
    def resumed(self) -> bool:
        return self.outcome == "resumed"

    def _entry(self, outcome: str, **extra: Any) -> dict[str, Any]:
        return {**asdict(self.key), **stamp(), **self.context, "outcome": outcome,
                "access_id": self.key.access_id, "reason": self.reason,
                "result_digest": None, **extra}

    def __enter__(self) -> TestLock:
        entries = read_ledger(self.ledger)
        earlier = accesses(entries, self.key.test_version, self.key.content_version)
        if any(e["access_id"] == self.key.access_id for e in earlier):
            outcome = "resumed"
            self.reason = ""  # a resume needs no reason and spends none
        else:
            why = self._why_refused(earlier, entries)
            if why:
                append(self.ledger, self._entry("refused", reason=why), key=self.test_key)
                self.recorded = True
                raise TestSetAccessError(f"refused: {why}. Every look at a test set spends it.",
                                         recorded=True)
            outcome = "opened"
            if not earlier:
                self.reason = ""  # the first look needs no reason and spends none
                self.context["predecessor"] = predecessor(entries, self.key)
        # Unsealed before the line is written: a missing, damaged or foreign file is a clean
        # error that leaves the ledger as it was, with no access to close.
        with opening(self.key.access_id):
            self._tasks = self._unseal()
        if outcome == "opened":
            self._open_in_store()
        else:
            append(self.ledger, self._entry(outcome), key=self.test_key)
        self.outcome, self.recorded = outcome, True
        self._open.enter_context(opening(self.key.access_id))
        return self

    def _open_in_store(self) -> None:
        """Write the `opened` line with the refusal rule decided again on the store's entries,
        inside its transaction: another machine's first open a moment earlier (of this access
        key or another one of this test set) makes this one a `refused` line, never a second
        access without a reason."""
        def check(entries: list[dict[str, Any]]) -> str | None:
            earlier = accesses(entries, self.key.test_version, self.key.content_version)
            return self._why_refused(earlier, entries)

        try:
            LedgerStore.for_export(self.ledger).open_access(self._entry("opened"),
                                                            self.test_key, check=check)
        except AccessRefused as refused:
            self.recorded = True
            raise TestSetAccessError(f"{refused}. Every look at a test set spends it.",
                                     recorded=True) from None

    def _why_refused(self, earlier: list[dict[str, Any]],
                     entries: list[dict[str, Any]]) -> str | None:
        """Why a new key may not open this test version: the reason is missing, names another
        access, or was already spent on one."""
        if not earlier:
            return None
        last = earlier[-1]
        this = (f"candidate {self.key.candidate} (settings {self.key.candidate_settings[:12]}) "
                f"vs {self.key.base} (settings {self.key.base_settings[:12]}), harness "
                f"{self.key.harness[:12]}, access id {self.key.access_id}")
        if not self.reason:
            return (f"{self.key.content_version} was already opened (ledger line {last['seq']}, "
                    f"{last['time']}, by {last['user']}) for candidate {last['candidate']} "
                    f"(settings {(last.get('candidate_settings') or '?')[:12]}) vs "
                    f"{last['base']} (settings {(last.get('base_settings') or '?')[:12]}) under "
                    f"harness {last['harness'][:12]}; this access ({this}) "
                    f"would be access number {len(earlier) + 1}. If you must, set "
                    f"params.test.reaccess.reason to why and params.test.reaccess.access to "
                    f"{self.key.candidate}: it will be recorded, counted and spent")
        if self.reason_for not in (self.key.candidate, self.key.access_id):
            return (f"params.test.reaccess names access {self.reason_for or '(none)'!r}, and "
                    f"this access is {this}: a reason justifies only the access it names")
        spent = next((e for e in entries if e["outcome"] == "opened"
                      and (e.get("reason") or "").strip() == self.reason), None)
        if spent is not None:
            return (f"the reason {self.reason!r} was spent by ledger line {spent['seq']} "
                    f"({spent['time']}, candidate {spent['candidate']}): a new access needs a "
                    "new reason")
        return None

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
        """The test split's tasks, checked against the manifest's digest when the lock opened."""
        return list(self._tasks)

    def close(self, result_digest: str) -> None:
        append(self.ledger, self._entry("closed", result_digest=result_digest),
               key=self.test_key)

    def __exit__(self, *exc: object) -> None:
        self._open.close()


def refuse(root: Path, key: AccessKey, why: str, **context: Any) -> None:
    """Record a refused attempt for `key` and raise: for checks made before the lock opens."""
    record_refusal(root / LEDGER, why, {**asdict(key), "access_id": key.access_id, **context})
