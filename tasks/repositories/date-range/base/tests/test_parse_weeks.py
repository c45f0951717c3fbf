from datetime import date

import pytest

from dateiter import parse_date, parse_range, week_starts, weeks_between


def test_parse_range_with_step():
    assert parse_range("2024-01-01..2024-01-10/3") == (date(2024, 1, 1), date(2024, 1, 10), 3)


def test_parse_range_default_step():
    assert parse_range(" 2024-01-01 .. 2024-01-02 ") == (date(2024, 1, 1), date(2024, 1, 2), 1)


@pytest.mark.parametrize("text", ["2024-01-01", "2024-01-01..x", "2024-01-01..2024-01-02/two"])
def test_parse_range_errors(text):
    with pytest.raises(ValueError):
        parse_range(text)


def test_parse_date_message():
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        parse_date("01/02/2024")


def test_week_starts():
    mondays = [date(2024, 1, 8), date(2024, 1, 15), date(2024, 1, 22)]
    assert week_starts(date(2024, 1, 3), date(2024, 1, 22)) == mondays


def test_weeks_between():
    assert weeks_between(date(2024, 1, 1), date(2024, 1, 20)) == 2
