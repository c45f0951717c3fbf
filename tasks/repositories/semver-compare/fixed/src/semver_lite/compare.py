"""Version precedence (semver section 11)."""

import functools

from semver_lite.version import parse


def _sign(left, right):
    return (left > right) - (left < right)


def _compare_identifier(left, right):
    left_numeric, right_numeric = left.isdigit(), right.isdigit()
    if left_numeric and right_numeric:
        return _sign(int(left), int(right))
    if left_numeric or right_numeric:
        return -1 if left_numeric else 1
    return _sign(left, right)


def compare_prerelease(left, right):
    """Compare two pre-release tuples; ``()`` (a release) sorts last.

    Identifiers are compared one by one: numeric identifiers numerically,
    alphanumeric ones in ASCII order, and a numeric identifier is lower than
    an alphanumeric one. A shorter tuple is lower when all shared
    identifiers are equal.
    """
    if not left or not right:
        return _sign(not left, not right)
    for a, b in zip(left, right):
        if a != b:
            return _compare_identifier(a, b)
    return _sign(len(left), len(right))


def compare(left, right):
    """-1, 0 or 1 as ``left`` has lower, equal or higher precedence."""
    left, right = parse(left), parse(right)
    if left.core != right.core:
        return _sign(left.core, right.core)
    return compare_prerelease(left.prerelease, right.prerelease)


def sort_versions(versions, reverse=False):
    """Versions (strings or ``Version``) sorted by precedence."""
    return sorted(versions, key=functools.cmp_to_key(compare), reverse=reverse)
