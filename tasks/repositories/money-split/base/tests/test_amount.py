from decimal import Decimal

import pytest

from money import CurrencyMismatch, Money


def test_quantizes_half_even():
    assert Money("0.125").amount == Decimal("0.12")
    assert Money("0.135").amount == Decimal("0.14")
    assert Money(3).amount == Decimal("3.00")


def test_rejects_float():
    with pytest.raises(TypeError):
        Money(0.1)


def test_add_and_subtract():
    assert Money("1.10") + Money("2.25") == Money("3.35")
    assert Money("5.00") - Money("0.01") == Money("4.99")


def test_currency_mismatch():
    with pytest.raises(CurrencyMismatch):
        Money("1.00", "USD") + Money("1.00", "EUR")


def test_cents_round_trip():
    assert Money("12.34").cents == 1234
    assert Money.from_cents(1234, "EUR") == Money("12.34", "EUR")
