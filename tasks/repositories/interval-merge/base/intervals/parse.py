"""Parse range expressions such as ``"1-3,7,10-12"``."""

from intervals.core import Interval


class RangeSyntaxError(ValueError):
    """Raised when a range expression cannot be parsed."""


def _parse_bound(text, expression):
    text = text.strip()
    if not text.isdigit():
        raise RangeSyntaxError(f"bad bound {text!r} in {expression!r}")
    return int(text)


def parse_ranges(expression):
    """Parse comma separated ``a-b`` ranges and single non-negative numbers.

    Empty parts are ignored, so ``"1-3,,5"`` is the same as ``"1-3,5"``.
    """
    result = []
    for part in expression.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        start = _parse_bound(low, expression)
        end = _parse_bound(high, expression) if dash else start
        if end < start:
            raise RangeSyntaxError(f"reversed range {part!r} in {expression!r}")
        result.append(Interval(start, end))
    return result
