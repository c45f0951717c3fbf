"""Constraints such as ``">=1.2.0, <2.0.0"``."""

import re

from semver_lite.compare import compare, sort_versions

_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*(\S+)\s*$")

_CHECKS = {
    ">=": lambda result: result >= 0,
    "<=": lambda result: result <= 0,
    ">": lambda result: result > 0,
    "<": lambda result: result < 0,
    "==": lambda result: result == 0,
    "!=": lambda result: result != 0,
}


def _clauses(spec):
    for part in spec.split(","):
        match = _CLAUSE.match(part)
        if not match:
            raise ValueError(f"bad constraint {part!r}")
        operator, version = match.groups()
        yield operator or "==", version


def satisfies(version, spec):
    """True if ``version`` meets every comma separated clause of ``spec``."""
    return all(_CHECKS[op](compare(version, bound)) for op, bound in _clauses(spec))


def max_satisfying(versions, spec):
    """Highest version meeting ``spec``, or ``None``."""
    matching = [version for version in versions if satisfies(version, spec)]
    return sort_versions(matching)[-1] if matching else None
