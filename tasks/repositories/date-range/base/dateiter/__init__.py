"""Iterate over calendar dates."""

from dateiter.parse import parse_date, parse_range
from dateiter.ranges import date_range, days_between
from dateiter.weeks import week_starts, weeks_between

__all__ = [
    "date_range",
    "days_between",
    "parse_date",
    "parse_range",
    "week_starts",
    "weeks_between",
]
