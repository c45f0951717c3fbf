"""Semantic version parsing, comparison and constraints."""

from semver_lite.compare import compare, compare_prerelease, sort_versions
from semver_lite.constraints import max_satisfying, satisfies
from semver_lite.version import InvalidVersion, Version, parse

__all__ = [
    "InvalidVersion",
    "Version",
    "compare",
    "compare_prerelease",
    "max_satisfying",
    "parse",
    "satisfies",
    "sort_versions",
]
