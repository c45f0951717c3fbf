from wraptext import justify, justify_line


def test_justify_line_distributes_left_first():
    assert justify_line("a b c", 8) == "a   b  c"


def test_justify_line_single_word():
    assert justify_line("word", 10) == "word"


def test_justify_keeps_last_line():
    assert justify("the quick brown fox", 10) == "the  quick\nbrown fox"
