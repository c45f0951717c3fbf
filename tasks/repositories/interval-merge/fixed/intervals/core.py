"""Core interval type and the merge algorithm."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    """A closed interval ``[start, end]`` of integers."""

    start: int
    end: int

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")

    def __len__(self):
        return self.end - self.start + 1

    def contains(self, value):
        return self.start <= value <= self.end

    def overlaps(self, other):
        """True if the two intervals have at least one integer in common."""
        return self.start <= other.end and other.start <= self.end


def _coerce(item):
    if isinstance(item, Interval):
        return item
    start, end = item
    return Interval(start, end)


def intersection(first, second):
    """The interval common to both arguments, or ``None``."""
    first, second = _coerce(first), _coerce(second)
    if not first.overlaps(second):
        return None
    return Interval(max(first.start, second.start), min(first.end, second.end))


def merge(items):
    """Merge overlapping intervals and return them ordered by start.

    ``items`` may be given in any order. Intervals that share an end point,
    such as ``[1, 3]`` and ``[3, 5]``, overlap and are merged into one.
    """
    intervals = sorted(_coerce(item) for item in items)
    merged = []
    for current in intervals:
        if merged and merged[-1].overlaps(current):
            last = merged.pop()
            merged.append(Interval(last.start, max(last.end, current.end)))
        else:
            merged.append(current)
    return merged


def total_length(items):
    """Number of integers covered by the union of the intervals."""
    return sum(len(interval) for interval in merge(items))
