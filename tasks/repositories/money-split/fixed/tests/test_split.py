import pytest

from money import Money, allocate, split_evenly


def test_split_even_amount():
    assert split_evenly(Money("9.00"), 3) == [Money("3.00")] * 3


def test_split_keeps_currency():
    parts = split_evenly(Money("4.00", "EUR"), 2)
    assert all(part.currency == "EUR" for part in parts)


def test_split_rejects_zero_parts():
    with pytest.raises(ValueError):
        split_evenly(Money("1.00"), 0)


def test_allocate_exact():
    assert allocate(Money("100.00"), [1, 1, 2]) == [Money("25.00"), Money("25.00"), Money("50.00")]


@pytest.mark.parametrize("ratios", [[], [0, 0], [1, -1]])
def test_allocate_rejects_bad_ratios(ratios):
    with pytest.raises(ValueError):
        allocate(Money("1.00"), ratios)
