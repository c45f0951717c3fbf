"""Parse dates and range expressions such as ``2024-01-01..2024-02-01/7``."""

from datetime import date


def parse_date(text):
    """Parse an ISO ``YYYY-MM-DD`` date, with a clear error message."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a YYYY-MM-DD date: {text!r}") from None


def parse_range(text):
    """Parse ``START..END[/STEP]`` into ``(start, end, step)``."""
    body, slash, step_text = text.partition("/")
    start_text, dots, end_text = body.partition("..")
    if not dots:
        raise ValueError(f"expected START..END in {text!r}")
    step = 1
    if slash:
        try:
            step = int(step_text)
        except ValueError:
            raise ValueError(f"bad step {step_text!r} in {text!r}") from None
    return parse_date(start_text), parse_date(end_text), step
