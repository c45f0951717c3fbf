"""The values a site of a copied test takes (heldout.tasks.perturbed_copies): stand-ins for
the real value that a reader of the file cannot tell from it by how they look or where else
the file shows them.
"""

from __future__ import annotations

import random
import re
import string
from decimal import Decimal, InvalidOperation

SCALAR = (int, float, str, bytes)


def named(value, text: str) -> bool:
    """Whether `text` shows `value` (a number as written, a string's content), apart from other
    words and numbers."""
    shown = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    if not shown.strip():
        return False
    return re.search(r"(?<![\w.])" + re.escape(shown) + r"(?![\w.])", text) is not None


def perturbed(value, rng: random.Random, versions: int, elsewhere: str) -> list | None:
    """`versions` distinct values like `value`, the real one first, or None when it has nothing
    to perturb. Each version is rendered as `repr` of its value, the real one's too."""
    if isinstance(value, bool) or not isinstance(value, SCALAR):
        return None
    if isinstance(value, int | float) and named(value, elsewhere):
        return _shown_numbers(value, rng, versions, elsewhere)
    if isinstance(value, int):
        return _run(value, 1, rng, versions)
    if isinstance(value, float):
        return _float_run(value, rng, versions)
    return _character_run(value, rng, versions, elsewhere)


def _shown_numbers(value, rng: random.Random, versions: int, elsewhere: str) -> list | None:
    """A number the file shows elsewhere (an expected 3 beside an input 3): the others are
    numbers of its type the file shows too, drawn at random."""
    kind = type(value)
    pool = {kind(token) for token in _NUMBER.findall(elsewhere)
            if ("." in token) == (kind is float)} - {value}
    if len(pool) < versions - 1:
        return None
    return [value, *rng.sample(sorted(pool), versions - 1)]


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _run(value, step, rng: random.Random, versions: int) -> list:
    """An arithmetic run of `versions` values through `value`, at a uniform place in it."""
    place = rng.randrange(versions)
    run = [value + (index - place) * step for index in range(versions)]
    return [run[place]] + run[:place] + run[place + 1:]


def _float_run(value: float, rng: random.Random, versions: int) -> list | None:
    if value != value or value in (float("inf"), float("-inf")):
        return None
    try:
        decimal = Decimal(repr(value))
    except InvalidOperation:
        return None
    step = Decimal(1).scaleb(decimal.as_tuple().exponent)
    values = [float(item) for item in _run(decimal, step, rng, versions)]
    return values if len(set(values)) == versions else None


def _character_run(value, rng: random.Random, versions: int, elsewhere: str) -> list | None:
    """The string with one character, at a random place, drawn from the characters of its
    class that leave the string as shown elsewhere in the file as the real one is."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if not text:
        return None
    position = rng.randrange(len(text))
    real = text[position]
    alphabet = next((letters for letters in (string.ascii_lowercase, string.ascii_uppercase,
                                             string.digits, string.punctuation + " ")
                     if real in letters), None)
    if alphabet is None:
        return None

    def variant(letter: str) -> str:
        return text[:position] + letter + text[position + 1:]

    shown = named(text, elsewhere)
    pool = [letter for letter in alphabet
            if letter != real and named(variant(letter), elsewhere) == shown]
    if len(pool) < versions - 1:
        return None
    texts = [variant(letter) for letter in [real, *rng.sample(pool, versions - 1)]]
    return [item.encode("latin-1") for item in texts] if isinstance(value, bytes) else texts
