import pytest

from tinyini import dumps, get_bool, get_int, get_list, parse


def test_typed_getters():
    data = parse("[s]\nport = 80\ndebug = Yes\nitems = a, b,, c\n")
    assert get_int(data, "s", "port") == 80
    assert get_bool(data, "s", "DEBUG") is True
    assert get_list(data, "s", "items") == ["a", "b", "c"]


def test_getter_defaults_and_errors():
    data = parse("[s]\nflag = maybe\n")
    assert get_int(data, "s", "missing", 5) == 5
    with pytest.raises(KeyError):
        get_int(data, "other", "x")
    with pytest.raises(ValueError):
        get_bool(data, "s", "flag")


def test_dumps_round_trip():
    data = parse("top = 1\n[a]\nx = 2\n[b]\ny = three\n")
    text = dumps(data)
    assert text == "top = 1\n\n[a]\nx = 2\n\n[b]\ny = three\n"
    assert parse(text) == data
