from datetime import date

import pytest

from dateiter import date_range, parse_range


def test_negative_step_counts_down():
    assert date_range(date(2024, 1, 10), date(2024, 1, 1), step=-3) == [
        date(2024, 1, 10),
        date(2024, 1, 7),
        date(2024, 1, 4),
        date(2024, 1, 1),
    ]


def test_negative_step_exclusive_end():
    assert date_range(date(2024, 1, 10), date(2024, 1, 1), step=-3, inclusive=False) == [
        date(2024, 1, 10),
        date(2024, 1, 7),
        date(2024, 1, 4),
    ]


def test_negative_step_not_landing_on_end():
    assert date_range(date(2024, 3, 2), date(2024, 2, 28), step=-2) == [
        date(2024, 3, 2),
        date(2024, 2, 29),
    ]


def test_negative_step_daily_across_year():
    days = date_range(date(2024, 1, 2), date(2023, 12, 30), step=-1)
    assert days == [date(2024, 1, 2), date(2024, 1, 1), date(2023, 12, 31), date(2023, 12, 30)]


def test_negative_step_same_day():
    assert date_range(date(2024, 1, 5), date(2024, 1, 5), step=-1) == [date(2024, 1, 5)]
    assert date_range(date(2024, 1, 5), date(2024, 1, 5), step=-1, inclusive=False) == []


def test_negative_step_wrong_direction_is_empty():
    assert date_range(date(2024, 1, 1), date(2024, 1, 5), step=-1) == []


def test_positive_step_wrong_direction_is_still_empty():
    assert date_range(date(2024, 1, 5), date(2024, 1, 1), step=2) == []


def test_zero_step_rejected():
    with pytest.raises(ValueError):
        date_range(date(2024, 1, 1), date(2024, 1, 5), step=0)


def test_parse_range_with_negative_step():
    start, end, step = parse_range("2024-01-31..2024-01-01/-10")
    assert date_range(start, end, step) == [
        date(2024, 1, 31),
        date(2024, 1, 21),
        date(2024, 1, 11),
        date(2024, 1, 1),
    ]
