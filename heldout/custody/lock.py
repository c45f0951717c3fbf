"""The test lock: the only way to open the test split, and the record of every attempt.

An access is one (test_version, candidate, base, harness) key. The first access opens; the
same key again resumes it (a crash, `dvc repro --force`) without counting another access; a
different key is refused unless a reason is given, and the reason is recorded. Every attempt,
refused ones included, is a line in the ledger (heldout.custody.ledger).

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
from heldout.custody.ledger import append, read_ledger
from heldout.custody.seal import SealBrokenError, unseal
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes


@dataclass(frozen=True)
class AccessKey:
    test_version: str
    candidate: str
    base: str
    harness: str

    @property
    def access_id(self) -> str:
        return content_digest(asdict(self))[:16]


def accesses(ledger_entries: list[dict[str, Any]], test_version: str) -> list[dict[str, Any]]:
    """The opened accesses of one test_version, in order (resumes and refusals not counted)."""
    return [e for e in ledger_entries
            if e["outcome"] == "opened" and e["test_version"] == test_version]


def models_evaluated(ledger_entries: list[dict[str, Any]], test_version: str) -> int:
    """How many checkpoints, candidates and bases alike, have test numbers on this version."""
    opened = accesses(ledger_entries, test_version)
    return len({e["candidate"] for e in opened} | {e["base"] for e in opened})


class TestLock:
    """`with TestLock(...) as lock: tasks = lock.read_tasks(); ...; lock.close(digest)`."""

    __test__ = False

    def __init__(self, root: Path, key: AccessKey, manifest: dict[str, Any], *,
                 selection_digest: str, git_commit: str, reason: str = "",
                 mlflow_run_id: str | None = None):
        self.root, self.key, self.manifest = root, key, manifest
        self.ledger = root / LEDGER
        self.reason = reason.strip()
        self.context = {"selection_digest": selection_digest, "git_commit": git_commit,
                        "mlflow_run_id": mlflow_run_id}
        self.resumed = False
        self._open = ExitStack()  # holds the permission to open while the lock is open

    def _entry(self, outcome: str, **extra: Any) -> dict[str, Any]:
        return {**asdict(self.key), **stamp(), **self.context, "outcome": outcome,
                "access_id": self.key.access_id, "reason": self.reason,
                "result_digest": None, **extra}

    def __enter__(self) -> TestLock:
        earlier = accesses(read_ledger(self.ledger), self.key.test_version)
        if any(e["access_id"] == self.key.access_id for e in earlier):
            self.resumed = True
            append(self.ledger, self._entry("resumed"))
        elif earlier and not self.reason:
            last = earlier[-1]
            why = (f"{self.key.test_version} was already opened (ledger line {last['seq']}, "
                   f"{last['time']}, by {last['user']}) for candidate {last['candidate']} vs "
                   f"{last['base']} under harness {last['harness'][:12]}; this access "
                   f"(candidate {self.key.candidate} vs {self.key.base}, harness "
                   f"{self.key.harness[:12]}) would be access number {len(earlier) + 1}")
            append(self.ledger, self._entry("refused", reason=why))
            raise TestSetAccessError(
                f"refused: {why}. Every look at a test set spends it. If you must, set "
                "params.test.reaccess_reason to why, and it will be recorded and counted."
            )
        else:
            append(self.ledger, self._entry("opened"))
        self._open.enter_context(opening(self.key.access_id))
        return self

    def read_tasks(self) -> list[Task]:
        """The test split's tasks, after checking them against the manifest's digest."""
        digest, salt = self.manifest["digests"]["test"], self.manifest["salt"]
        try:
            plain = unseal((self.root / SEALED_TEST).read_bytes(), salt, digest)
        except SealBrokenError as error:
            raise TestSetAccessError(f"{self.root / SEALED_TEST}: {error}; re-run the split "
                                     "stage (dvc repro) or restore the file") from None
        if sha256_hex(plain) != digest:
            raise TestSetAccessError(f"{SEALED_TEST} does not match the manifest's test digest")
        return load_jsonl_bytes(plain, str(SEALED_TEST))

    def close(self, result_digest: str) -> None:
        append(self.ledger, self._entry("closed", result_digest=result_digest))

    def __exit__(self, *exc: object) -> None:
        self._open.close()


def refuse(root: Path, key: AccessKey, why: str, **context: Any) -> None:
    """Record a refused attempt for `key` and raise: for checks made before the lock opens."""
    record_refusal(root / LEDGER, why, {**asdict(key), "access_id": key.access_id, **context})
