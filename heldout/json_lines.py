"""One line of an untrusted JSON Lines file (a samples file, the ledger, a task file), read
without a crash: whatever its bytes, the reader gets a value or one sentence saying why not.

Python's json does not fail politely on everything: a line nested 100,000 deep recurses past
the interpreter's limit (RecursionError), an integer of 5,000 digits exceeds int's string limit
(ValueError), invalid UTF-8 fails the decoding of the whole file. Here each line is decoded on
its own (`decode_line`), its nesting counted on the text before it is parsed (`nesting`: no
recursion), and integers longer than MAX_INT_DIGITS refused as they are parsed (`loads_line`).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # levels of arrays and objects in one line
MAX_INT_DIGITS = 4000  # below Python's own 4300, whose error is a bare ValueError
# A JSON string (escapes included), or one of the characters nesting and keys are made of.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:]')


class LineError(ValueError):
    """Why one line cannot be read; its message is the sentence to report with file:line."""


def json_error(error: json.JSONDecodeError) -> str:
    """Python's message with its place, whole: "Expecting ',' delimiter at column 9", and
    "Unterminated string starting at column 3" (that message ends in "at", its place after)."""
    where = (f"column {error.colno}" if error.lineno == 1
             else f"line {error.lineno}, column {error.colno}")
    return f"{error.msg} {where}" if error.msg.endswith(" at") else f"{error.msg} at {where}"


def decode_line(raw: bytes) -> str:
    """The line as text, or LineError naming the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LineError(f"not UTF-8: byte 0x{raw[error.start]:02x} at column "
                        f"{error.start + 1}; save the file as UTF-8") from None


def nesting(text: str, max_depth: int = MAX_DEPTH) -> tuple[bool, str | None]:
    """(whether `text` nests arrays and objects deeper than `max_depth`, the top-level key
    holding the deep part, if any), counted on the text: strings are skipped whole."""
    if text.count("[") + text.count("{") <= max_depth:
        return False, None
    depth, key, last = 0, None, None
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                return True, key
        elif token in ("]", "}"):
            depth -= 1
        elif token == ":":
            if depth == 1 and last is not None:
                key = _string(last)
        else:
            last = token if depth == 1 else None
    return False, None


def _string(token: str) -> str:
    try:
        return json.loads(token)
    except ValueError:
        return token[1:-1]


def _int(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise LineError(f"an integer of {digits} digits: at most {MAX_INT_DIGITS}")
    return int(literal)


def loads_line(text: str) -> Any:
    """The JSON value of one line, or LineError: not JSON (with the parser's message and
    column), nested deeper than MAX_DEPTH, or an integer past MAX_INT_DIGITS digits."""
    deep, _key = nesting(text)
    if deep:
        raise LineError(f"nested deeper than {MAX_DEPTH} levels of arrays and objects")
    try:
        return json.loads(text, parse_int=_int)
    except LineError:
        raise
    except json.JSONDecodeError as error:
        raise LineError(f"not JSON ({error.msg} at column {error.colno})") from None
    except (ValueError, RecursionError) as error:  # what the checks above leave: unexpected
        raise LineError(f"not JSON ({type(error).__name__})") from None


def read_line(raw: bytes) -> Any:
    """`loads_line` of the bytes of one line (`decode_line` first)."""
    return loads_line(decode_line(raw))
