"""Convert between integers and Roman numerals."""

from roman.convert import from_roman, is_roman, to_roman
from roman.tables import MAX_VALUE, MIN_VALUE
from roman.validate import RomanError

__all__ = ["MAX_VALUE", "MIN_VALUE", "RomanError", "from_roman", "is_roman", "to_roman"]
