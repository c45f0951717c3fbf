import pytest

from wraptext import fill, split_words, wrap


def test_wrap_simple():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_collapses_whitespace():
    assert split_words("  a\tb \n c ") == ["a", "b", "c"]
    assert wrap("  one   two  ", 40) == ["one two"]


def test_wrap_empty():
    assert wrap("", 10) == []
    assert fill("   ", 10) == ""


def test_wrap_rejects_bad_width():
    with pytest.raises(ValueError):
        wrap("abc", 0)


def test_no_break_long_words():
    assert wrap("a verylongword b", 5, break_long_words=False) == ["a", "verylongword", "b"]


def test_fill_joins_lines():
    assert fill("aa bb cc dd", 6) == "aa bb\ncc dd"
