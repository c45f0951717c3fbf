"""What the test stage would do with an access, told from the ledger alone before it runs: read
the results already recorded, resume an access a crash left open, open one, or be refused, and
why, in the lock's own words (heldout.custody.lock.why_refused). Nothing is opened and no key is
read: the tasks an access would open are the ones the last access to the same test set recorded,
less the tasks now excluded; a test set no access opened is said to open, its tasks' content
checked against other test sets only when it does (`heldout plan`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from heldout.custody.history import TestSet, accesses, seen_tasks
from heldout.custody.lock import AccessKey, why_refused

OUTCOMES = ("reads", "resumes", "opens", "refused")


@dataclass(frozen=True)
class AccessForecast:
    outcome: str  # one of OUTCOMES
    why: str


def forecast_access(entries: list[dict[str, Any]], key: AccessKey, identity: dict[str, Any], *,
                    reason: str, reason_for: str, source: str, excluded: frozenset[str],
                    results_in_place: str | None) -> AccessForecast:
    """`results_in_place`: the access id the test outputs in the workspace say they hold."""
    name = f"access {key.access_id}"
    mine = [entry for entry in entries if entry.get("access_id") == key.access_id]
    closed = next((entry for entry in mine if entry["outcome"] == "closed"), None)
    if closed is not None:
        if results_in_place == key.access_id:
            return AccessForecast("reads", f"{name} closed at ledger line {closed['seq']}; the "
                                  "outputs hold its results, and reading them opens nothing")
        return AccessForecast("refused", (
            f"{name} closed at ledger line {closed['seq']}: its numbers are fixed and its "
            "outputs are not in place; restore them (`dvc checkout data/test` or `dvc pull "
            "data/test`) and the stage opens nothing"))
    if any(entry["outcome"] == "opened" for entry in mine):
        return AccessForecast("resumes", f"{name} opened and never closed (a crash): it "
                              "resumes, and counts no new access")
    earlier = accesses(entries, key.test_version, key.content_version)
    recorded = next((entry for entry in reversed(earlier) if "tasks" in entry), None)
    if recorded is None:
        if earlier:  # lines from before tasks were recorded: every task of the set was seen
            return AccessForecast("refused" if not reason else "opens", (
                f"{len(earlier)} earlier access(es) opened test set {key.test_version[:12]}; "
                "another needs params.test.reaccess (its reason and the access it names)"))
        return AccessForecast("opens", (
            f"the first access to test set {key.test_version[:12]} (whether its tasks' content "
            "was opened under another test set is checked when it opens)"))
    kept = [(task, digest) for task, digest in zip(recorded["tasks"], recorded["task_digests"],
                                                   strict=True) if task not in excluded]
    tests = TestSet(key.test_version, key.content_version, source,
                    tuple(task for task, _ in kept), tuple(digest for _, digest in kept))
    if not seen_tasks(entries, tests)[0]:
        return AccessForecast("opens", f"none of its {len(tests.task_ids)} tasks was opened "
                              "by an earlier access")
    why = why_refused(entries, tests, key, identity, reason.strip(), reason_for.strip())
    if why:
        return AccessForecast("refused", why)
    return AccessForecast("opens", (
        f"access number {len(earlier) + 1} to test set {key.test_version[:12]}, on the reason "
        f"{reason.strip()!r}, which it will record and spend"))
