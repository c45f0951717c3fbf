"""The two conversion functions."""

from roman.tables import LETTER_VALUES, MAX_VALUE, MIN_VALUE, SYMBOLS
from roman.validate import RomanError, check_number, check_numeral


def to_roman(number):
    """Canonical Roman numeral for ``number`` (1..3999)."""
    check_number(number)
    parts = []
    for value, symbol in SYMBOLS:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(numeral):
    """Integer value of a canonical Roman numeral (case-insensitive).

    Only the canonical form of each number is accepted: ``"IV"`` is 4, but
    ``"IIII"``, ``"IC"`` or ``"VX"`` are rejected with ``RomanError``.
    """
    text = check_numeral(numeral)
    total = 0
    largest = 0
    for letter in reversed(text):
        value = LETTER_VALUES[letter]
        if value < largest:
            total -= value
        else:
            total += value
            largest = value
    if not MIN_VALUE <= total <= MAX_VALUE or to_roman(total) != text:
        raise RomanError(f"{numeral!r} is not a canonical Roman numeral")
    return total


def is_roman(numeral):
    """True if ``numeral`` is a canonical Roman numeral."""
    try:
        from_roman(numeral)
    except (RomanError, TypeError):
        return False
    return True
