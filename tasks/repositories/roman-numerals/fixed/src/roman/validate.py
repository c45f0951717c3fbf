"""Input checks for numerals."""

from roman.tables import LETTER_VALUES, MAX_VALUE, MIN_VALUE


class RomanError(ValueError):
    """Raised for numbers or numerals that cannot be converted."""


def check_numeral(numeral):
    """Return ``numeral`` stripped and upper-cased, or raise ``RomanError``."""
    if not isinstance(numeral, str):
        raise TypeError(f"expected a string, got {type(numeral).__name__}")
    text = numeral.strip().upper()
    if not text:
        raise RomanError("empty numeral")
    bad = sorted(set(text) - set(LETTER_VALUES))
    if bad:
        raise RomanError(f"invalid letters {''.join(bad)!r} in {numeral!r}")
    return text


def check_number(number):
    """Raise unless ``number`` is an int in the supported range."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"expected an int, got {type(number).__name__}")
    if not MIN_VALUE <= number <= MAX_VALUE:
        raise RomanError(f"{number} is outside {MIN_VALUE}..{MAX_VALUE}")
