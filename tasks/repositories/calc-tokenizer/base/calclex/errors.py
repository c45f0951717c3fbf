"""Errors raised by the tokenizer."""


class LexError(ValueError):
    """Bad input; ``pos`` is the index of the offending character."""

    def __init__(self, message, pos):
        super().__init__(f"{message} at position {pos}")
        self.pos = pos
