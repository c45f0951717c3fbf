"""Exact money amounts and bill splitting."""

from money.amount import CurrencyMismatch, Money
from money.rounding import quantize_cents, to_cents
from money.split import allocate, split_evenly

__all__ = ["CurrencyMismatch", "Money", "allocate", "quantize_cents", "split_evenly", "to_cents"]
