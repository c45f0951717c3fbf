"""INI text to nested dictionaries."""

DEFAULT_SECTION = "DEFAULT"
COMMENT_PREFIXES = ("#", ";")


class ParseError(ValueError):
    def __init__(self, message, lineno):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _section_name(line, lineno):
    if not line.endswith("]"):
        raise ParseError("unterminated section header", lineno)
    name = line[1:-1].strip()
    if not name:
        raise ParseError("empty section name", lineno)
    return name


def parse(text):
    """``{section: {key: value}}``; the ``DEFAULT`` section is always present.

    An indented line continues the value of the key above it; the parts
    are joined with newlines.
    """
    data = {DEFAULT_SECTION: {}}
    section = DEFAULT_SECTION
    last_key = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if raw[0].isspace():
            if last_key is None:
                raise ParseError("continuation line without a key", lineno)
            data[section][last_key] += "\n" + line
            continue
        if line.startswith("["):
            section = _section_name(line, lineno)
            data.setdefault(section, {})
            last_key = None
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ParseError(f"expected 'key = value', got {line!r}", lineno)
        data[section][key] = value.strip()
        last_key = key
    return data
