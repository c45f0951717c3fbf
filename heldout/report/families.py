"""By family (issue 42, item 2): a split that held families out holds two kinds of test task,
and one checkpoint can score 0.93 on one and 0.03 on the other. The test tasks of the held-out
families (the family split: unseen families) beside the others (the variant split: seen
families, new groups), each with its tasks, each arm's pass rate, the paired difference and its
interval; then one row per family (an environment) among the test tasks.

Each row is measured as the slices are (heldout.report.slices): the interval of the tasks'
paired differences over their groups, unmeasured under MEASURED_FROM tasks or a single group.
It resamples the groups inside the row's families, so with a few held-out families it says how
well those families were measured, not how another unseen family would fare.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from heldout.canonical import content_digest
from heldout.errors import StageError
from heldout.report.inputs import Arm
from heldout.report.sections import PerArm
from heldout.report.slices import SliceRow, _slice_row

FAMILY_SPLIT = "family split: unseen families"
VARIANT_SPLIT = "variant split: seen families, new groups"


@dataclass(frozen=True)
class FamilySplit:
    """What the report needs to know of a split that held families out: the task field that
    names a family, the held-out families, and each test task's family."""

    field: str
    held_out: Collection[str]
    of_task: Mapping[str, str]


def recorded_families(manifest: Mapping[str, Any], access: Mapping[str, Any],
                      closed: Mapping[str, Any]) -> FamilySplit | None:
    """The test tasks' families as the access recorded them (stages/test.py), where the
    manifest says families were held out; None otherwise. A StageError when the access's
    closed ledger line holds another digest of them: a report is drawn from what the access
    recorded."""
    hold_out, families = manifest.get("hold_out"), access.get("families")
    if not hold_out or families is None:
        return None
    recorded = (closed.get("verdict") or {}).get("families_digest")
    if recorded != content_digest(families):
        raise StageError(f"data/test/access.json: its task families are not the ones access "
                         f"{closed.get('access_id')} closed with (ledger line "
                         f"{closed.get('seq')}): restore it (`dvc checkout data/test/access.json`)")
    return FamilySplit(hold_out["field"], frozenset(hold_out["values"]), families)


@dataclass(frozen=True)
class FamilyRow(SliceRow):
    """Tasks of one split kind or one family, measured as a slice is (`slice` holds its name):
    each arm's pass rate, the paired difference and its interval (None: unmeasured, `method`
    says why), improved / regressed / tied tasks."""

    held_out: bool | None = None  # None on the split kinds' rows

    @property
    def name(self) -> str:
        return self.slice

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {"name": data.pop("slice"), **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FamilyRow:
        fields = dict(data)
        return cls(slice=fields.pop("name"), **fields)


@dataclass(frozen=True)
class ByFamily:
    field: str
    held_out: list[str]
    splits: list[FamilyRow]  # the family split's row, then the variant split's
    environments: list[FamilyRow]  # one per family among the compared test tasks, by name

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "held_out": self.held_out,
                "splits": [row.to_json() for row in self.splits],
                "environments": [row.to_json() for row in self.environments]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ByFamily:
        return cls(data["field"], list(data["held_out"]),
                   [FamilyRow.from_json(row) for row in data["splits"]],
                   [FamilyRow.from_json(row) for row in data["environments"]])

    def metrics(self) -> dict[str, float | int]:
        """Each split kind's tasks and difference (report.json and MLflow)."""
        metrics: dict[str, float | int] = {}
        for key, row in zip(("family_split", "variant_split"), self.splits, strict=True):
            metrics[f"{key}_tasks"] = row.tasks
            if row.difference is not None:
                metrics[f"{key}_difference"] = row.difference
        return metrics


def _row(name: str, held_out: bool | None, mask: np.ndarray, arms: PerArm[Arm],
         labels: np.ndarray | None, seed: int) -> FamilyRow:
    measured = _slice_row(name, arms.base.rates[mask], arms.candidate.rates[mask],
                          None if labels is None else labels[mask], seed)
    return FamilyRow(**asdict(measured), held_out=held_out)


def by_family_section(arms: PerArm[Arm], split: FamilySplit, labels: np.ndarray | None,
                      seed: int) -> ByFamily:
    """The by-family section of the compared tasks (in the arms' task order; `labels`: their
    groups, or None where each task is its own). A compared task without a family is an error:
    the test access records every test task's."""
    task_ids = list(arms.base.counts.index)
    missing = [task_id for task_id in task_ids if task_id not in split.of_task]
    if missing:
        raise ValueError(f"by family: {len(missing)} compared task(s) have no family "
                         f"({', '.join(missing[:5])}); the test access records every test "
                         "task's")
    families = np.array([split.of_task[task_id] for task_id in task_ids], dtype=object)
    held = np.array([family in split.held_out for family in families], dtype=bool)
    splits = [_row(FAMILY_SPLIT, None, held, arms, labels, seed),
              _row(VARIANT_SPLIT, None, ~held, arms, labels, seed)]
    environments = [_row(str(family), family in split.held_out, families == family, arms,
                         labels, seed) for family in sorted(set(families))]
    return ByFamily(split.field, sorted(split.held_out), splits, environments)
