from datetime import date

import pytest

from dateiter import date_range, days_between


def test_daily_range_inclusive():
    assert date_range(date(2024, 2, 27), date(2024, 3, 1)) == [
        date(2024, 2, 27),
        date(2024, 2, 28),
        date(2024, 2, 29),
        date(2024, 3, 1),
    ]


def test_step_and_exclusive_end():
    days = date_range(date(2024, 1, 1), date(2024, 1, 10), step=3, inclusive=False)
    assert days == [date(2024, 1, 1), date(2024, 1, 4), date(2024, 1, 7)]


def test_step_not_landing_on_end():
    assert date_range(date(2024, 1, 1), date(2024, 1, 6), step=2)[-1] == date(2024, 1, 5)


def test_end_before_start_is_empty():
    assert date_range(date(2024, 1, 5), date(2024, 1, 1)) == []


def test_single_day():
    assert date_range(date(2024, 1, 5), date(2024, 1, 5)) == [date(2024, 1, 5)]
    assert date_range(date(2024, 1, 5), date(2024, 1, 5), inclusive=False) == []


def test_step_type_checked():
    with pytest.raises(TypeError):
        date_range(date(2024, 1, 1), date(2024, 1, 2), step=1.5)


def test_days_between():
    assert days_between(date(2024, 1, 1), date(2023, 12, 25)) == -7
