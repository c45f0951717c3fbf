"""heldout: is checkpoint B really better than checkpoint A? A protocol, not a number."""

__version__ = "0.1.0"
