"""A minimal INI reader and writer."""

from tinyini.convert import get_bool, get_int, get_list
from tinyini.parser import DEFAULT_SECTION, ParseError, parse
from tinyini.writer import dumps

__all__ = ["DEFAULT_SECTION", "ParseError", "dumps", "get_bool", "get_int", "get_list", "parse"]
