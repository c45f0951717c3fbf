"""Task flips: each compared task's pass rates in both arms and which way it moved, the unit
the verdict decides on."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from heldout.report.contamination import Contamination
from heldout.report.inputs import Arm
from heldout.report.sections import Flips, PerArm, TaskFlip


def flips_section(
    arms: PerArm[Arm], groups: Mapping[str, str] | None, contamination: Contamination | None
) -> Flips:
    """Per task, by the pass rates over every episode: the unit the verdict decides on."""
    base, candidate = arms
    flip = np.select(
        [candidate.rates > base.rates, candidate.rates < base.rates,
         (base.rates == 1) & (candidate.rates == 1), (base.rates == 0) & (candidate.rates == 0)],
        ["improved", "regressed", "both pass", "both fail"],
        "tied",
    )
    flagged = {task.task_id for task in contamination.flagged} if contamination else None
    # Whole columns as lists: a lookup per task and column costs seconds at 10,000 tasks.
    columns = zip(base.counts.index, base.counts["c"].tolist(), base.counts["n"].tolist(),
                  candidate.counts["c"].tolist(), candidate.counts["n"].tolist(),
                  (candidate.rates - base.rates).tolist(), flip.tolist(), strict=True)
    rows = [
        TaskFlip(
            task_id=task,
            group=groups.get(task, task) if groups is not None else None,
            base_c=int(base_c), base_n=int(base_n),
            candidate_c=int(candidate_c), candidate_n=int(candidate_n),
            difference=float(d),
            flip=str(f),
            flagged=None if flagged is None else task in flagged,
        )
        for task, base_c, base_n, candidate_c, candidate_n, d, f in columns
    ]
    rows.sort(key=lambda row: (-row.difference, row.task_id))
    ids = {kind: [row.task_id for row in rows if row.flip == kind] for kind in set(flip)}
    return Flips(
        improved=ids.get("improved", []),
        regressed=ids.get("regressed", []),
        both_pass=len(ids.get("both pass", [])),
        both_fail=len(ids.get("both fail", [])),
        tasks=rows,
        tied=len(ids.get("tied", [])),
    )
