import pytest

from intervals import Interval, intersection, merge, total_length


def test_interval_len():
    assert len(Interval(3, 7)) == 5
    assert len(Interval(4, 4)) == 1


def test_interval_rejects_reversed():
    with pytest.raises(ValueError):
        Interval(5, 2)


def test_merge_overlapping():
    assert merge([(1, 5), (2, 8), (10, 12)]) == [Interval(1, 8), Interval(10, 12)]


def test_merge_nested():
    assert merge([(1, 10), (2, 3), (4, 6)]) == [Interval(1, 10)]


def test_merge_empty():
    assert merge([]) == []


def test_intersection_overlapping():
    assert intersection((1, 6), (4, 9)) == Interval(4, 6)
    assert intersection((1, 2), (5, 9)) is None


def test_total_length():
    assert total_length([(1, 5), (4, 6), (10, 10)]) == 7
