"""Split an amount into parts that add up to the original total."""

from money.amount import Money


def split_evenly(money, parts):
    """Split ``money`` into ``parts`` amounts that differ by at most one cent.

    The parts always add up exactly to ``money``; leftover cents go to the
    first parts.
    """
    if parts < 1:
        raise ValueError("parts must be at least 1")
    share = money.cents // parts
    return [Money.from_cents(share, money.currency) for _ in range(parts)]


def allocate(money, ratios):
    """Split ``money`` in proportion to ``ratios`` (non-negative integers).

    Like ``split_evenly`` the parts add up exactly to ``money``; leftover
    cents go to the first parts, one cent each.
    """
    if not ratios or any(ratio < 0 for ratio in ratios) or sum(ratios) == 0:
        raise ValueError("ratios must be non-negative and not all zero")
    total = sum(ratios)
    shares = [money.cents * ratio // total for ratio in ratios]
    return [Money.from_cents(share, money.currency) for share in shares]
