"""What one pipeline run did, stage by stage: the record the pipeline flow logs to MLflow."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Literal

from heldout.canonical import sha256_hex

Outcome = Literal["ran", "up_to_date", "failed", "not_reached"]


@dataclass(frozen=True)
class StageOutcome:
    stage: str  # DVC's address: `score`, or `rollouts@base` for a foreach item
    outcome: Outcome
    wall_s: float
    error: str = ""  # why it failed: the stage's own message, else DVC's reason
    message: str = ""  # the user error the stage handed back (cli/main.py `main`), if any


def outcomes_after_failure(planned: list[str], done: list[StageOutcome]) -> list[StageOutcome]:
    """The stages a failure kept from running, so the summary accounts for every planned one."""
    return [StageOutcome(stage, "not_reached", 0.0) for stage in planned[len(done):]]


def stage_metric(stage: str) -> str:
    """An MLflow metric key for a stage's wall time (`@` is not allowed in keys)."""
    return "stage_s." + re.sub(r"[^\w./ -]", ".", stage)


def pipeline_summary(outcomes: list[StageOutcome], dvc_lock: bytes | None, wall_s: float) -> dict:
    counts = Counter(o.outcome for o in outcomes)
    return {
        "dvc_lock_sha256": sha256_hex(dvc_lock) if dvc_lock is not None else None,
        "wall_s": wall_s,
        "stage_wall_s": sum(o.wall_s for o in outcomes),
        "counts": {outcome: counts.get(outcome, 0)
                   for outcome in ("ran", "up_to_date", "failed", "not_reached")},
        "ran": [o.stage for o in outcomes if o.outcome == "ran"],
        "up_to_date": [o.stage for o in outcomes if o.outcome == "up_to_date"],
        "failed": [o.stage for o in outcomes if o.outcome == "failed"],
        "not_reached": [o.stage for o in outcomes if o.outcome == "not_reached"],
        "stages": [asdict(o) for o in outcomes],
    }
