import pytest

from semver_lite import InvalidVersion, Version, parse


def test_parse_full():
    version = parse("1.2.3-rc.1+build.5")
    assert version == Version(1, 2, 3, ("rc", "1"), ("build", "5"))
    assert str(version) == "1.2.3-rc.1+build.5"


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-", "1.2.3-01", "v1.2.3", "1.2.3-a..b"])
def test_parse_rejects(text):
    with pytest.raises(InvalidVersion):
        parse(text)


def test_parse_passes_versions_through():
    version = Version(1, 0, 0)
    assert parse(version) is version
