import pytest

from wraptext import break_long_word, justify, wrap

SAMPLE = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor"


@pytest.mark.parametrize(
    "text, width, expected",
    [
        ("aaa bbb", 7, ["aaa bbb"]),
        ("aaa bbb ccc", 7, ["aaa bbb", "ccc"]),
        ("a b c d", 3, ["a b", "c d"]),
        ("hello world", 5, ["hello", "world"]),
        ("abcdefgh", 4, ["abcd", "efgh"]),
        ("ab abcdefg", 3, ["ab", "abc", "def", "g"]),
        ("x abcdef", 3, ["x", "abc", "def"]),
    ],
)
def test_lines_may_use_the_full_width(text, width, expected):
    assert wrap(text, width) == expected


@pytest.mark.parametrize(
    "word, width, expected",
    [
        ("abcdefgh", 4, ["abcd", "efgh"]),
        ("abcdefghij", 3, ["abc", "def", "ghi", "j"]),
        ("abc", 1, ["a", "b", "c"]),
    ],
)
def test_break_long_word_pieces_have_width(word, width, expected):
    assert break_long_word(word, width) == expected


@pytest.mark.parametrize("width", range(11, 30))
def test_lines_never_exceed_width_and_keep_words(width):
    lines = wrap(SAMPLE, width)
    assert all(len(line) <= width for line in lines)
    assert " ".join(lines).split() == SAMPLE.split()
    for first, second in zip(lines, lines[1:]):
        assert len(first) + 1 + len(second.split()[0]) > width


def test_justify_full_width_line():
    assert justify("ab cd ef gh", 5) == "ab cd\nef gh"
