"""Tokenizer and RPN converter for a small calculator language."""

from calclex.errors import LexError
from calclex.lexer import tokenize
from calclex.rpn import to_rpn
from calclex.tokens import LPAREN, NAME, NUMBER, OP, RPAREN, Token

__all__ = ["LPAREN", "LexError", "NAME", "NUMBER", "OP", "RPAREN", "Token", "to_rpn", "tokenize"]
