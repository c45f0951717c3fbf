"""Turn source text into tokens."""

from calclex.errors import LexError
from calclex.tokens import LPAREN, NAME, NUMBER, OP, RPAREN, Token

SINGLE_OPERATORS = "+-*/%"
PARENS = {"(": LPAREN, ")": RPAREN}


def _scan_while(text, pos, predicate):
    while pos < len(text) and predicate(text[pos]):
        pos += 1
    return pos


def tokenize(text):
    """List of tokens in ``text``; whitespace only separates tokens."""
    tokens = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        start = pos
        if char.isspace():
            pos += 1
            continue
        if char.isdigit():
            pos = _scan_while(text, pos, str.isdigit)
            tokens.append(Token(NUMBER, text[start:pos], start))
        elif char.isalpha() or char == "_":
            pos = _scan_while(text, pos, lambda c: c.isalnum() or c == "_")
            tokens.append(Token(NAME, text[start:pos], start))
        elif text.startswith("**", pos):
            pos += 2
            tokens.append(Token(OP, "**", start))
        elif char in SINGLE_OPERATORS:
            pos += 1
            tokens.append(Token(OP, char, start))
        elif char in PARENS:
            pos += 1
            tokens.append(Token(PARENS[char], char, start))
        else:
            raise LexError(f"unexpected character {char!r}", pos)
    return tokens
