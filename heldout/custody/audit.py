"""`heldout audit`: is the record of test-set accesses whole, and do its witnesses agree?

Three witnesses, each covering what the others cannot:
- the ledger's MACs (heldout.custody.ledger): no line can be written, edited or forged without
  the test key, and the chain pins each line to the one before;
- MLflow: every run that touched the test split, deleted runs included, must have its ledger
  lines and agree with them (candidate, base, harness, test version, outcome), so a ledger cut
  short at the end, emptied or removed fails the audit;
- git (heldout.custody.anchor): a committed line never changes, even for the key's holder.

Also here, because it is the audit's own remedy: `abort_access`, which closes an access that was
opened and never closed (a killed stage), by a person, with a reason, under the key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heldout.custody.anchor import Anchor, anchor_ledger
from heldout.custody.export import witness
from heldout.custody.guard import LEDGER, stamp
from heldout.custody.history import models_evaluated
from heldout.custody.keys import KeyRing, TestKey, TestKeyError, load_keys
from heldout.custody.ledger import (
    UNAUTHENTICATED_OUTCOMES,
    ChainBreak,
    LedgerError,
    append,
    parsed_lines,
    verify_text,
)

TAG = "heldout."
OPENING = ("opened", "resumed")
ENDING = ("closed", "aborted")
# A ledger line's fields that its MLflow run carries as heldout.<field> tags.
TAGGED_FIELDS = ("test_version", "candidate", "base", "harness", "access_id")
DELETED_WITH_EXPERIMENT = "deleted with its experiment"
# The fields a line owns; an aborted line copies the rest from the line that opened the access.
_OWN_FIELDS = ("seq", "prev_hash", "key_id", "hash", "mac", "time", "user", "outcome", "reason",
               "result_digest")


@dataclass(frozen=True)
class TestAccessRun:
    """What MLflow says about one run that touched, or tried to touch, the test split."""

    __test__ = False

    run_id: str
    status: str
    tagged: bool
    test_input: bool
    lifecycle_stage: str = "active"
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        return self.tags.get(f"{TAG}test_access_refused") == "true"

    def found_by(self) -> str:
        return ("tagged heldout.test_access" if self.tagged
                else "tagged heldout.test_access_refused" if self.refused
                else "a dataset input with context test")


@dataclass
class AuditResult:
    chain_break: ChainBreak | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    accesses: list[dict[str, Any]] = field(default_factory=list)
    models_per_test_version: dict[str, int] = field(default_factory=dict)
    key_status: str = ""
    anchor: Anchor | None = None
    lines: int = 0
    scope: str = ""  # what the audit read, said with its verdict

    @property
    def ok(self) -> bool:
        return self.chain_break is None and not self.problems


def audit_project(root: Path, runs: list[TestAccessRun]) -> AuditResult:
    """The audit of the project at `root`: its ledger, the keys this process holds, git."""
    try:
        ring, key_error = load_keys(), ""
    except TestKeyError as error:
        ring, key_error = None, str(error)
    seen = witness(root, ring)  # the ledger store's lines; its export and git checked against them
    result = audit(seen.text, runs, ring=ring, key_error=key_error, anchor=anchor_ledger(root))
    result.scope = (f"read: {len(runs)} MLflow run(s) that touched the test split, from every "
                    "experiment of the store (deleted ones included); git history with replace "
                    "objects ignored")
    seen.add_to(result)
    return result


def audit(text: str | None, runs: list[TestAccessRun], *, ring: KeyRing | None,
          key_error: str = "", anchor: Anchor | None = None) -> AuditResult:
    """`text` is the ledger's content, None when the file is missing."""
    entries = parsed_lines(text or "")
    result = AuditResult(verify_text(text, ring) if text else None, anchor=anchor,
                         lines=len((text or "").splitlines()))
    result.key_status = _key_status(entries, ring, key_error, result.problems)
    if not entries and runs:
        result.problems.append(
            f"{LEDGER} is {'missing' if text is None else 'empty'}, and MLflow has {len(runs)} "
            "run(s) that touched the test split (deleted ones included): the ledger was removed "
            f"or emptied; restore it (git checkout -- {LEDGER}, if it was committed)")
    _cross_check(entries, runs, result.problems)
    for access_id, line in open_accesses(entries).items():
        result.problems.append(
            f"access {access_id} (candidate {line.get('candidate')} vs {line.get('base')} on "
            f"{line.get('test_version')}, {line.get('outcome')} at ledger line {line.get('seq')}, "
            f"MLflow run {line.get('mlflow_run_id')}) was never closed or aborted: resume it "
            "(`dvc repro`: the same selection, params and harness resume the same access) or "
            f"close it: heldout abort {access_id} --reason \"…\"")
    if anchor is not None:
        result.problems.extend(anchor.problems)
        result.notes.extend(anchor.notes)
    # Counted on whole lines only: a mangled one is already the chain break above.
    whole = [e for e in entries if all(k in e for k in ("outcome", *TAGGED_FIELDS[:3]))]
    opened = {e["test_version"] for e in whole if e["outcome"] == "opened"}
    result.models_per_test_version = {str(v): models_evaluated(whole, v) for v in opened}
    result.accesses = [e for e in entries
                       if e.get("outcome") in (*OPENING, *UNAUTHENTICATED_OUTCOMES, "aborted",
                                                "resolved")]
    return result


def _key_status(entries: list[dict[str, Any]], ring: KeyRing | None, key_error: str,
                problems: list[str]) -> str:
    keyed = [e for e in entries if e.get("mac") is not None]
    used = sorted({str(e.get("key_id")) for e in keyed})
    bare = len(entries) - len(keyed)
    counts = (f"{len(keyed)} line(s) MAC'd under test key(s) {', '.join(used) or '(none)'}, "
              f"{bare} unauthenticated refused line(s)")
    if ring is None:
        if keyed:
            problems.append(f"the ledger's MACs cannot be checked without the test key: "
                            f"{key_error}")
        return f"test key: none here; {counts}"
    held = ", ".join(key.key_id for key in ring.keys)
    return f"test key(s) {held} (from {ring.source}); {counts}"


def _cross_check(entries: list[dict[str, Any]], runs: list[TestAccessRun],
                 problems: list[str]) -> None:
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry.get("mlflow_run_id"):
            by_run[entry["mlflow_run_id"]].append(entry)
    for run in runs:
        problems.extend(_run_problems(run, by_run.get(run.run_id, [])))
    known = {run.run_id: run for run in runs}
    for entry in entries:
        named = entry.get("mlflow_run_id")
        if named and named not in known:
            problems.append(
                f"ledger line {entry.get('seq')} ({entry.get('outcome')}) names MLflow run "
                f"{named}, which the tracking store does not hold among the runs that touched "
                "the test split: the run is gone, or was never tagged")
        elif entry.get("outcome") in OPENING and named is None:
            problems.append(f"ledger line {entry.get('seq')} ({entry.get('outcome')}) names no "
                            "MLflow run: every access has one")


def _run_problems(run: TestAccessRun, lines: list[dict[str, Any]]) -> list[str]:
    if any(line.get("outcome") == "resolved" for line in lines):
        return []  # a person's resolution, MAC'd and listed with the accesses, is its record
    problems = []
    if run.lifecycle_stage != "active":
        how = " (its experiment was deleted)" if run.lifecycle_stage == DELETED_WITH_EXPERIMENT \
            else ""
        problems.append(f"MLflow run {run.run_id} was deleted{how}: a run that touched the test "
                        "split stays in the record; restore it: mlflow runs restore --run-id "
                        f"{run.run_id}")
    if run.test_input and not run.tagged:
        problems.append(f"MLflow run {run.run_id} read the test split without the "
                        "heldout.test_access tag: it did not come through the lock")
    if not lines:
        problems.append(f"MLflow run {run.run_id} touched the test split ({run.found_by()}) but "
                        "no ledger line names it")
        return problems
    outcomes = {line.get("outcome") for line in lines}
    if run.status == "FINISHED" and "refused" not in outcomes and not (
            set(OPENING) & outcomes and "closed" in outcomes):
        problems.append(
            f"MLflow run {run.run_id} finished an access but the ledger has "
            f"{', '.join(sorted(map(str, outcomes)))} for it, not opened/resumed and closed: "
            "ledger lines are missing")
    if "refused" in outcomes and run.status != "FAILED":
        problems.append(f"MLflow run {run.run_id} was refused (ledger line "
                        f"{_seq_of(lines, 'refused')}) and its status is {run.status}, not "
                        "FAILED: a refused attempt ends its run")
    problems.extend(_outcome_problems(run, lines, outcomes))
    for line in lines:
        for name in TAGGED_FIELDS:
            value, tag = line.get(name), run.tags.get(f"{TAG}{name}")
            if value is not None and tag != str(value):
                tagged = f"tagged {TAG}{name} = {tag!r}" if tag is not None else \
                    f"not tagged {TAG}{name}"
                problems.append(f"ledger line {line.get('seq')} says {name} {value!r}, and its "
                                f"MLflow run {run.run_id} is {tagged}")
    return problems


def _outcome_problems(run: TestAccessRun, lines: list[dict[str, Any]],
                      outcomes: set[Any]) -> list[str]:
    """What the lock decided, as the run's tag and as the ledger says. An aborted access may
    have died before its run was tagged or read the split: that is what the abort records."""
    tag = run.tags.get(f"{TAG}test_outcome")
    opening = next((line for line in lines if line.get("outcome") in OPENING), None)
    if opening is None:
        if tag in OPENING:
            return [f"MLflow run {run.run_id} is tagged {TAG}test_outcome = {tag!r}, and no "
                    "ledger line opened or resumed an access for it: ledger lines are missing"]
        return []
    if "aborted" in outcomes and tag is None:
        return []
    problems = []
    if tag != opening["outcome"]:
        tagged = f"tagged {TAG}test_outcome = {tag!r}" if tag is not None else \
            f"not tagged {TAG}test_outcome"
        problems.append(f"ledger line {opening.get('seq')} says MLflow run {run.run_id} "
                        f"{opening['outcome']} its access, and the run is {tagged}")
    if not run.test_input and "aborted" not in outcomes:
        problems.append(f"ledger line {opening.get('seq')}: MLflow run {run.run_id} has no test "
                        "dataset input")
    return problems


def _seq_of(lines: list[dict[str, Any]], outcome: str) -> Any:
    return next(line.get("seq") for line in lines if line.get("outcome") == outcome)


def open_accesses(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each access opened or resumed and not closed or aborted since, with the line that left
    it open."""
    still_open: dict[str, dict[str, Any]] = {}
    for entry in entries:
        access_id = entry.get("access_id")
        if access_id and entry.get("outcome") in OPENING:
            still_open[access_id] = entry
        elif access_id and entry.get("outcome") in ENDING:
            still_open.pop(access_id, None)
    return still_open


def resolve_run(path: Path, run: TestAccessRun, reason: str, key: TestKey) -> dict[str, Any]:
    """Record a person's resolution of an orphan run: one that touched the test split (or is
    tagged so) while no ledger line names it, left by heldout before every attempt was either
    ledgered or untagged. A "resolved" line, MAC'd under `key`, names the run and the reason; a
    run a ledger line already names is no orphan and is refused."""
    reason = reason.strip()
    if not reason:
        raise LedgerError("a resolution needs a reason (--reason \"…\"): it is recorded in the "
                          "ledger for every later reader")

    def resolved(entries: list[dict[str, Any]]) -> dict[str, Any]:
        named = [e.get("seq") for e in entries if e.get("mlflow_run_id") == run.run_id]
        if named:
            raise LedgerError(f"MLflow run {run.run_id} is named by ledger line(s) "
                              f"{', '.join(map(str, named))}: it is no orphan, and what the "
                              "audit says of it stands")
        return {**stamp(), "outcome": "resolved", "mlflow_run_id": run.run_id,
                "run_status": run.status, "run_lifecycle": run.lifecycle_stage,
                "found_by": run.found_by(), "reason": reason, "result_digest": None}

    return append(path, resolved, key)


def abort_access(path: Path, access_id: str, reason: str, key: TestKey) -> dict[str, Any]:
    """Close an open access without a result: an "aborted" line, MAC'd under `key`, copying the
    access's fields from the line that left it open. Refuses an access that is not open and an
    empty reason; returns the line written."""
    reason = reason.strip()
    if not reason:
        raise LedgerError("an abort needs a reason (--reason \"…\"): it is recorded in the "
                          "ledger for every later reader")

    def aborted(entries: list[dict[str, Any]]) -> dict[str, Any]:
        still_open = open_accesses(entries)
        line = still_open.get(access_id)
        if line is None:
            listed = ", ".join(sorted(still_open)) or "none"
            raise LedgerError(f"access {access_id} is not open (open accesses: {listed}): only "
                              "an access opened or resumed and not closed can be aborted")
        copied = {k: v for k, v in line.items() if k not in _OWN_FIELDS}
        return {**copied, **stamp(), "outcome": "aborted", "reason": reason,
                "result_digest": None}

    return append(path, aborted, key)
