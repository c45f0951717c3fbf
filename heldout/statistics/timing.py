"""When the two arms ran, and whether drift between those times is controlled (issue 38).

A server, a sandbox image or a grader that drifts between the base's episodes and the
candidate's moves the difference by as much as it drifts, and no test over the tasks can see
it: the episodes of one arm all share the one moment. The drift is controlled when the arms
ran interleaved (each arm's median episode started inside the other arm's span of start
times: paired runs made turn about, or both arms at once), or when a reference checkpoint ran
beside each arm and the claim clears the reference's own movement between those times
(`clears_reference`). Otherwise "better" and "worse" are not decidable.

Times are what the rows say (`started_at`); a file's author can write any, as they can write
any `passed`. The test stage's own are its episodes' clocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from heldout.statistics.intervals import Interval


@dataclass(frozen=True)
class Span:
    """When one arm's episodes started: the first, the median and the last, in seconds since
    the Unix epoch."""

    first: float
    middle: float
    last: float

    def holds(self, moment: float) -> bool:
        return self.first <= moment <= self.last

    def __str__(self) -> str:
        first, last = (datetime.fromtimestamp(t, UTC) for t in (self.first, self.last))
        shown = last.strftime("%H:%M" if first.date() == last.date() else "%Y-%m-%d %H:%M")
        return f"{first:%Y-%m-%d %H:%M}–{shown} UTC"


def span(started_at: ArrayLike) -> Span | None:
    """One arm's span, or None when any of its episodes does not say when it started."""
    times = np.asarray(started_at, dtype=float)
    if times.size == 0 or not np.all(np.isfinite(times)):
        return None
    return Span(float(times.min()), float(np.median(times)), float(times.max()))


def interleaved(one: Span, other: Span) -> bool:
    """Whether the two arms ran at the same times: each one's median episode started inside
    the other's span."""
    return other.holds(one.middle) and one.holds(other.middle)


@dataclass(frozen=True)
class Timing:
    """What the verdict knows of when the arms ran.

    apart: why the arms ran at different times with no drift control (the verdict is then
    "not decidable"), or None. unknown: why when they ran is not known (a caveat), or None.
    reference: the reference checkpoint's movement between the arms' times (its run beside the
    candidate minus its run beside the base), with its interval, which a claim must clear;
    or None."""

    apart: str | None = None
    unknown: str | None = None
    reference: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return {"apart": self.apart, "unknown": self.unknown,
                "reference": None if self.reference is None else self.reference.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Timing | None:
        if data is None:
            return None
        reference = data.get("reference")
        return cls(data.get("apart"), data.get("unknown"),
                   None if reference is None else Interval.from_json(reference))


def arms_timing(base: Span | None, candidate: Span | None, *, names: tuple[str, str],
                reference: Interval | None = None) -> Timing:
    """The Timing of two arms from their spans (None: not recorded)."""
    missing = [name for name, found in zip(names, (base, candidate), strict=True)
               if found is None]
    if missing:
        return Timing(unknown=(
            f"when {' and '.join(missing)} ran is not recorded (rows without started_at): "
            "drift between the arms' times is not controlled"), reference=reference)
    if interleaved(base, candidate) or reference is not None:
        return Timing(reference=reference)
    return Timing(apart=(
        f"the arms ran at different times ({names[0]} {base}, {names[1]} {candidate}): "
        "drift between them is not controlled; run both turn about (paired reruns), or add "
        "a reference checkpoint run beside each"))


def clears_reference(difference: Interval, reference: Interval) -> bool:
    """Whether the claim survives any drift the reference does not exclude: a gain's interval
    lies above the reference's, a loss's below it (and both away from 0). Under a drift
    common to the checkpoints this is the test of non-overlapping intervals: its false claim
    is at most P(Z > z·√2), below the level of either interval."""
    if difference.estimate > 0:
        return difference.low > max(0.0, reference.high)
    return difference.high < min(0.0, reference.low)
