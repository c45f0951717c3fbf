"""SWE-bench harness reports, read as JSON documents (swebench offers no reader): the run's
summary (`<model>.<run_id>.json`) or the per-instance `report.json` files, alone or as the
run's folder (`logs/run_evaluation/<run_id>/<model>/`).

One sample per instance, scored `resolved`. The summary's denominator is SWE-bench's own, the
whole dataset: an instance is resolved, unresolved, an empty patch (a failure), an error (the
harness could not run or grade it) or incomplete (no prediction); the newer schema's
`infra_failure_ids` and `ambiguous_failure_ids` name unresolved or errored instances whose logs
show a likely environment fault. Errors, infrastructure and ambiguous failures and incomplete
instances are failures counted apart (status `error`, the reason in `error`), never dropped.
A `report.json` whose log matched a known fault (`infra_failure_reason`) is counted apart the
same way. In a run's folder, an instance folder without a `report.json` is an error, as the
harness's own summary counts it; an empty patch leaves no folder at all, so only the summary
holds SWE-bench's whole denominator.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from heldout.bounded import read_document
from heldout.errors import HeldoutError
from heldout.sources.record import Imported, Outcome, Source

REPORT = "report.json"
# What the harness writes into an instance's folder (logs/run_evaluation/<run>/<model>/<id>/).
INSTANCE_FILES = (REPORT, "run_instance.log", "test_output.txt", "patch.diff", "eval.sh")
RESOLVED_KEY = "resolved"
# The summary's lists, in the order an instance's status is decided (an infrastructure
# failure is also in unresolved_ids or error_ids: the first list that names it wins).
FAILURES_APART = (("infra_failure_ids", "likely infrastructure failure"),
                  ("ambiguous_failure_ids", "ambiguous failure"),
                  ("error_ids", "the harness could not run or grade it"),
                  ("incomplete_ids", "no prediction"))
INSTANCE_NUMBER = re.compile(r"^(?P<repo>.+)-\d+$")
MAX_INSTANCES = 100_000


def is_run_summary(document: Any) -> bool:
    return isinstance(document, dict) and "resolved_ids" in document and (
        "total_instances" in document)


def is_instance_report(document: Any) -> bool:
    return isinstance(document, dict) and bool(document) and all(
        isinstance(value, dict) and RESOLVED_KEY in value for value in document.values())


def _check_keys(score_key: str | None, path: Path) -> None:
    if score_key not in (None, RESOLVED_KEY):
        raise HeldoutError(f"{path}: --score-key {score_key!r}: a SWE-bench report has one "
                           f"score, {RESOLVED_KEY}")


def _group(instance_id: str, group_key: str | None, path: Path) -> str | None:
    if group_key is None:
        return None
    if group_key != "repo":
        raise HeldoutError(f"{path}: --group-key {group_key!r}: a SWE-bench report groups "
                           "by repo only (the instance id before its number)")
    named = INSTANCE_NUMBER.match(instance_id)
    if named is None:
        raise HeldoutError(f"{path}: instance {instance_id!r} has no -NUMBER after its "
                           "repository: no repo to group it by")
    return named["repo"]


def _ids(summary: dict, key: str, path: Path) -> list[str]:
    value = summary.get(key, [])
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise HeldoutError(f"{path}: {key} must be a list of instance ids")
    return value


def _source(model: str, reported: dict[str, float]) -> Source:
    return Source(tool="SWE-bench", form="a harness report", task="SWE-bench instances",
                  scorer=RESOLVED_KEY, model=model, reported=reported)


def read_summary(path: Path, score_key: str | None, group_key: str | None) -> Imported:
    _check_keys(score_key, path)
    summary = read_document(path, "a SWE-bench run report")
    if not is_run_summary(summary):
        raise HeldoutError(f"{path}: not a SWE-bench run report (resolved_ids, "
                           "total_instances, ...)")
    reasons = summary.get("failure_reasons") or {}
    status: dict[str, tuple[str, str]] = {}
    for key, why in FAILURES_APART:
        for instance in _ids(summary, key, path):
            detail = reasons.get(instance) if key != "incomplete_ids" else None
            status.setdefault(instance, ("error", f"{why}: {detail}" if detail else why))
    for key, outcome in (("resolved_ids", ("ok", "")), ("unresolved_ids", ("ok", "")),
                         ("empty_patch_ids", ("ok", "empty patch"))):
        for instance in _ids(summary, key, path):
            status.setdefault(instance, outcome)
    resolved = set(_ids(summary, "resolved_ids", path))
    if len(status) > MAX_INSTANCES:
        raise HeldoutError(f"{path}: more than {MAX_INSTANCES:,} instances")
    outcomes = [Outcome(task_id=instance, sample=0, passed=instance in resolved and
                        status[instance][0] == "ok", status=status[instance][0],
                        error=status[instance][1], group=_group(instance, group_key, path))
                for instance in sorted(status)]
    total = summary.get("total_instances")
    reported = ({"resolved_rate": len(resolved) / total}
                if isinstance(total, int) and total > 0 else {})
    return Imported(_source(path.name.split(".", 1)[0], reported), outcomes)


def _instance_outcome(folder: Path, group_key: str | None, root: Path) -> Outcome:
    instance = folder.name
    report_file = folder / REPORT
    if not report_file.is_file():
        return Outcome(task_id=instance, sample=0, passed=False, status="error",
                       error="no report.json: the harness could not run or grade it",
                       group=_group(instance, group_key, root))
    report = read_document(report_file, "a SWE-bench report.json")
    entry = report.get(instance) if isinstance(report, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get(RESOLVED_KEY), bool):
        raise HeldoutError(f"{report_file}: not the report of instance {instance} "
                           f"({{\"{instance}\": {{\"resolved\": true|false, ...}}}})")
    return _entry_outcome(instance, entry, _group(instance, group_key, root))


def _entry_outcome(instance: str, entry: dict, group: str | None) -> Outcome:
    """A report.json's verdict; a log the harness could not parse whose text matched a known
    fault (`infra_failure_reason`: an environment or an ambiguous one) is counted apart."""
    reason = entry.get("infra_failure_reason")
    if reason:
        tier = "likely infrastructure" if entry.get("infra_failure") else "ambiguous"
        return Outcome(task_id=instance, sample=0, passed=False, status="error",
                       error=f"{tier} failure: {reason}", group=group)
    empty = entry.get("patch_is_None") or entry.get("patch_exists") is False
    return Outcome(task_id=instance, sample=0, passed=entry[RESOLVED_KEY] is True,
                   error="empty patch" if empty else "", group=group)


def read_reports(path: Path, score_key: str | None, group_key: str | None) -> Imported:
    """A run's folder of instance folders, or one report.json."""
    _check_keys(score_key, path)
    if path.is_file():
        report = read_document(path, "a SWE-bench report.json")
        if not is_instance_report(report):
            raise HeldoutError(f"{path}: not a SWE-bench report.json")
        outcomes = [_entry_outcome(instance, entry, _group(instance, group_key, path))
                    for instance, entry in sorted(report.items())]
        return Imported(_source(path.parent.parent.name, {}), outcomes)
    folders = sorted({file.parent for file in path.rglob("*")
                      if file.name in INSTANCE_FILES and file.is_file()})
    if not folders:
        raise HeldoutError(f"{path}: no instance folder (with {', '.join(INSTANCE_FILES)}) "
                           "under it: not a SWE-bench run's folder")
    if len({folder.parent for folder in folders}) > 1:
        raise HeldoutError(f"{path}: holds the reports of more than one model or run; give "
                           "one model's folder (logs/run_evaluation/<run_id>/<model>)")
    outcomes = [_instance_outcome(folder, group_key, path) for folder in folders]
    source = dataclasses.replace(_source(folders[0].parent.name, {}), notes=(
        f"a run's folder holds the {len(folders)} instance(s) the harness ran: an empty patch "
        "leaves no folder; the run's summary (<model>.<run_id>.json) counts every instance",))
    return Imported(source, outcomes)
