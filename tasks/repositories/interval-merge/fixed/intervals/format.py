"""Turn intervals back into range expressions."""

from intervals.core import merge


def format_interval(interval):
    if interval.start == interval.end:
        return str(interval.start)
    return f"{interval.start}-{interval.end}"


def format_ranges(intervals, merge_first=True):
    """Format intervals as ``"1-3,7"``; overlapping ones are merged first."""
    if merge_first:
        intervals = merge(intervals)
    return ",".join(format_interval(interval) for interval in intervals)
