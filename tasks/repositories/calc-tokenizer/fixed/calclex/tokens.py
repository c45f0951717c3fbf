"""Token kinds and the ``Token`` tuple."""

from typing import NamedTuple

NUMBER = "NUMBER"
NAME = "NAME"
OP = "OP"
LPAREN = "LPAREN"
RPAREN = "RPAREN"


class Token(NamedTuple):
    kind: str
    text: str
    pos: int

    @property
    def value(self):
        """The number for ``NUMBER`` tokens, the text otherwise."""
        if self.kind == NUMBER:
            return float(self.text) if "." in self.text else int(self.text)
        return self.text
