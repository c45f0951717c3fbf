"""The ``Money`` value type."""

from decimal import Decimal

from money.rounding import quantize_cents, to_cents


class CurrencyMismatch(ValueError):
    """Raised when combining amounts in different currencies."""


class Money:
    __slots__ = ("amount", "currency")

    def __init__(self, amount, currency="USD"):
        if isinstance(amount, float):
            raise TypeError("pass a str, int or Decimal, not a float")
        self.amount = quantize_cents(Decimal(amount))
        self.currency = currency

    @classmethod
    def from_cents(cls, cents, currency="USD"):
        return cls(Decimal(cents) / 100, currency)

    @property
    def cents(self):
        return to_cents(self.amount)

    def _check(self, other):
        if not isinstance(other, Money):
            return NotImplemented
        if other.currency != self.currency:
            raise CurrencyMismatch(f"{self.currency} vs {other.currency}")
        return other

    def __add__(self, other):
        if self._check(other) is NotImplemented:
            return NotImplemented
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other):
        if self._check(other) is NotImplemented:
            return NotImplemented
        return Money(self.amount - other.amount, self.currency)

    def __eq__(self, other):
        if not isinstance(other, Money):
            return NotImplemented
        return (self.amount, self.currency) == (other.amount, other.currency)

    def __hash__(self):
        return hash((self.amount, self.currency))

    def __repr__(self):
        return f"Money('{self.amount}', '{self.currency}')"
