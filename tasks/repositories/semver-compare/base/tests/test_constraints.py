import pytest

from semver_lite import max_satisfying, satisfies


def test_satisfies_range():
    assert satisfies("1.4.2", ">=1.2.0, <2.0.0")
    assert not satisfies("2.0.0", ">=1.2.0, <2.0.0")


def test_bare_version_means_equal():
    assert satisfies("1.0.0", "1.0.0")
    assert not satisfies("1.0.1", "1.0.0")


def test_bad_constraint():
    with pytest.raises(ValueError):
        satisfies("1.0.0", ">= 1.0.0 2.0.0")


def test_max_satisfying():
    versions = ["1.2.0", "1.9.0", "2.0.0", "1.10.0"]
    assert max_satisfying(versions, "<2.0.0") == "1.10.0"
    assert max_satisfying(versions, ">3.0.0") is None
