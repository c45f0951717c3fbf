"""What the ledger says about earlier looks at a test set: which accesses opened it, which of a
new access's tasks they already opened, and how a new access differs from the last of them.

A task is counted by its id within the task source, and by what is evaluated of it
(heldout.tasks.split.evaluated_digest) in any source: a comment added to one hidden test keeps
the id, a copied source under new ids keeps the evaluated content, and either way the task
was seen. Lines from before tasks were recorded are matched by their test set's version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# How much of an evaluated digest a ledger line keeps per task: enough that two different
# tasks never share one by chance (2^-64), short enough for a line of thousands of tasks.
TASK_DIGEST_CHARS = 16


@dataclass(frozen=True)
class TestSet:
    """The test set an access evaluates: its versions, its source and its tasks."""

    __test__ = False

    test_version: str
    content_version: str
    source: str
    task_ids: tuple[str, ...]
    task_digests: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        return {"task_source": self.source, "tasks": list(self.task_ids),
                "task_digests": list(self.task_digests)}


def same_test_set(entry: Mapping[str, Any], test_version: str,
                  content_version: str | None) -> bool:
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


def seen_tasks(ledger_entries: list[dict[str, Any]], tests: TestSet
               ) -> tuple[list[dict[str, Any]], set[str]]:
    """The opened accesses that share a task with `tests`, and the ids of its tasks they
    opened."""
    ids = dict(zip(tests.task_ids, tests.task_digests, strict=True))
    by_digest = {digest: task for task, digest in ids.items()}
    sharing, seen = [], set()
    for entry in ledger_entries:
        if entry.get("outcome") != "opened":
            continue
        if "tasks" not in entry:  # a line from before tasks were recorded
            shared = set(ids) if same_test_set(entry, tests.test_version,
                                               tests.content_version) else set()
        else:
            shared = {task for task in entry["tasks"] if task in ids} if (
                entry.get("task_source") == tests.source) else set()
            shared |= {by_digest[d] for d in entry.get("task_digests", []) if d in by_digest}
        if shared:
            sharing.append(entry)
            seen |= shared
    return sharing, seen


def predecessor(ledger_entries: list[dict[str, Any]], test_version: str,
                content_version: str) -> dict[str, Any] | None:
    """The test set opened last before this one, and how often it was: what the first access
    of a changed set records, so a new version never hides the count of the old."""
    others = [e for e in ledger_entries if e["outcome"] == "opened"
              and not same_test_set(e, test_version, content_version)]
    if not others:
        return None
    last = others[-1]
    version = last.get("content_version") or last["test_version"]
    count = sum((e.get("content_version") or e["test_version"]) == version for e in others)
    return {"content_version": version, "test_version": last["test_version"],
            "accesses": count}


def changed_inputs(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """The dotted paths at which two identity documents differ, each with both values when
    they are short: what makes a run another access than the one it follows."""
    if not before:
        return ["inputs (the earlier access was recorded before its inputs were)"]
    left, right = _flat(before), _flat(after)
    changes = []
    for path in sorted(set(left) | set(right)):
        old, new = left.get(path, "(absent)"), right.get(path, "(absent)")
        if old != new:
            shown = f"{_short(old)} → {_short(new)}"
            changes.append(f"{path} ({shown})" if len(shown) <= 80 else path)
    return changes


def _short(value: Any) -> str:
    return f"{len(value)} items" if isinstance(value, list) and len(value) > 4 else str(value)


def _flat(document: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(document, Mapping):
        return {prefix: document}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat
