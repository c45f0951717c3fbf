import pytest

from semver_lite import compare, sort_versions


def test_core_ordering():
    assert compare("1.2.0", "1.10.0") == -1
    assert compare("2.0.0", "1.99.99") == 1
    assert compare("1.2.3", "1.2.3") == 0


def test_release_beats_prerelease():
    assert compare("1.0.0-alpha", "1.0.0") == -1
    assert compare("1.0.0", "1.0.0-rc") == 1


def test_shorter_prerelease_first():
    assert compare("1.0.0-alpha", "1.0.0-alpha.1") == -1


def test_build_metadata_ignored():
    assert compare("1.0.0+a", "1.0.0+b") == 0


def test_sort_versions():
    versions = ["1.0.0", "0.9.1", "1.0.0-beta", "1.0.0-alpha", "0.10.0"]
    assert sort_versions(versions) == ["0.9.1", "0.10.0", "1.0.0-alpha", "1.0.0-beta", "1.0.0"]


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("1.0.0-alpha.2", "1.0.0-alpha.10"),
        ("1.0.0-rc.9", "1.0.0-rc.11"),
        ("1.0.0-2", "1.0.0-10"),
        ("1.0.0-alpha.99", "1.0.0-alpha.100"),
        ("1.0.0-1", "1.0.0--x"),
        ("1.0.0-9.z", "1.0.0-10.a"),
    ],
)
def test_numeric_identifiers_compare_numerically(lower, higher):
    assert compare(lower, higher) == -1
    assert compare(higher, lower) == 1


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("1.0.0-1", "1.0.0-alpha"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-alpha", "1.0.0-beta"),
        ("1.0.0-Beta", "1.0.0-alpha"),
    ],
)
def test_alphanumeric_rules_unchanged(lower, higher):
    assert compare(lower, higher) == -1
    assert compare(higher, lower) == 1


def test_equal_numeric_identifiers():
    assert compare("1.0.0-rc.10", "1.0.0-rc.10+build.7") == 0


def test_spec_precedence_example():
    expected = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    shuffled = [expected[index] for index in (5, 0, 7, 3, 1, 6, 4, 2)]
    assert sort_versions(shuffled) == expected
