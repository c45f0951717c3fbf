"""The grader-reason check on val (issue 42, item 4; 003: "post no score when one grader reason
covers ≥ 95% of rows"): each checkpoint's failing val rows by reason, as the score stage
records them. The test split's outcome files leave the judge's messages out (they quote the
hidden tests), so the report judges the grader by the same checkpoints' val rows, judged by
the same judge under the same harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from heldout.statistics.decision import Gate
from heldout.statistics.judge_trust import OneReason, failing_reasons, grader_reason_gate
from stages.catalog import rollout_file

REASON_COLUMNS = ["task_id", "passed", "status", "error"]


def grader_reasons(root: Path, checkpoints: list[str]) -> dict[str, dict[str, Any] | None]:
    """Each checkpoint's top failing reason on val (OneReason.to_json), None when no failing
    row gave a reason."""
    found = {}
    for name in checkpoints:
        table = pd.read_parquet(root / rollout_file(name), columns=REASON_COLUMNS,
                                read_dictionary=["task_id", "status", "error"])
        reason = failing_reasons(table)
        found[name] = None if reason is None else reason.to_json()
    return found


def grader_gates(scores: dict[str, Any], names: list[str]) -> tuple[Gate, ...]:
    """The gates the val scores' grader reasons put on a verdict between `names`."""
    found = [(name, (scores["checkpoints"].get(name) or {}).get("grader_reason"))
             for name in names]
    gates = [grader_reason_gate(f"{name}, on val", OneReason(
        record["reason"], record["covers"], record["failing"])) for name, record in found
        if record]
    return tuple(gate for gate in gates if gate is not None)
