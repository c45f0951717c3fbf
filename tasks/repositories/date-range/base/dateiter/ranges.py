"""Ranges of dates with a fixed step in days."""

from datetime import timedelta


def days_between(start, end):
    """Signed number of days from ``start`` to ``end``."""
    return (end - start).days


def date_range(start, end, step=1, inclusive=True):
    """List of dates from ``start`` towards ``end``, ``step`` days apart.

    ``end`` is included when it is reached exactly, unless ``inclusive`` is
    false. An empty list is returned when ``end`` lies before ``start``.
    """
    if not isinstance(step, int) or isinstance(step, bool):
        raise TypeError("step must be an int")
    if step < 1:
        raise ValueError("step must be a positive number of days")
    span = days_between(start, end)
    if span < 0:
        return []
    count = span // step + 1
    if not inclusive and span % step == 0:
        count -= 1
    return [start + timedelta(days=index * step) for index in range(count)]
