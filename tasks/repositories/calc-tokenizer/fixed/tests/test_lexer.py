import pytest

from calclex import LPAREN, NAME, NUMBER, OP, RPAREN, LexError, Token, tokenize


def test_tokenize_expression():
    assert tokenize("2 * (x + 10)") == [
        Token(NUMBER, "2", 0),
        Token(OP, "*", 2),
        Token(LPAREN, "(", 4),
        Token(NAME, "x", 5),
        Token(OP, "+", 7),
        Token(NUMBER, "10", 9),
        Token(RPAREN, ")", 11),
    ]


def test_power_operator():
    assert [t.text for t in tokenize("a**2*b")] == ["a", "**", "2", "*", "b"]


def test_names_with_digits_and_underscores():
    assert tokenize("_tmp1 x2")[0] == Token(NAME, "_tmp1", 0)
    assert tokenize("_tmp1 x2")[1] == Token(NAME, "x2", 6)


def test_number_value():
    assert tokenize("42")[0].value == 42
    assert tokenize("x")[0].value == "x"


def test_unexpected_character():
    with pytest.raises(LexError) as info:
        tokenize("1 + $")
    assert info.value.pos == 4
    assert "position 4" in str(info.value)


def test_empty_input():
    assert tokenize("   ") == []
