"""How the report writes numbers: one place, so the headline reads the same in every format."""

from __future__ import annotations


def percent(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def points(difference: float) -> str:
    """A difference of two rates in percentage points, always signed."""
    return f"{100 * difference:+.1f}"


def interval_percent(low: float, high: float) -> str:
    return f"[{percent(low)}, {percent(high)}]"


def interval_points(low: float, high: float) -> str:
    return f"[{points(low)}, {points(high)}]"


def short_fingerprint(fingerprint: str) -> str:
    return fingerprint[:12]


# Ids listed inline before "and N more"; the per-task table and report.json hold them all.
IDS_SHOWN = 30


def id_list(ids: list[str]) -> str:
    shown = ", ".join(ids[:IDS_SHOWN])
    return shown + (f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else "") or "none"
