import pytest

from intervals import Interval, format_ranges, intersection, merge, parse_ranges, total_length


@pytest.mark.parametrize(
    "items, expected",
    [
        ([(1, 3), (3, 5)], [Interval(1, 5)]),
        ([(1, 3), (3, 3), (3, 7)], [Interval(1, 7)]),
        ([(5, 8), (1, 3), (3, 4)], [Interval(1, 4), Interval(5, 8)]),
        ([(10, 12), (1, 2)], [Interval(1, 2), Interval(10, 12)]),
        ([(6, 9), (1, 20), (2, 3)], [Interval(1, 20)]),
    ],
)
def test_merge_touching_and_unsorted(items, expected):
    assert merge(items) == expected


def test_adjacent_but_disjoint_stay_separate():
    assert merge([(3, 4), (1, 2)]) == [Interval(1, 2), Interval(3, 4)]


def test_overlaps_shared_end_point():
    assert Interval(1, 3).overlaps(Interval(3, 5))
    assert Interval(3, 5).overlaps(Interval(1, 3))
    assert Interval(4, 4).overlaps(Interval(4, 4))
    assert not Interval(1, 2).overlaps(Interval(3, 4))


def test_intersection_single_point():
    assert intersection((1, 3), (3, 5)) == Interval(3, 3)


def test_total_length_counts_shared_point_once():
    assert total_length([(3, 5), (1, 3)]) == 5


def test_format_merges_touching_ranges():
    assert format_ranges(parse_ranges("8-9,3-5,1-3")) == "1-5,8-9"
