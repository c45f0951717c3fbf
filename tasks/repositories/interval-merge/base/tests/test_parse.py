import pytest

from intervals import Interval, RangeSyntaxError, format_ranges, parse_ranges


def test_parse_simple():
    assert parse_ranges("1-3,7,10-12") == [Interval(1, 3), Interval(7, 7), Interval(10, 12)]


def test_parse_ignores_empty_parts():
    assert parse_ranges(" 1-3 ,, 5 ") == [Interval(1, 3), Interval(5, 5)]


@pytest.mark.parametrize("text", ["a-3", "1-", "4-2", "1-2-3"])
def test_parse_rejects_garbage(text):
    with pytest.raises(RangeSyntaxError):
        parse_ranges(text)


def test_format_merges_overlaps():
    assert format_ranges(parse_ranges("1-5,2-8,20")) == "1-8,20"


def test_format_without_merge():
    assert format_ranges([Interval(4, 6), Interval(1, 1)], merge_first=False) == "4-6,1"
