"""A score another harness wrote, read as pass or fail, and nothing looser: heldout's statistics
count passes, so a value that is neither (a reward of 0.5, the string "True") is refused with
the sample that holds it rather than rounded one way or the other."""

from __future__ import annotations

import math
from typing import Any

# inspect_ai's letter grades: correct, incorrect, partial, no answer. Partial credit is not a
# pass; the card counts how many samples it covered.
PASSING = {"C": True, "I": False, "N": False, "P": False}
PARTIAL = "P"


def describe(value: Any) -> str:
    shown = repr(value)
    return f"{shown if len(shown) <= 60 else shown[:57] + '...'} ({type(value).__name__})"


def as_pass(value: Any) -> bool | None:
    """True or False for a pass/fail value (a boolean, 0 or 1, an inspect_ai grade), else
    None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return PASSING.get(value)
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return {0: False, 1: True}.get(value)  # 1.0 == 1
    return None


def not_pass_fail(value: Any, where: str, key: str) -> str:
    return (f"{where}: {key} is {describe(value)}, not pass/fail: heldout counts passes, so a "
            "score must be true/false, 0/1 or an inspect_ai grade (C, I, P, N); choose a "
            "pass/fail score with --score-key")
