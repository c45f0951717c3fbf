"""Greedy line filling."""

from wraptext.tokens import break_long_word, split_words


def _pieces(words, width, break_long_words):
    for word in words:
        if break_long_words and len(word) > width:
            yield from break_long_word(word, width)
        else:
            yield word


def wrap(text, width=70, break_long_words=True):
    """Wrap ``text`` into lines of at most ``width`` characters.

    Words are separated by single spaces. A word longer than ``width`` is
    split (see ``break_long_word``) or, with ``break_long_words=False``,
    put on a line of its own.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    current = ""
    for piece in _pieces(split_words(text), width, break_long_words):
        if not current:
            current = piece
        elif len(current) + 1 + len(piece) <= width:
            current += " " + piece
        else:
            lines.append(current)
            current = piece
    if current:
        lines.append(current)
    return lines


def fill(text, width=70, break_long_words=True):
    """``wrap`` joined with newlines."""
    return "\n".join(wrap(text, width, break_long_words))
