"""By date (issue 42): the compared tasks split by when they were released against the arms'
training-data cutoffs. A task released after a checkpoint's cutoff cannot be in its training
data; one released before may be, whatever decontamination found. So the difference on the
tasks released after the cutoff is the one no leak of the task itself can explain.

The split uses the later of the two arms' cutoffs: "after" is then unseen by both arms (with
one arm's cutoff only, unseen by that arm; the other's is not known). Each part has its tasks,
each arm's pass rate, the paired difference and its interval, computed as the slices'
(heldout.report.slices: the verdict's interval method over groups where tasks have them,
"unmeasured" under MEASURED_FROM tasks or a single group). Tasks without a date are counted,
not placed.

In the pipeline the dates are the ones the test stage recorded inside the access (access.json
`dates`, its digest in the ledger's closed line): a task's `released` is no part of what the
one-access rule keys on (heldout.tasks.split._NOT_EVALUATED), so an edit of a task file after
the access cannot move this split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from heldout.report.inputs import Arm
from heldout.report.sections import PerArm
from heldout.report.slices import SliceRow, _slice_row

PARTS = ("on or before", "after")  # released on or before the cutoff, after it


@dataclass(frozen=True)
class ReleaseDates:
    """What the split reads: task id → its release date (YYYY-MM-DD; a task it omits has
    none) and each arm's training-data cutoff (None: not given)."""

    released: Mapping[str, str]
    cutoffs: PerArm[str | None]


@dataclass(frozen=True)
class ByDate:
    """The compared tasks by release date against `cutoff`: one row per part (PARTS), and the
    tasks that carry no date."""

    cutoff: str
    cutoff_from: str  # which arm's cutoff it is, and what "after" means then
    cutoffs: PerArm[str | None]
    parts: list[SliceRow]
    undated: int

    def to_json(self) -> dict[str, Any]:
        return {"cutoff": self.cutoff, "cutoff_from": self.cutoff_from,
                "cutoffs": self.cutoffs.to_json(), "parts": [row.to_json() for row in self.parts],
                "undated": self.undated}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ByDate:
        return cls(data["cutoff"], data["cutoff_from"], PerArm.from_json(data["cutoffs"]),
                   [SliceRow.from_json(row) for row in data["parts"]], data["undated"])

    def metrics(self) -> dict[str, float | int]:
        """metrics/test.json's by_date: each part's tasks and difference, the undated."""
        metrics: dict[str, float | int] = {"by_date_undated": self.undated}
        for row in self.parts:
            key = row.slice.replace(" ", "_")
            metrics[f"by_date_{key}_tasks"] = row.tasks
            if row.difference is not None:
                metrics[f"by_date_{key}_difference"] = row.difference
        return metrics


def _cutoff_words(names: PerArm[str], cutoffs: PerArm[str | None], cutoff: str) -> str:
    given = [(name, value) for name, value in zip(names, cutoffs, strict=True) if value]
    if len(given) == 1:
        (name, _), = given
        return (f"{name}'s data cutoff (the other arm gives none): \"after\" is unseen by "
                f"{name}; for the other arm it is not known")
    if cutoffs.base == cutoffs.candidate:
        return "both arms' data cutoff: \"after\" is unseen by both"
    shown = ", ".join(f"{name} {value}" for name, value in given)
    return (f"the later of the two arms' data cutoffs ({shown}): \"after\" is unseen by "
            "both")


def by_date_section(arms: PerArm[Arm], dates: ReleaseDates | None,
                    labels: np.ndarray | None, seed: int) -> ByDate | None:
    """The compared tasks (in the arms' task order; `labels`: their groups, or None) split by
    release date at the later of the arms' cutoffs; None when no arm gives a cutoff or no
    compared task a date."""
    if dates is None or not any(dates.cutoffs):
        return None
    released = [dates.released.get(task) for task in arms.base.counts.index]
    if not any(released):
        return None
    # YYYY-MM-DD strings order as the dates they name.
    cutoff = max(value for value in dates.cutoffs if value)
    dated = np.array([day is not None for day in released])
    before = np.array([day is not None and day <= cutoff for day in released])
    parts = [_slice_row(name, arms.base.rates[mask], arms.candidate.rates[mask],
                        None if labels is None else labels[mask], seed)
             for name, mask in zip(PARTS, (before, dated & ~before), strict=True)]
    return ByDate(cutoff, _cutoff_words(arms.map(lambda arm: arm.name), dates.cutoffs, cutoff),
                  dates.cutoffs, parts, int((~dated).sum()))


def recorded_dates(access: Mapping[str, Any]) -> ReleaseDates | None:
    """The dates a test access recorded (access.json `dates`: `released` by task id and
    `data_cutoff` by arm), or None for an access that recorded none."""
    dates = access.get("dates")
    if not dates:
        return None
    cutoffs = dates.get("data_cutoff") or {}
    return ReleaseDates(dict(dates.get("released") or {}),
                        PerArm(cutoffs.get("base"), cutoffs.get("candidate")))
