"""Week based helpers (weeks start on Monday)."""

from datetime import timedelta

from dateiter.ranges import date_range


def week_start(day):
    """The Monday on or before ``day``."""
    return day - timedelta(days=day.weekday())


def week_starts(start, end):
    """Mondays between ``start`` and ``end``, both included."""
    first = week_start(start)
    if first < start:
        first += timedelta(days=7)
    return date_range(first, end, step=7)


def weeks_between(start, end):
    """Number of whole weeks between the two dates (rounded down)."""
    return abs((end - start).days) // 7
