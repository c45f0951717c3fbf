"""Small helpers for working with closed integer intervals."""

from intervals.core import Interval, intersection, merge, total_length
from intervals.format import format_interval, format_ranges
from intervals.parse import RangeSyntaxError, parse_ranges

__all__ = [
    "Interval",
    "RangeSyntaxError",
    "format_interval",
    "format_ranges",
    "intersection",
    "merge",
    "parse_ranges",
    "total_length",
]
