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
    """``{section: {key: value}}``; the ``DEFAULT`` section is always present."""
    data = {DEFAULT_SECTION: {}}
    section = DEFAULT_SECTION
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if line.startswith("["):
            section = _section_name(line, lineno)
            data.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ParseError(f"expected 'key = value', got {line!r}", lineno)
        data[section][key] = value.strip()
    return data
