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


@pytest.mark.parametrize(
    "total, parts, expected",
    [
        ("100.00", 3, ["33.34", "33.33", "33.33"]),
        ("0.05", 3, ["0.02", "0.02", "0.01"]),
        ("10.00", 6, ["1.67", "1.67", "1.67", "1.67", "1.66", "1.66"]),
        ("0.02", 4, ["0.01", "0.01", "0.00", "0.00"]),
        ("7.00", 7, ["1.00"] * 7),
    ],
)
def test_split_distributes_leftover_cents(total, parts, expected):
    assert split_evenly(Money(total), parts) == [Money(amount) for amount in expected]


@pytest.mark.parametrize("total", ["0.01", "1.00", "99.99", "1234.57"])
@pytest.mark.parametrize("parts", [1, 2, 3, 7, 12])
def test_split_always_adds_up(total, parts):
    result = split_evenly(Money(total), parts)
    assert len(result) == parts
    assert sum(part.cents for part in result) == Money(total).cents
    assert max(part.cents for part in result) - min(part.cents for part in result) <= 1


@pytest.mark.parametrize(
    "total, ratios, expected",
    [
        ("100.00", [1, 1, 1], ["33.34", "33.33", "33.33"]),
        ("0.05", [3, 7], ["0.02", "0.03"]),
        ("10.00", [1, 2, 4], ["1.43", "2.86", "5.71"]),
    ],
)
def test_allocate_distributes_leftover_cents(total, ratios, expected):
    result = allocate(Money(total, "EUR"), ratios)
    assert result == [Money(amount, "EUR") for amount in expected]
