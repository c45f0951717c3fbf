"""Greedy word wrapping and justification."""

from wraptext.justify import justify, justify_line
from wraptext.tokens import break_long_word, split_words
from wraptext.wrap import fill, wrap

__all__ = ["break_long_word", "fill", "justify", "justify_line", "split_words", "wrap"]
