import pytest

from calclex import to_rpn, tokenize


def rpn(text):
    return to_rpn(tokenize(text))


def test_precedence():
    assert rpn("1 + 2 * 3") == ["1", "2", "3", "*", "+"]


def test_parentheses():
    assert rpn("(1 + 2) * 3") == ["1", "2", "+", "3", "*"]


def test_power_is_right_associative():
    assert rpn("2 ** 3 ** 2") == ["2", "3", "2", "**", "**"]
    assert rpn("8 - 3 - 1") == ["8", "3", "-", "1", "-"]


@pytest.mark.parametrize("text", ["(1 + 2", "1 + 2)"])
def test_unbalanced(text):
    with pytest.raises(ValueError, match="unbalanced"):
        rpn(text)
