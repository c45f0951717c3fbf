"""Contamination in the verdict: which compared tasks a training corpus holds a copy of, and the
headline's numbers again without them.

Decontamination (heldout.contamination) finds evaluation items a training corpus holds; its
policy either keeps them in the split and flags them (they are rolled out and scored) or drops
them before any rollout. A flagged task may be in the numbers only because it was memorized, so
the report marks it and says what pass@1 and the difference are without it; a dropped one is in
no number, so the report says only how many there were.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from heldout.report.estimates import headline_estimates
from heldout.report.formatting import (
    id_list,
    interval_percent,
    interval_points,
    percent,
    points,
)
from heldout.report.inputs import Arm
from heldout.report.sections import ROLES, PerArm, _FlatRecord
from heldout.statistics.intervals import Interval
from heldout.statistics.power import Reruns


@dataclass(frozen=True)
class FlaggedTask(_FlatRecord):
    task_id: str
    methods: list[str]  # how decontamination found the copy (heldout.contamination.index)


@dataclass(frozen=True)
class WithoutFlagged:
    """The headline's numbers again, over the compared tasks less the flagged ones."""

    tasks: int
    pass_at_1: PerArm[Interval]
    difference: Interval  # candidate − base, paired, as the headline's
    verdict: str  # what the headline's rule gives for these numbers

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "pass_at_1": self.pass_at_1.to_json(Interval.to_json),
                "difference": self.difference.to_json(), "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WithoutFlagged:
        return cls(data["tasks"], PerArm.from_json(data["pass_at_1"], Interval.from_json),
                   Interval.from_json(data["difference"]), data["verdict"])


@dataclass(frozen=True)
class Contamination:
    """Evaluation items a training corpus holds a copy of, as decontamination's policy left
    them: `flagged` were compared and scored like the rest (policy flag), `excluded` were left
    out before any rollout (policy drop), `not_compared` were flagged but are no compared task
    (so no number here includes them)."""

    policy: str
    flagged: list[FlaggedTask]
    excluded: list[FlaggedTask]
    not_compared: list[FlaggedTask]
    without_flagged: WithoutFlagged | None  # None when no task, or every task, is flagged
    # Each leakage channel decontamination checked (heldout.contamination.channels: what it
    # compared, the threshold, the counts) and those it names as checked elsewhere; empty for a
    # decontamination report from before them.
    channels: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        listed = {name: [task.to_json() for task in getattr(self, name)]
                  for name in ("flagged", "excluded", "not_compared")}
        without = self.without_flagged
        return {"policy": self.policy, **listed,
                "without_flagged": None if without is None else without.to_json(),
                "channels": self.channels}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Contamination:
        def listed(name: str) -> list[FlaggedTask]:
            return [FlaggedTask.from_json(task) for task in data[name]]

        without = data["without_flagged"]
        return cls(data["policy"], listed("flagged"), listed("excluded"), listed("not_compared"),
                   None if without is None else WithoutFlagged.from_json(without),
                   list(data.get("channels") or []))


@dataclass(frozen=True)
class Decontamination:
    """What decontamination found about the compared split: every item a training corpus
    holds a copy of, with the methods that found it, and those of them its policy (`flag` or
    `drop`) excluded before any rollout."""

    policy: str
    flagged: Mapping[str, Sequence[str]]  # task id → methods
    excluded: Collection[str] = field(default_factory=frozenset)
    channels: Sequence[Mapping[str, Any]] = ()  # its report's `channels` rows


def _only(arm: Arm, keep: np.ndarray) -> Arm:
    kept = arm.counts.index[keep]
    episodes = None if arm.episodes is None else \
        arm.episodes[arm.episodes["task_id"].isin(kept)]
    return replace(arm, counts=arm.counts[keep], at_sample=arm.at_sample[keep],
                   episodes=episodes)


def contamination_section(
    arms: PerArm[Arm],
    found: Decontamination,
    *,
    groups: Mapping[str, str] | None,
    reruns: Reruns | None,
    mismatch: str | None,
    seed: int,
    reference: Interval | None = None,
) -> Contamination:
    """Flagged ids among the compared tasks are marked and left out of a second estimate;
    flagged ids that are no compared task change no number and are listed as such. An id the
    policy excluded that was compared all the same was scored, so it counts as flagged."""
    task_ids = arms.base.counts.index
    compared, excluded = set(task_ids), set(found.excluded)
    scored = compared & (set(found.flagged) | excluded)

    def listed(ids: set[str]) -> list[FlaggedTask]:
        return [FlaggedTask(task, sorted(found.flagged.get(task, ()))) for task in sorted(ids)]

    keep = ~task_ids.isin(sorted(scored))
    without = None
    if scored and keep.any():
        estimates = headline_estimates(arms.map(lambda arm: _only(arm, keep)), groups=groups,
                                       reruns=reruns, mismatch=mismatch, seed=seed,
                                       reference=reference)
        without = WithoutFlagged(
            tasks=int(keep.sum()),
            pass_at_1=estimates.pass_at_1,
            difference=estimates.decision.difference,
            verdict=estimates.decision.verdict,
        )
    return Contamination(
        policy=found.policy,
        flagged=listed(scored),
        excluded=listed(excluded - compared),
        not_compared=listed(set(found.flagged) - compared - excluded),
        without_flagged=without,
        channels=[dict(row) for row in found.channels],
    )


# --------------------------------------------------------------------------------------------
# In words: what the headline says about it


def _listed(tasks: list[FlaggedTask]) -> str:
    return id_list([f"{task.task_id} ({', '.join(task.methods)})" if task.methods
                    else task.task_id for task in tasks])


def _flagged_words(found: Contamination, names: PerArm[str], compared: int) -> str:
    count, without = len(found.flagged), found.without_flagged
    text = (f"{count} of the {compared} tasks compared {'was' if count == 1 else 'were'} "
            "flagged as contaminated, a training corpus holding a copy (by method): "
            f"{_listed(found.flagged)}. {'It is' if count == 1 else 'They are'} scored above; ")
    if without is None:
        return text + "every compared task is flagged, so nothing is left to compare without them."
    base, candidate = without.pass_at_1
    difference = without.difference
    return text + (
        f"without them ({without.tasks} tasks): pass@1 {names.base} {percent(base.estimate)} "
        f"{interval_percent(base.low, base.high)}, {names.candidate} "
        f"{percent(candidate.estimate)} {interval_percent(candidate.low, candidate.high)}, "
        f"difference {points(difference.estimate)} points "
        f"{interval_points(difference.low, difference.high)}; the same rule's verdict: "
        f"{without.verdict}."
    )


def contamination_words(
    found: Contamination | None, names: PerArm[str], compared: int
) -> list[tuple[str, str]]:
    """The headline's sentences on contamination, each with its tone (warning, note, plain);
    none when the report was given no decontamination to speak of."""
    if found is None:
        return []
    words = []
    if found.flagged:
        words.append((_flagged_words(found, names, compared), "warning"))
    if found.excluded:
        words.append((f"{len(found.excluded)} task(s) a training corpus holds a copy of were "
                      f"excluded before any rollout (decontamination policy {found.policy}), so "
                      f"no number here includes them: {_listed(found.excluded)}.", "note"))
    if found.not_compared:
        words.append(("Flagged as contaminated but not among the compared tasks, so in no "
                      f"number here: {_listed(found.not_compared)}.", "note"))
    if not words:
        words.append(("No compared task was flagged as contaminated.", "plain"))
    return words


def contamination_metrics(contamination: Contamination) -> dict[str, float | int]:
    metrics: dict[str, float | int] = {"flagged_tasks": len(contamination.flagged),
                                       "excluded_tasks": len(contamination.excluded)}
    without = contamination.without_flagged
    if without is not None:
        for role, interval in zip(ROLES, without.pass_at_1, strict=True):
            metrics[f"{role}_pass_at_1_without_flagged"] = interval.estimate
        metrics |= {"difference_without_flagged": without.difference.estimate,
                    "difference_without_flagged_low": without.difference.low,
                    "difference_without_flagged_high": without.difference.high}
    return metrics
