"""The report's sections as typed records: heldout.report.core builds them into a Report,
document.py words them, figures.py draws them, and each writes itself as the object report.json
holds for it and reads itself back from that object, so no module walks key paths of JSON."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Generic, Self, TypeVar

from heldout.statistics.decision import Decision, Gate, Support
from heldout.statistics.intervals import Interval
from heldout.statistics.paired_tests import McNemarResult, PermutationTest
from heldout.statistics.power import DesignEffect, NoiseFloor, RunDrift
from heldout.statistics.timing import Timing

ROLES = ("base", "candidate")
T = TypeVar("T")
U = TypeVar("U")


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class PerArm(Generic[T]):
    """One value for each arm; in JSON {"base": ..., "candidate": ...}. Iterates base first."""

    base: T
    candidate: T

    def __iter__(self) -> Iterator[T]:
        return iter((self.base, self.candidate))

    def map(self, function: Callable[[T], U]) -> PerArm[U]:
        return PerArm(function(self.base), function(self.candidate))

    def to_json(self, encode: Callable[[T], Any] = _as_is) -> dict[str, Any]:
        return {role: encode(value) for role, value in zip(ROLES, self, strict=True)}

    @staticmethod
    def from_json(data: Mapping[str, Any], decode: Callable[[Any], U] = _as_is) -> PerArm[U]:
        return PerArm(decode(data["base"]), decode(data["candidate"]))


class _FlatRecord:
    """A record whose JSON object holds its fields one to one."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(**data)


# --- Tasks and harness: what was compared --------------------------------------------------


@dataclass(frozen=True)
class Dropped(_FlatRecord):
    count: int
    ids: list[str]
    reason: str  # empty when none was dropped


@dataclass(frozen=True)
class EpisodeSpan(_FlatRecord):
    min: int
    max: int


@dataclass(frozen=True)
class Tasks:
    """The tasks compared (those both arms hold), what each file held, and what was dropped."""

    compared: int
    in_file: PerArm[int]
    dropped: PerArm[Dropped]
    episodes_per_task: PerArm[EpisodeSpan]

    def to_json(self) -> dict[str, Any]:
        return {"compared": self.compared, "in_file": self.in_file.to_json(),
                "dropped": self.dropped.to_json(Dropped.to_json),
                "episodes_per_task": self.episodes_per_task.to_json(EpisodeSpan.to_json)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tasks:
        return cls(data["compared"], PerArm.from_json(data["in_file"]),
                   PerArm.from_json(data["dropped"], Dropped.from_json),
                   PerArm.from_json(data["episodes_per_task"], EpisodeSpan.from_json))


@dataclass(frozen=True)
class Harness:
    """Whether both arms ran under one harness, and the fingerprints found in each."""

    match: bool
    fingerprints: PerArm[list[str]]

    def to_json(self) -> dict[str, Any]:
        return {"match": self.match, **self.fingerprints.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Harness:
        return cls(data["match"], PerArm.from_json(data))


# --- Headline and flips --------------------------------------------------------------------


@dataclass(frozen=True)
class Headline:
    """The decision with its words: `rule` and `reason` say in English what `decision` holds."""

    pass_at_1: PerArm[Interval]
    decision: Decision
    standard_error: float | None  # of the difference; None for a single task
    sample: int  # the sample index of the exact test's episodes
    rule: str
    reason: str
    warnings: list[str]
    notes: list[str]
    claim: str | None = None  # what the verdict is about; None in an older report.json

    def to_json(self) -> dict[str, Any]:
        decision = self.decision
        return {
            "pass_at_1": self.pass_at_1.to_json(Interval.to_json),
            "difference": {**decision.difference.to_json(),
                           "standard_error": self.standard_error},
            "test": asdict(decision.test),
            "mcnemar": {"sample": self.sample, **asdict(decision.mcnemar)},
            "run_drift": None if decision.drift is None else asdict(decision.drift),
            "support": {**asdict(decision.support),  # a list, as JSON reads it back
                        "truncation": list(decision.support.truncation),
                        "truncation_p": decision.support.truncation_p and list(
                            decision.support.truncation_p)},
            "mismatch": decision.mismatch,
            "timing": decision.timing and decision.timing.to_json(),
            "judge": [asdict(gate) for gate in decision.judge],
            "gates": [asdict(gate) for gate in decision.gates],
            "verdict": decision.verdict,
            "rule": self.rule,
            "reason": self.reason,
            "warnings": self.warnings,
            "notes": self.notes,
            "claim": self.claim,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Headline:
        mcnemar = {key: value for key, value in data["mcnemar"].items() if key != "sample"}
        drift, support = data["run_drift"], dict(data["support"])
        support["truncation"] = tuple(support["truncation"])
        support["truncation_p"] = support.get("truncation_p") and tuple(support["truncation_p"])
        decision = Decision(Interval.from_json(data["difference"]),
                            PermutationTest(**data["test"]), McNemarResult(**mcnemar),
                            None if drift is None else RunDrift(**drift), Support(**support),
                            data["mismatch"], Timing.from_json(data.get("timing")),
                            tuple(Gate(**gate) for gate in data.get("judge", ())))
        if decision.verdict != data["verdict"]:
            raise ValueError(f"headline: the verdict {data['verdict']!r} is not what the rule "
                             f"gives for its own numbers ({decision.verdict!r})")
        return cls(PerArm.from_json(data["pass_at_1"], Interval.from_json), decision,
                   data["difference"]["standard_error"], data["mcnemar"]["sample"],
                   data["rule"], data["reason"], data["warnings"], data["notes"],
                   data.get("claim"))


@dataclass(frozen=True)
class TaskFlip(_FlatRecord):
    task_id: str
    group: str | None
    base_c: int
    base_n: int
    candidate_c: int
    candidate_n: int
    difference: float  # candidate − base pass rate over all episodes
    flip: str  # over every episode: improved | regressed | both pass | both fail | tied
    # A training corpus holds a copy of this task (Contamination); None when the report was
    # given no decontamination to check against, as in report.json files from before it was.
    flagged: bool | None = None


@dataclass(frozen=True)
class Flips:
    """Tasks by their pass rates over every episode (with one episode per task, the outcome at
    the exact test's sample): ids of the improved and regressed, counts of the rest."""

    improved: list[str]
    regressed: list[str]
    both_pass: int
    both_fail: int
    tasks: list[TaskFlip]  # most improved first
    tied: int = 0  # the same rate in both arms, strictly between 0 and 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Flips:
        return cls(data["improved"], data["regressed"], data["both_pass"], data["both_fail"],
                   [TaskFlip.from_json(row) for row in data["tasks"]], data.get("tied", 0))


# --- pass@k and pass^k curves --------------------------------------------------------------


@dataclass(frozen=True)
class CurvePoint:
    k: int
    interval: Interval

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, **self.interval.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(data["k"], Interval.from_json(data))


@dataclass(frozen=True)
class DifferencePoint(CurvePoint):
    leader: str | None  # the arm ahead at this k; None where the curves meet

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "leader": self.leader}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(data["k"], Interval.from_json(data), data["leader"])


@dataclass(frozen=True)
class Crossing(_FlatRecord):
    after_k: int
    by_k: int
    leader_before: str
    leader_after: str


@dataclass(frozen=True)
class Curve:
    """One estimator against k for both arms, their paired difference, and where they cross."""

    arms: PerArm[list[CurvePoint]]
    difference: list[DifferencePoint]
    crossings: list[Crossing]

    def to_json(self) -> dict[str, Any]:
        return {**self.arms.to_json(lambda points: [point.to_json() for point in points]),
                "difference": [point.to_json() for point in self.difference],
                "crossings": [crossing.to_json() for crossing in self.crossings]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Curve:
        return cls(PerArm.from_json(data, lambda points: list(map(CurvePoint.from_json, points))),
                   [DifferencePoint.from_json(point) for point in data["difference"]],
                   [Crossing.from_json(crossing) for crossing in data["crossings"]])


# --- Power and what lies beneath the mean --------------------------------------------------


@dataclass(frozen=True)
class Power(_FlatRecord):
    """What the compared tasks could detect (heldout.report.power)."""

    power: float
    alpha: float
    tasks: int
    paired_sd: float | None  # None when every task has the same difference
    mde: float | None
    observed_effect: float
    required_tasks: int | None  # tasks (or groups) the observed difference needs
    underpowered: bool
    warnings: list[str]
    target_effect: float | None = None  # asked for (`heldout compare --target-effect`)
    target_units: int | None = None  # tasks (or groups) it needs; None: out of reach
    noise_floor: NoiseFloor | None = None  # from the reruns, information: not the verdict's

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Power:
        floor = data.get("noise_floor")  # absent from report.json files written before it
        return cls(**{**data, "noise_floor": floor and NoiseFloor(**floor)})


@dataclass(frozen=True)
class Outcomes:
    """One arm's episodes and tasks by outcome."""

    tasks: int
    episodes: int
    all_pass: int
    all_pass_fraction: float
    all_fail: int
    all_fail_fraction: float
    failure_capable: int
    # A count and a rate per way of failing (heldout.episodes.rows.FAILURES).
    errors: int; error_rate: float; timeouts: int; timeout_rate: float  # noqa: E702
    truncations: int; truncation_rate: float; refusals: int; refusal_rate: float  # noqa: E702
    budget_ends: int; budget_rate: float  # noqa: E702
    design_effect: DesignEffect | None

    def to_json(self) -> dict[str, Any]:
        # JSON has no NaN: an undefined ρ (every episode alike) is written as null.
        effect = None if self.design_effect is None else {
            key: value if math.isfinite(value) else None
            for key, value in asdict(self.design_effect).items()
        }
        return {**asdict(self), "design_effect": effect}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcomes:
        effect = data["design_effect"]
        if effect is not None:
            effect = DesignEffect(**{key: math.nan if value is None else value
                                     for key, value in effect.items()})
        return cls(**{**data, "design_effect": effect})


@dataclass(frozen=True)
class GroupRow(_FlatRecord):
    group: str
    tasks: int
    base: float
    candidate: float
    difference: float
    improved: int
    regressed: int
    # The interval over the group's tasks, None under 3 (unmeasured) or in a report.json from
    # before groups had one; tied: its tasks where the arms' rates are equal.
    low: float | None = None
    high: float | None = None
    tied: int | None = None


@dataclass(frozen=True)
class Beneath:
    arms: PerArm[Outcomes]
    flags: list[str]
    groups: list[GroupRow] | None  # None unless some group holds several tasks

    def to_json(self) -> dict[str, Any]:
        groups = None if self.groups is None else [group.to_json() for group in self.groups]
        return {**self.arms.to_json(Outcomes.to_json), "flags": self.flags, "groups": groups}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Beneath:
        groups = data["groups"]
        return cls(PerArm.from_json(data, Outcomes.from_json), data["flags"],
                   None if groups is None else [GroupRow.from_json(group) for group in groups])
