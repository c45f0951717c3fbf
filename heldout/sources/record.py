"""What a reader of another harness's results gives back: one Outcome per task and sample, and
the Source card that says what made them. `imported_table` turns both into heldout's rollout
table, so `compare`, the report stage and MLflow read an import as they read a rollout file.

Nothing here is re-judged: an outcome is the other harness's score, read as pass or fail. A
sample that errored or hit a limit there is a failure counted apart (its status), as heldout's
own episodes are; it never leaves the denominator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from heldout.canonical import canonical_json, sha256_hex
from heldout.episodes.rows import ROW_COLUMNS, rollout_table

# Imported samples were drawn elsewhere, under seeds heldout never saw: their rows say 0.
NO_SEED = 0
GROUP_COLUMN = "group"


@dataclass(frozen=True)
class Outcome:
    """One sample of one task as the other harness scored it. `content`: a digest of what the
    task asked (its input and target, where the file holds them) that two files must share;
    `group`: the task's value of --group-key."""

    task_id: str
    sample: int
    passed: bool
    status: str = "ok"
    error: str = ""
    completion: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 0
    cost_usd: float = math.nan
    agent_s: float = math.nan
    started_at: float = math.nan
    content: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class Source:
    """What made a file's outcomes, as the protocol card says it. Two files compare when their
    `comparable` parts are equal: the same tool, task and scorer."""

    tool: str  # "inspect_ai", "lm-evaluation-harness", "evalplus", "SWE-bench", "verifiers"
    form: str  # "an .eval log", "--log_samples JSONL", ...
    task: str  # the tool's name for the task set
    scorer: str  # the scorer and the key read from it ("match", "acc (filter none)")
    model: str
    tool_version: str = ""
    file_sha256: str = ""
    reported: dict[str, float] = field(default_factory=dict)  # the tool's own figures
    notes: tuple[str, ...] = ()  # where heldout counts differently from the tool, and why

    @property
    def comparable(self) -> dict[str, str]:
        return {"tool": self.tool, "task": self.task, "scorer": self.scorer}

    @property
    def fingerprint(self) -> str:
        """The rows' `harness`: equal for files that were scored alike."""
        return sha256_hex(canonical_json({"imported": self.comparable}))

    def scored_by(self) -> str:
        return f"scored by {self.tool}'s {self.scorer} scorer, not re-judged by heldout"

    def card(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes), "scored_by": self.scored_by()}


@dataclass(frozen=True)
class Imported:
    source: Source
    outcomes: Sequence[Outcome]

    def table(self) -> pd.DataFrame:
        """heldout's rollout table of these outcomes, with a `group` column when every
        outcome has one."""
        rows = [{**{key: value for key, value in asdict(outcome).items()
                    if key in ROW_COLUMNS},
                 "seed": NO_SEED, "harness": self.source.fingerprint,
                 "completion_sha": sha256_hex(outcome.completion),
                 "public_passed": pd.NA, "finish_reason": "", "tool_calls": 0,
                 "end_reason": "", "exec_s": math.nan, "exec_cpu_s": math.nan,
                 "trajectory": "", "step_timings": ""} for outcome in self.outcomes]
        table = rollout_table(self.source.model, rows)
        groups = {(o.task_id, o.sample): o.group for o in self.outcomes}
        if all(group is not None for group in groups.values()):
            keys = zip(table["task_id"], table["sample"], strict=True)
            table[GROUP_COLUMN] = pd.array([groups[key] for key in keys], dtype="string")
        return table

    def samples_per_task(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.task_id] = counts.get(outcome.task_id, 0) + 1
        return counts

    def contents(self) -> dict[str, str]:
        """Each task's content digest, where the file says what the task asked."""
        return {o.task_id: o.content for o in self.outcomes if o.content is not None}
