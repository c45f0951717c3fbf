"""Rounding rules."""

from decimal import ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")


def quantize_cents(value, rounding=ROUND_HALF_EVEN):
    """Round ``value`` to whole cents (banker's rounding by default)."""
    return Decimal(value).quantize(CENT, rounding=rounding)


def to_cents(value):
    """Integer number of cents in ``value`` after rounding."""
    return int(quantize_cents(value) * 100)
