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
