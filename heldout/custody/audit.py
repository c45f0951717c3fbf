"""`heldout audit`: is the record of test-set accesses whole, and do its two witnesses agree?

The ledger (in git) and MLflow (the tracking store) each record every test access. The chain
of ledger hashes catches an edited or deleted line in the middle; a line deleted at the end
leaves the chain whole, so the cross-check with MLflow catches it: every MLflow run that
touched the test split must have its ledger lines, and every ledger access its MLflow run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from heldout.custody.ledger import ChainBreak
from heldout.custody.lock import models_evaluated


@dataclass(frozen=True)
class TestAccessRun:
    """What MLflow says about one run that touched, or tried to touch, the test split."""

    __test__ = False

    run_id: str
    status: str
    tagged: bool
    test_input: bool


@dataclass
class AuditResult:
    chain_break: ChainBreak | None
    problems: list[str] = field(default_factory=list)
    accesses: list[dict[str, Any]] = field(default_factory=list)
    models_per_test_version: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.chain_break is None and not self.problems


def audit(entries: list[dict[str, Any]], chain_break: ChainBreak | None,
          runs: list[TestAccessRun]) -> AuditResult:
    result = AuditResult(chain_break)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry.get("mlflow_run_id"):
            by_run[entry["mlflow_run_id"]].append(entry)
    known = {run.run_id: run for run in runs}

    for run in runs:
        outcomes = {e["outcome"] for e in by_run.get(run.run_id, [])}
        if not outcomes:
            result.problems.append(
                f"MLflow run {run.run_id} touched the test split ("
                + ("tagged heldout.test_access" if run.tagged else "a dataset input with "
                   "context test") + ") but no ledger line names it")
        elif run.status == "FINISHED" and not ({"opened", "resumed"} & outcomes
                                               and "closed" in outcomes):
            result.problems.append(
                f"MLflow run {run.run_id} finished an access but the ledger has "
                f"{', '.join(sorted(outcomes))} for it, not opened/resumed and closed: "
                "ledger lines are missing")
        if run.test_input and not run.tagged:
            result.problems.append(f"MLflow run {run.run_id} read the test split without the "
                                   "heldout.test_access tag: it did not come through the lock")

    for entry in entries:
        if entry["outcome"] in ("opened", "resumed", "closed"):
            run = known.get(entry.get("mlflow_run_id"))
            if run is None:
                result.problems.append(
                    f"ledger line {entry['seq']} ({entry['outcome']}) names MLflow run "
                    f"{entry.get('mlflow_run_id')}, which the tracking store does not have")
            elif entry["outcome"] != "closed" and not run.test_input:
                result.problems.append(
                    f"ledger line {entry['seq']}: MLflow run {run.run_id} has no test dataset "
                    "input")

    versions = {e["test_version"] for e in entries if e["outcome"] == "opened"}
    result.models_per_test_version = {v: models_evaluated(entries, v) for v in versions}
    result.accesses = [e for e in entries if e["outcome"] in ("opened", "resumed", "refused")]
    return result
