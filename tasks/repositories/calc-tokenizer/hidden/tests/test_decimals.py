import pytest

from calclex import NAME, NUMBER, OP, LexError, Token, to_rpn, tokenize


@pytest.mark.parametrize(
    "text, value",
    [("2.5", 2.5), ("10.25", 10.25), ("0.5", 0.5), ("3.0", 3.0), ("007.125", 7.125)],
)
def test_decimal_number_is_one_token(text, value):
    tokens = tokenize(text)
    assert tokens == [Token(NUMBER, text, 0)]
    assert tokens[0].value == value
    assert isinstance(tokens[0].value, float)


def test_integers_stay_int():
    token = tokenize("42")[0]
    assert token.value == 42
    assert isinstance(token.value, int)


def test_decimals_in_expression_keep_positions():
    assert tokenize("x*1.5 + 22.75") == [
        Token(NAME, "x", 0),
        Token(OP, "*", 1),
        Token(NUMBER, "1.5", 2),
        Token(OP, "+", 6),
        Token(NUMBER, "22.75", 8),
    ]


@pytest.mark.parametrize(
    "text, pos",
    [("3.", 2), ("3.x", 2), ("1 + 4. * 2", 6), ("1.2.3", 3)],
)
def test_malformed_decimals(text, pos):
    with pytest.raises(LexError) as info:
        tokenize(text)
    assert info.value.pos == pos


def test_leading_dot_is_not_a_number():
    with pytest.raises(LexError) as info:
        tokenize(".5")
    assert info.value.pos == 0


def test_rpn_with_decimals():
    assert to_rpn(tokenize("0.5 * (1.25 + 2)")) == ["0.5", "1.25", "2", "+", "*"]
